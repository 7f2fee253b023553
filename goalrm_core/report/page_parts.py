"""The small pieces the result sections of a report's ``index.html`` are built from: a value read down a
path of ``metrics.json`` (missing keys and non-mappings give the default), the benchmarks a run
recorded, one scorer's AUROC with its interval, the primary findings' section, a matplotlib figure as
an embedded PNG and a data frame as an HTML table (undefined cells written ``undefined``).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping
from typing import Any

from goalrm_core.study import formatting as fmt
from goalrm_core.study.rms import RMS


def get_path(tree: Any, *keys, default=None):
    for key in keys:
        if not isinstance(tree, Mapping) or key not in tree:
            return default
        tree = tree[key]
    return tree


def schema_version(metrics: Mapping) -> int:
    """``metrics.json``'s schema: its ``schema_version``, 1 when absent (or unreadable)."""
    try:
        return int(metrics.get("schema_version", 1))
    except (TypeError, ValueError):
        return 1


def benchmarks_in(ev: Mapping) -> list[str]:
    names = [b for b, v in (get_path(ev, "delta_auroc", default={}) or get_path(ev, RMS[0], default={}) or {}).items()
             if isinstance(v, Mapping)]
    return fmt.order_benchmarks(names)


def auroc_of(ev: Mapping, scorer: str, bench: str) -> tuple[Any, Any, Any]:
    row = get_path(ev, scorer, bench, default={})
    row = row if isinstance(row, Mapping) else {}
    return row.get("auroc"), row.get("auroc_ci_low"), row.get("auroc_ci_high")


def auroc_text(ev: Mapping, scorer: str, bench: str) -> str:
    return fmt.ci(*auroc_of(ev, scorer, bench), reason=fmt.reason_of(get_path(ev, scorer, bench), "auroc"))


def png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return f'<img alt="figure" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def html_table(df) -> str:
    return df.to_html(index=False, escape=True, border=0, na_rep=fmt.UNDEFINED)


def primary_of(metrics: Mapping) -> Mapping:
    p = get_path(metrics, "evaluation", "primary")
    return p if isinstance(p, Mapping) else {}


