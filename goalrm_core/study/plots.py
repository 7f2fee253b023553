"""Seaborn figures for the notebooks: each function takes tidy data and returns a matplotlib Figure."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg") if not matplotlib.get_backend().lower().startswith(
    ("module://matplotlib_inline", "nbagg", "widget")
) else None

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

sns.set_theme(style="whitegrid", context="notebook")


def line_curve(
    df: pd.DataFrame,
    x: str,
    y: str,
    hue: str | None = None,
    title: str = "",
    smooth: int = 1,
    xlabel: str | None = None,
    ylabel: str | None = None,
):
    """A training curve; ``smooth`` > 1 applies a rolling mean per hue group; ``xlabel``/``ylabel``
    name the axes with their units (default: the column names)."""
    data = df.copy()
    if smooth > 1:
        group = data.groupby(hue)[y] if hue else data[y]
        data[y] = (
            group.transform(lambda s: s.rolling(smooth, min_periods=1).mean())
            if hue
            else group.rolling(smooth, min_periods=1).mean()
        )
    fig, ax = plt.subplots(figsize=(7, 3.5))
    sns.lineplot(data=data, x=x, y=y, hue=hue, ax=ax, errorbar=("ci", 95) if hue else None)
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel or y)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def accuracy_bars(table: pd.DataFrame, title: str = "Policy accuracy per benchmark"):
    """``table`` indexed by benchmark with greedy_accuracy and sample_accuracy columns."""
    long = table.reset_index().melt(
        id_vars="benchmark",
        value_vars=["greedy_accuracy", "sample_accuracy"],
        var_name="decoding",
        value_name="accuracy",
    )
    long["decoding"] = long["decoding"].str.replace("_accuracy", "")
    fig, ax = plt.subplots(figsize=(7, 3.5))
    sns.barplot(data=long, x="benchmark", y="accuracy", hue="decoding", ax=ax)
    ax.set_ylim(0, 1)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def distribution(
    df: pd.DataFrame,
    x: str,
    hue: str,
    col: str | None = None,
    title: str = "",
    bins: int = 30,
    stat: str = "density",
    discrete: bool = False,
    xlabel: str | None = None,
):
    """Histograms of ``x`` split by ``hue`` (for example correct vs incorrect), one panel per ``col``;
    ``discrete`` draws side-by-side bars for integer values. ``xlabel`` names the x axis (default: ``x``)."""
    shape = dict(discrete=True, multiple="dodge", shrink=0.8) if discrete else dict(bins=bins, element="step")
    grid = sns.displot(
        data=df,
        x=x,
        hue=hue,
        col=col,
        stat=stat,
        common_norm=False,
        height=3,
        aspect=1.2,
        col_wrap=4 if col else None,
        **shape,
    )
    grid.set_axis_labels(xlabel or x, stat)
    grid.figure.suptitle(title, y=1.03)
    return grid.figure


def scatter_panels(df: pd.DataFrame, x: str, y: str, hue: str, col: str, title: str = ""):
    grid = sns.relplot(
        data=df, x=x, y=y, hue=hue, col=col, s=12, alpha=0.6, height=3.5, facet_kws={"sharex": False, "sharey": False}
    )
    grid.figure.suptitle(title, y=1.03)
    return grid.figure


def auroc_bars(table: pd.DataFrame, title: str = "AUROC of the reward per benchmark (95% CI)"):
    """Bars per benchmark and scorer with bootstrap CI error bars; the dashed line is chance."""
    data = table.dropna(subset=["auroc"])
    scorers = list(dict.fromkeys(data["scorer"]))
    benches = list(dict.fromkeys(data["benchmark"]))
    fig, ax = plt.subplots(figsize=(9, 3.8))
    width = 0.8 / max(1, len(scorers))
    palette = sns.color_palette("deep", len(scorers))
    for i, scorer in enumerate(scorers):
        rows = data[data["scorer"] == scorer].set_index("benchmark").reindex(benches)
        xs = [b + (i - (len(scorers) - 1) / 2) * width for b in range(len(benches))]
        err = [rows["auroc"] - rows["ci_low"], rows["ci_high"] - rows["auroc"]]
        ax.bar(xs, rows["auroc"], width, yerr=err, capsize=2, label=scorer, color=palette[i])
    ax.axhline(0.5, ls="--", c="grey", lw=1)
    ax.set_xticks(range(len(benches)), benches)
    ax.set_ylim(0.0, 1.05)  # from 0: every bar's length and every CI whisker is whole
    ax.set_ylabel("AUROC (0.5 = chance)")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))  # outside: never over the bars
    fig.tight_layout()
    return fig


def seed_points(per_seed: pd.DataFrame, title: str = "AUROC of every RM seed (95% bootstrap CI)"):
    """One point per (RM, seed) and benchmark with its bootstrap CI, seeds side by side."""
    rms = list(dict.fromkeys(per_seed["scorer"]))
    benches = list(dict.fromkeys(per_seed["benchmark"]))
    seeds = sorted(per_seed["rm_seed"].unique())
    fig, ax = plt.subplots(figsize=(9, 3.6))
    palette = sns.color_palette("deep", len(rms))
    slots = len(rms) * len(seeds)
    for i, rm in enumerate(rms):
        for j, s in enumerate(seeds):
            rows = (
                per_seed[(per_seed["scorer"] == rm) & (per_seed["rm_seed"] == s)]
                .set_index("benchmark")
                .reindex(benches)
            )
            k = i * len(seeds) + j
            xs = [b + (k - (slots - 1) / 2) * 0.8 / slots for b in range(len(benches))]
            err = [rows["auroc"] - rows["ci_low"], rows["ci_high"] - rows["auroc"]]
            ax.errorbar(
                xs, rows["auroc"], yerr=err, fmt="o", ms=4, capsize=2, color=palette[i], label=rm if j == 0 else None
            )
    ax.axhline(0.5, ls="--", c="grey", lw=1)
    ax.set_xticks(range(len(benches)), benches)
    ax.set_ylabel("AUROC")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    return fig


def savings_panels(df: pd.DataFrame, title: str = "Accuracy against generated tokens"):
    """One panel per method (columns method, benchmark, tokens, accuracy, end): a line per benchmark
    from the unfiltered point (open circle) to the filtered/pruned one (dot)."""
    methods = list(dict.fromkeys(df["method"]))
    benches = list(dict.fromkeys(df["benchmark"]))
    palette = dict(zip(benches, sns.color_palette("deep", len(benches))))
    fig, axes = plt.subplots(1, len(methods), figsize=(4.6 * len(methods), 3.6), sharey=True, squeeze=False)
    for ax, method in zip(axes[0], methods):
        for bench in benches:
            g = df[(df["method"] == method) & (df["benchmark"] == bench)].sort_values("end")
            if g.empty:
                continue
            ax.plot(g["tokens"], g["accuracy"], color=palette[bench], lw=1.2)
            start, end = g[~g["end"]], g[g["end"]]
            ax.scatter(start["tokens"], start["accuracy"], facecolors="none", edgecolors=palette[bench], s=36)
            ax.scatter(end["tokens"], end["accuracy"], color=palette[bench], s=30, label=bench)
        ax.set_title(method)
        low = float(df["tokens"].min())
        ax.set_xlim(max(0.0, low - 0.05 * (1.02 - low) - 0.01), 1.02)  # the span the points cover
    axes[0][0].set_ylabel("majority-vote accuracy")
    axes[0][-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.supxlabel("tokens generated, as a share of every sample in full", fontsize=11)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def partial_auroc_curves(df: pd.DataFrame, benchmark: str | None = None, title: str | None = None):
    """AUROC against the response percentile, one line per RM and signal, with CI bands; the title
    names the ``benchmark``."""
    title = title or f"AUROC of partial generations{f' on {benchmark}' if benchmark else ''} (95% CI)"
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for (rm, signal), g in df.groupby(["rm", "signal"]):
        g = g.sort_values("percentile")
        ax.plot(g["percentile"], g["auroc"], marker="o", ms=3, label=f"{rm} · {signal}")
        ax.fill_between(g["percentile"], g["ci_low"], g["ci_high"], alpha=0.15)
    ax.axhline(0.5, ls="--", c="grey", lw=1)
    ax.set_xlabel("fraction of the response seen")
    ax.set_ylabel("AUROC (0.5 = chance)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def q_trajectories(rows, first_error_tokens, n_each: int = 3, seed: int = 0, title: str = "Q-value along a generation"):
    """Q-value per response token for a few generations, one panel each: correct ones on the top row,
    incorrect ones (with a known first error, the dashed line) below, on one y scale."""
    import random

    rng = random.Random(seed)
    correct = [i for i, r in enumerate(rows) if r["is_correct"]]
    wrong = [i for i, r in enumerate(rows) if not r["is_correct"] and first_error_tokens[i] is not None]
    picked = [
        ("correct", "tab:green", rng.sample(correct, min(n_each, len(correct)))),
        ("incorrect", "tab:red", rng.sample(wrong, min(n_each, len(wrong)))),
    ]
    picked = [p for p in picked if p[2]]
    n_cols = max([len(p[2]) for p in picked] + [1])
    fig, axes = plt.subplots(
        max(len(picked), 1), n_cols, figsize=(3.2 * n_cols, 2.4 * max(len(picked), 1)), sharey=True, squeeze=False
    )
    for ax in axes.flat:
        ax.set_visible(False)
    for row, (label, colour, idxs) in enumerate(picked):
        for col, i in enumerate(idxs):
            ax = axes[row][col]
            ax.set_visible(True)
            q = rows[i]["cosine_sim"]
            ax.plot(range(len(q)), q, c=colour, lw=1.3)
            e = first_error_tokens[i]
            ax.set_title(label if e is None else f"{label}, first error at token {e}", fontsize=9)
            if e is not None:
                ax.axvline(e, ls="--", c="black", lw=1)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=5))
            if row == len(picked) - 1:
                ax.set_xlabel("response token")
        axes[row][0].set_ylabel("Q (cosine to goal)")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def q_by_token_type(frame: pd.DataFrame, title: str = "Q per response token, by token type"):
    """Box plots of Q per token type, on prefixes still right (blue) and already wrong (orange):
    when the boxes move more between token types than between the two colours, an absolute Q
    threshold reacts to the kind of character rather than to the error."""
    order = [
        t for t in ("digit", "operator", "=", "newline", "#", "space", "EOS", "other") if t in set(frame["token_type"])
    ]
    shown = frame.assign(prefix=frame["prefix_wrong"].map({False: "prefix right", True: "prefix already wrong"}))
    fig, ax = plt.subplots(figsize=(8, 3.8))
    sns.boxplot(
        data=shown,
        x="token_type",
        y="q",
        hue="prefix",
        order=order,
        hue_order=["prefix right", "prefix already wrong"],
        fliersize=1,
        linewidth=0.8,
        ax=ax,
    )
    ax.set_xlabel("token type")
    ax.set_ylabel("Q (cosine to the goal state)")
    ax.set_title(title)
    ax.legend(fontsize=8, title=None)
    fig.tight_layout()
    return fig


def filter_frontier(
    frontier: pd.DataFrame, chosen: pd.DataFrame, title: str = "Majority-vote accuracy against tokens saved"
):
    """Every rule's candidate thresholds on the test questions (lines), the threshold chosen on the
    validation questions (large markers), plain majority voting (x = 0) and the oracle that stops
    every incorrect solution at its first error (star)."""
    fig, ax = plt.subplots(figsize=(8, 4.2))
    rules = [r for r in dict.fromkeys(frontier["rule"])]
    palette = dict(zip(rules, sns.color_palette("tab10", len(rules))))
    for rule in rules:
        f = frontier[frontier["rule"] == rule].sort_values("tokens_saved_pct")
        ax.plot(f["tokens_saved_pct"], 100 * f["accuracy"], "-", lw=1, alpha=0.6, c=palette[rule])
        c = chosen[chosen["rule"] == rule]
        ax.plot(c["tokens_saved_pct"], 100 * c["accuracy"], "o", ms=8, c=palette[rule], label=rule)
    oracle = chosen[chosen["rule"].str.startswith("oracle")]
    ax.plot(oracle["tokens_saved_pct"], 100 * oracle["accuracy"], "*", ms=14, c="black", label="oracle (first error)")
    if len(chosen):
        ax.axhline(
            100 * chosen["accuracy_unfiltered"].iloc[0], ls=":", c="grey", lw=1, label="majority vote, no filter"
        )
    return _finish(fig, ax, "tokens saved (% of all sampled tokens)", "majority-vote accuracy (%)", title)


def _finish(fig, ax, xlabel: str, ylabel: str, title: str):
    """A frontier figure's axis labels, title and legend (lower left, where a frontier leaves room)."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig


