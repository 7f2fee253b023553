"""The two pieces every result section of a report's pages is drawn with: a matplotlib figure as an
embedded PNG and a data frame as an HTML table (undefined cells written ``undefined``). The sections
read ``metrics.json`` through :mod:`~goalrm_core.report.metrics_view`.
"""

from __future__ import annotations

import base64
import io

from goalrm_core.report.templating import part
from goalrm_core.study import formatting as fmt


def png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return part("figure", src=f"data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}")


def html_table(df) -> str:
    return df.to_html(index=False, escape=True, border=0, na_rep=fmt.UNDEFINED)
