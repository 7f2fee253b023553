"""The reader's check (``pages.raw_outputs``): it finds each kind of raw repr on a page built the way
nbconvert builds one, passes a clean page, and finds none on the committed reports' pages (``reports/demo``,
``reports/confident``)."""

import html

import pandas as pd
import pytest

from goalrm_core.paths import resolve_path
from goalrm_core.report.pages import raw_outputs
from goalrm_core.study import formatting as fmt


def text_output(text: str) -> str:
    return (
        '<div class="jp-RenderedText jp-OutputArea-output jp-OutputArea-executeResult" data-mime-type="text/plain" '
        f'tabindex="0">\n<pre>{html.escape(text)}</pre>\n</div>'
    )


def html_output(table_html: str) -> str:
    return f'<div class="jp-RenderedHTMLCommon jp-RenderedHTML jp-OutputArea-output">{table_html}</div>'


@pytest.mark.parametrize(
    "text, what",
    [
        ("DecodeConfig(beam_size=4, samples_per_step=4)", "config repr"),
        ("toy-id    32\ntoy-zero  32\nName: questions decoded, dtype: int64", "pandas Series"),
        ("{'baseline': (1, 128)}", "Python dict, tuple or list"),
        ("(1, 128)", "Python dict, tuple or list"),
        ("reports/demo/metrics.json", "bare path"),
        ("<matplotlib.figure.Figure at 0x7f00deadbeef>", "object repr"),
    ],
)
def test_each_raw_repr_is_found(text, what):
    found = raw_outputs(text_output(text))
    assert any(line.startswith(what) for line in found), found


def test_a_pandas_index_and_a_none_cell_are_found():
    frame = pd.DataFrame({"benchmark": ["toy-id", "toy-zero"], "p-value": [0.5, None]})
    found = raw_outputs(html_output(frame.to_html()))
    assert any(line.startswith("pandas index as a column") for line in found), found
    assert any("'NaN' in a table cell" in line or "'None' in a table cell" in line for line in found), found


def test_booleans_and_keys_as_headers_are_found():
    frame = pd.DataFrame({"rule": ["Q"], "meets target": [True], "pearson ci low": [0.1], "prefix_wrong": [0.2]})
    found = raw_outputs(html_output(frame.to_html(index=False)))
    assert "'True' in a table cell" in found, found
    assert any("a key as a column header: 'pearson ci low'" in line for line in found), found
    assert any("a key as a column header: 'prefix_wrong'" in line for line in found), found
    shown = fmt.show(frame.rename(columns={"meets target": "meets_target", "pearson ci low": "pearson_ci_low"}))
    assert not [line for line in raw_outputs(html_output(shown._repr_html_())) if "True" in line]


def test_a_shown_table_and_plain_prose_are_clean():
    frame = pd.DataFrame(
        {"benchmark": ["toy-zero", "toy-id"], "auroc": [0.7, None], "ci_low": [0.6, None], "ci_high": [0.8, None]}
    )
    shown = fmt.show(frame.set_index("benchmark"))
    assert list(shown.frame.columns)[0] == "benchmark"  # the index became a column
    page = html_output(shown._repr_html_()) + text_output(
        "goal-conditioned, toy-id: AUROC 0.820 [0.750, 0.880] over 300 generations"
    )
    assert raw_outputs(page) == []


def test_wide_puts_benchmarks_in_report_order():
    long = pd.DataFrame(
        {
            "scorer": ["a", "a", "a", "a"],
            "benchmark": ["toy-unseen", "toy-zero", "toy-times", "toy-id"],
            "value": ["1", "2", "3", "4"],
        }
    )
    grid = fmt.wide(long, "scorer", "benchmark", "value")
    assert list(grid.columns) == ["scorer", "toy-id", "toy-zero", "toy-times", "toy-unseen"]


COMMITTED = sorted(resolve_path("reports/demo").glob("*.html")) + sorted(
    resolve_path("reports/confident").glob("*.html")
)


@pytest.mark.parametrize("page", COMMITTED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_report_pages_show_no_raw_reprs(page):
    found = raw_outputs(page.read_text(encoding="utf-8"))
    assert not found, "\n".join(found[:20])


def test_printed_progress_lines_are_not_values():
    printed = (
        '<div class="jp-RenderedText jp-OutputArea-output" data-mime-type="text/plain" tabindex="0">\n'
        "<pre>[baseline seed 0]\ntrain: 170 pairs</pre>\n</div>"
    )
    assert raw_outputs(printed) == []
    assert (
        raw_outputs(printed.replace("[baseline seed 0]", "DecodeConfig(beam_size=4)")) != []
    )  # a repr is one even printed