def verifier_frontier(frontier: pd.DataFrame, title: str = "Step verifiers as filters"):
    """Each verifier's filter frontier (columns verifier, share_of_oracle, accuracy_change, chosen; one row
    per candidate threshold, e.g. ``step_bench.frontier_frame``): tokens saved as a share of the oracle's
    saving against the change in majority-vote accuracy, one line per verifier, the threshold the
    validation questions chose as a large marker; the oracle sits at (100%, its own change), plain
    voting at (0, 0), and the dotted line is the 1-point budget."""
    fig, ax = plt.subplots(figsize=(8, 4.2))
    verifiers = list(dict.fromkeys(frontier["verifier"]))
    palette = dict(zip(verifiers, sns.color_palette("tab10", len(verifiers))))
    for verifier in verifiers:
        f = frontier[frontier["verifier"] == verifier].sort_values("share_of_oracle")
        ax.plot(
            100 * f["share_of_oracle"],
            100 * f["accuracy_change"],
            "-",
            lw=1,
            alpha=0.7,
            c=palette[verifier],
            label=verifier,
        )
        c = f[f["chosen"]]
        ax.plot(100 * c["share_of_oracle"], 100 * c["accuracy_change"], "o", ms=8, c=palette[verifier])
    ax.axhline(-1.0, ls=":", c="grey", lw=1, label="1 point below plain voting")
    ax.axvline(100.0, ls="--", c="black", lw=0.8, label="the oracle's saving")
    return _finish(fig, ax, "tokens saved (% of the oracle's saving)", "majority-vote accuracy change (points)", title)


