"""Seaborn figures for the notebooks: each function takes tidy data and returns a matplotlib Figure."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg") if not matplotlib.get_backend().lower().startswith(("module://matplotlib_inline", "nbagg", "widget")) else None

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

sns.set_theme(style="whitegrid", context="notebook")


def line_curve(df: pd.DataFrame, x: str, y: str, hue: str | None = None, title: str = "", smooth: int = 1):
    """A training curve; ``smooth`` > 1 applies a rolling mean per hue group."""
    data = df.copy()
    if smooth > 1:
        group = data.groupby(hue)[y] if hue else data[y]
        data[y] = group.transform(lambda s: s.rolling(smooth, min_periods=1).mean()) if hue else group.rolling(smooth, min_periods=1).mean()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    sns.lineplot(data=data, x=x, y=y, hue=hue, ax=ax, errorbar=("ci", 95) if hue else None)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def accuracy_bars(table: pd.DataFrame, title: str = "Policy accuracy per benchmark"):
    """``table`` indexed by benchmark with greedy_accuracy and sample_accuracy columns."""
    long = table.reset_index().melt(id_vars="benchmark", value_vars=["greedy_accuracy", "sample_accuracy"],
                                    var_name="decoding", value_name="accuracy")
    long["decoding"] = long["decoding"].str.replace("_accuracy", "")
    fig, ax = plt.subplots(figsize=(7, 3.5))
    sns.barplot(data=long, x="benchmark", y="accuracy", hue="decoding", ax=ax)
    ax.set_ylim(0, 1)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def distribution(df: pd.DataFrame, x: str, hue: str, col: str | None = None, title: str = "", bins: int = 30, stat: str = "density"):
    """Histograms of ``x`` split by ``hue`` (for example correct vs incorrect), one panel per ``col``."""
    grid = sns.displot(data=df, x=x, hue=hue, col=col, bins=bins, stat=stat, common_norm=False,
                       element="step", height=3, aspect=1.2, col_wrap=4 if col else None)
    grid.figure.suptitle(title, y=1.03)
    return grid.figure
