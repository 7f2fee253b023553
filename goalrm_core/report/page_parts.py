"""The small pieces the result sections of a report's ``index.html`` are built from: the reads of
``metrics.json`` they share (through :mod:`~goalrm_core.report.metrics_view`), a matplotlib figure as
an embedded PNG and a data frame as an HTML table (undefined cells written ``undefined``).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping
from typing import Any

from goalrm_core.report.metrics_view import Auroc, Metrics, value as get_path  # noqa: F401 (the findings read it here)
from goalrm_core.study import formatting as fmt


def benchmarks_in(ev: Mapping) -> list[str]:
    return Metrics({"evaluation": ev}).benchmarks


def auroc_of(ev: Mapping, scorer: str, bench: str) -> tuple[Any, Any, Any]:
    return Auroc.of(get_path(ev, scorer, bench)).triple


def auroc_text(ev: Mapping, scorer: str, bench: str) -> str:
    return Auroc.of(get_path(ev, scorer, bench)).text()


def png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return f'<img alt="figure" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def html_table(df) -> str:
    return df.to_html(index=False, escape=True, border=0, na_rep=fmt.UNDEFINED)


def primary_of(metrics: Mapping) -> Mapping:
    return Metrics(metrics).primary