def sweep_curve(df: pd.DataFrame, key: str, title: str = ""):
    """A metric against the values of one swept key (columns x, series, value, ci_low, ci_high), one
    line per series with its 95% CI band; values that are not all numbers are categories, drawn as
    points with error bars side by side."""
    series = list(dict.fromkeys(df["series"]))
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in df["x"])
    categories = list(dict.fromkeys(df["x"])) if not numeric else []
    palette = sns.color_palette("deep", len(series))
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for i, name in enumerate(series):
        g = df[df["series"] == name]
        if numeric:
            g = g.sort_values("x")
            ax.plot(g["x"], g["value"], marker="o", ms=4, color=palette[i], label=name)
            ax.fill_between(g["x"], g["ci_low"], g["ci_high"], color=palette[i], alpha=0.15)
        else:
            offset = (i - (len(series) - 1) / 2) * 0.8 / max(1, len(series))
            xs = [categories.index(v) + offset for v in g["x"]]
            ax.errorbar(
                xs,
                g["value"],
                yerr=[g["value"] - g["ci_low"], g["ci_high"] - g["value"]],
                fmt="o",
                ms=5,
                capsize=3,
                color=palette[i],
                label=name,
            )
    if not numeric:  # category names slanted, so long ones never overlap
        ax.set_xticks(range(len(categories)), [str(c) for c in categories], rotation=25, ha="right")
    ax.axhline(0.5, ls="--", c="grey", lw=1)
    ax.set_xlabel(key)
    ax.set_ylabel("AUROC (0.5 = chance)")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    return fig


