"""A report run is a batch run: what a notebook's libraries print for a terminal (progress bars,
warnings, log records, machine paths) stays off the page and goes to the stage's log, while a real
error still shows with its traceback, in the page and on the index.

One module-scoped run of two tiny notebooks (two kernel starts): the first makes every kind of
noise on purpose, the second fails inside a library.
"""

from __future__ import annotations

import json
import re
import sys

import nbformat
import pytest
from conftest import write_notebook

from goalrm_core.paths import project_root, relative_paths
from goalrm_core.pipeline.batch_run import batch_environment
from goalrm_core.pipeline.runner import run_report
from goalrm_core.train.launch import _shown

KERNEL = "python3"

NOISY_CELLS = [
    'import warnings\nwarnings.warn("noisy on purpose", UserWarning)',
    'from tqdm.auto import tqdm\ntotal = sum(tqdm(range(3), desc="forced bar", disable=False))',
    'import logging\nlogging.getLogger("somelib").warning("a log record on purpose")',
    # DeepSpeed's own logger: a stdout handler, no propagation (as deepspeed.utils.logging sets it up)
    'import sys\nds = logging.getLogger("DeepSpeed")\nds.propagate = False\n'
    'ds.addHandler(logging.StreamHandler(sys.stdout))\nds.warning("Setting accelerator to CPU on purpose")',
    'from goalrm_core.paths import project_root\nproject_root() / "runs" / "somewhere"',
    # a subprocess that forces its bar on, warns and prints a path, shown through run_streaming's tail
    "from goalrm_core.study.live import tail_view\nfrom goalrm_core.train.launch import run_streaming\n"
    'child = ("import warnings; from tqdm import tqdm; from goalrm_core.paths import project_root; "\n'
    "         \"s = sum(tqdm(range(3), desc='child bar', disable=False)); warnings.warn('child warning'); \"\n"
    "         \"print('CHILD_DONE saved', project_root() / 'runs' / 'child')\")\n"
    'run_streaming([sys.executable, "-c", child], log_dir + "/child.log", desc="child", show=tail_view(5, "child"))',
    'print("VISIBLE_LINE", total)',
]
HEADINGS = nbformat.v4.new_markdown_cell(
    "# A noisy stage\n\n## First section\ntext\n\n### A subsection\n\n## Second section"
)
FAILING_CELLS = ['import json\njson.loads("{not json")']


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    root = tmp_path_factory.mktemp("batch")
    nbs, params = root / "notebooks", root / "params"
    nbs.mkdir(), params.mkdir()
    for name, cells in (("01_noisy.ipynb", NOISY_CELLS), ("02_broken.ipynb", FAILING_CELLS)):
        write_notebook(nbs / name, 'log_dir = "."', *cells, head=HEADINGS)
    (params / "quiet.yaml").write_text(
        f"log_dir: {json.dumps(str(root / 'logs'))}\ntorch_threads: 1\n", encoding="utf-8"
    )
    lines: list[str] = []
    code = run_report(
        "quiet",
        notebooks_dir=nbs,
        params_dir=params,
        reports_root=root / "reports",
        kernel_name=KERNEL,
        log=lines.append,
        logs_dir=root / "logs",
    )
    return {"code": code, "out": root / "reports" / "quiet", "logs": root / "logs", "lines": lines}


def _page(batch, name: str) -> str:
    return (batch["out"] / f"{name}.html").read_text(encoding="utf-8")


@pytest.mark.notebook
def test_noise_stays_off_the_page(batch):
    page = _page(batch, "01_noisy")
    assert "VISIBLE_LINE 3" in page and "CHILD_DONE saved runs/child" in page
    assert "runs/somewhere" in page  # a Path display, relative to the project
    for noise in (
        "noisy on purpose",
        "on purpose",
        "child warning",
        "it/s",
        "forced bar",
        "child bar",
        "Warning:",
        str(project_root()),
        sys.prefix,
    ):
        assert noise not in page, noise


@pytest.mark.notebook
def test_noise_goes_to_the_stage_log(batch):
    log = (batch["logs"] / "01_noisy.log").read_text(encoding="utf-8")
    assert "UserWarning: noisy on purpose" in log
    assert "a log record on purpose" in log and "Setting accelerator to CPU on purpose" in log
    assert "cell/s" in log and "papermill" in log  # papermill's bar and records
    assert "VISIBLE_LINE 3" in log  # a transcript of the cells' output
    # the subprocess's full output, bar included, is in its own log
    assert "child bar" in (batch["logs"] / "child.log").read_text(encoding="utf-8")


@pytest.mark.notebook
def test_a_real_error_still_shows_with_its_traceback(batch):
    assert batch["code"] == 1
    page = _page(batch, "02_broken")
    assert "Traceback" in page and "JSONDecodeError" in page
    assert "json/decoder.py" in page  # the library frame is kept, its folder abbreviated
    for machine in (str(project_root()), sys.prefix, sys.base_prefix):
        assert machine not in page
    index = (batch["out"] / "index.html").read_text(encoding="utf-8")
    assert "JSONDecodeError" in index
    assert any("FAILED" in line and "02_broken.log" in line for line in batch["lines"])


@pytest.mark.notebook
def test_pages_have_navigation_and_contents(batch):
    first, second = _page(batch, "01_noisy"), _page(batch, "02_broken")
    assert '<a href="index.html">' in first and '<a href="02_broken.html">02_broken' in first
    assert '<a href="01_noisy.html">' in second and '<a href="index.html">' in second
    contents = re.search(r'<nav class="goalrm-toc".*?</nav>', first, re.DOTALL).group(0)
    assert [m for m in re.findall(r'href="#([^"]+)"', contents)] == ["First-section", "A-subsection", "Second-section"]
    for anchor in ("First-section", "A-subsection", "Second-section"):
        assert f'id="{anchor}"' in first
    assert "<title>A noisy stage</title>" in first
    assert "cdnjs" not in first.split("<body", 1)[0]  # nothing loaded from a CDN it does not need


# ------------------------------------------------------------------------------- no kernel needed


def test_relative_paths():
    root = project_root()
    assert relative_paths(f"saved {root / 'runs' / 'x'} and {root}") == "saved runs/x and ."
    shown = relative_paths(f"File {sys.prefix}/lib/site.py")
    assert sys.prefix not in shown and shown.endswith("/lib/site.py")
    assert relative_paths("no paths here") == "no paths here"


def test_live_tail_drops_bars_only_when_bars_are_off(monkeypatch):
    bar = "train-rm:  83%|████████▎ | 5/6 [00:00<00:00, 57.26it/s, acc=0.53]eval step 3: accuracy 0.480"
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    assert _shown(bar) == bar
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert _shown(bar) == "eval step 3: accuracy 0.480"
    assert _shown("x\rtoy-id/all:  54%|█████ | 27/50 [00:01<00:02, 1.20s/it]") == ""
    assert _shown(f"saved {project_root() / 'runs'}") == "saved runs"


def test_batch_environment_turns_bars_and_warnings_off(tmp_path):
    env = batch_environment(tmp_path / "x.log")
    assert env["TQDM_DISABLE"] == "1" and env["TRANSFORMERS_VERBOSITY"] == "error"
    assert env["PYTHONWARNINGS"] == "ignore" and env["GOALRM_STAGE_LOG"] == str(tmp_path / "x.log")
    if "DS_ACCELERATOR" in env:  # only where DeepSpeed would fall back to the CPU anyway
        import torch

        assert env["DS_ACCELERATOR"] == "cpu" and not torch.cuda.is_available()