def first_error_profile_frame(profile) -> pd.DataFrame:
    """A recorded ``evaluation.first_error_profile`` (``{rm: {seed: {offsets, mean_q, n}}}``, plus
    ``benchmark`` and ``window``) as tidy rows (rm, rm_seed, offset, mean_q), undefined offsets left out."""
    import math

    rows = []
    for rm, seeds in profile.items():
        if not isinstance(seeds, dict):
            continue
        for seed, prof in seeds.items():
            if not isinstance(prof, dict):
                continue
            for offset, q in zip(prof.get("offsets") or [], prof.get("mean_q") or []):
                if isinstance(q, (int, float)) and math.isfinite(q):
                    rows.append({"rm": rm, "rm_seed": int(seed), "offset": int(offset), "mean_q": float(q)})
    return pd.DataFrame(rows, columns=["rm", "rm_seed", "offset", "mean_q"])


def first_error_profiles(
    profile, title: str = "Q along incorrect solutions, around the first error (0 = first wrong token)"
):
    """One panel per RM: the mean Q of the incorrect solutions at each token offset from their first
    wrong token (0, the dashed line), a line per RM seed, from a recorded profile
    (:func:`first_error_profile_frame`)."""
    df = first_error_profile_frame(profile)
    rms = list(dict.fromkeys(df["rm"]))
    seeds = sorted(df["rm_seed"].unique())
    palette = dict(zip(seeds, sns.color_palette("deep", len(seeds))))
    fig, axes = plt.subplots(1, len(rms), figsize=(4.8 * len(rms), 3.4), sharey=True, squeeze=False)
    for ax, rm in zip(axes[0], rms):
        for s in seeds:
            g = df[(df["rm"] == rm) & (df["rm_seed"] == s)].sort_values("offset")
            ax.plot(g["offset"], g["mean_q"], marker="o", ms=3, lw=1.2, color=palette[s], label=f"seed {s}")
        ax.axvline(0, ls="--", c="grey", lw=1)
        ax.set_title(f"{rm} RM")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("tokens from the first error")
    axes[0][0].set_ylabel("mean Q (cosine to the goal state)")
    axes[0][-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.suptitle(title)
    fig.tight_layout()
    return fig
