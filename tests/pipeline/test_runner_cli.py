"""``goalrm report`` as a researcher meets it: the index and status.json agree after the index itself
fails, Ctrl-C leaves a resumable run and exit code 130, ``--set`` values and the profile's own are
checked (types, ranges, choices, "did you mean") before any stage starts.

Most tests replace ``execute_stage`` with a stand-in (no kernel starts); the two marked ``notebook``
run tiny notebooks for real: the index failure across runs, and a real SIGINT from inside a cell.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import pytest
import yaml
from conftest import write_notebook

from goalrm_core.paths import resolve_path
from goalrm_core.pipeline import records, runner, signals
from goalrm_core.pipeline import status as report_status
from goalrm_core.pipeline.profile_checks import check_ranges, check_settings
from goalrm_core.pipeline.profile_files import load_profile
from goalrm_core.pipeline.profile_rules import PROFILE_RULES, RELATIONS
from goalrm_core.pipeline.profile_values import parse_set_flags
from goalrm_core.pipeline.runner import main, run_report

KERNEL = "python3"


@pytest.fixture(autouse=True)
def python_s_own_signal_handlers():
    """Each test starts with Python's own SIGINT and SIGTERM handling, whatever a test run before it in
    the same process (one pytest-xdist worker runs many) left behind; a child process inherits an ignored
    signal, so the command-line runs below need this too."""
    import signal

    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for number, handler in before.items():
        signal.signal(number, handler if handler is not None else signal.SIG_DFL)


PROFILE = {"seed": 3, "torch_threads": 1, "sampling_temperature": 1.5, "n_samples": 4, "rm": {"encoding": "split"}}


def _project(root, profile: dict | None = None, body02: tuple[str, ...] = ()) -> dict:
    """Three notebooks (01 records metrics; 02 declares sampling_temperature and encoding), a profile
    ``tiny`` (the trainer's ``encoding`` in its ``rm:`` block; ``profile``'s own ``rm:`` block is merged into
    it key by key) and the flags that point ``goalrm report`` at them."""
    nbs, params = root / "notebooks", root / "params"
    nbs.mkdir(parents=True)
    params.mkdir()
    write_notebook(
        nbs / "01_alpha.ipynb",
        'reports_dir = "reports/demo"\nseed = 0\nn_samples = 8',
        'record_metrics("alpha", {"seed": seed, "explode": True}, reports_dir)',
    )
    write_notebook(
        nbs / "02_beta.ipynb",
        'run_dir = "runs/demo"\nsampling_temperature = 1.7\nencoding = "split"\npid_file = ""',
        *(body02 or ('print("beta", sampling_temperature)',)),
    )
    write_notebook(nbs / "03_gamma.ipynb", 'profile = "demo"', 'print("gamma done")')
    values = {**PROFILE, "run_dir": str(root / "run"), "pid_file": str(root / "kernel.pid"), **(profile or {})}
    values["rm"] = {**PROFILE["rm"], **(profile or {}).get("rm", {})}
    (params / "tiny.yaml").write_text(yaml.safe_dump(values), encoding="utf-8")
    flags = [
        "--profile",
        "tiny",
        "--kernel",
        KERNEL,
        "--notebooks-dir",
        str(nbs),
        "--params-dir",
        str(params),
        "--reports-dir",
        str(root / "reports"),
    ]
    kwargs = dict(
        notebooks_dir=nbs, params_dir=params, reports_root=root / "reports", kernel_name=KERNEL, logs_dir=root / "logs"
    )
    return {"root": root, "flags": flags, "kwargs": kwargs, "out": root / "reports" / "tiny", "run": root / "run"}


def _status(out) -> dict:
    return json.loads((out / "status.json").read_text())


def _states(out) -> dict:
    return {s["name"]: s["status"] for s in _status(out)["stages"]}


class FakeStages:
    """``execute_stage`` without a kernel: records what each stage was given; raises
    KeyboardInterrupt in the stage named ``interrupt``."""

    def __init__(self, interrupt: str | None = None):
        self.interrupt, self.calls = interrupt, []

    def __call__(self, notebook, output, parameters, kernel_name, cwd, log_path=None):
        self.calls.append((notebook.stem, dict(parameters)))
        if notebook.stem == self.interrupt:
            time.sleep(0.05)
            raise KeyboardInterrupt
        return None, False


# ----------------------------------------------------------------------- index and status agree


def _fragile_index(real):
    """render_index, failing (with markup in its message) once metrics.json holds alpha.explode."""

    def render(profile, generated, stages, metrics, out_dir):
        if isinstance(metrics.get("alpha"), dict) and metrics["alpha"].get("explode"):
            raise RuntimeError("<b>section</b> exploded")
        return real(profile, generated, stages, metrics, out_dir)

    return render


def _fallback_states(page: str) -> dict:
    rows = re.findall(
        r"<tr><td>(?:<a [^>]*>)?([0-9]{2}_\w+)(?:</a>)?</td><td>(?:<span [^>]*>)?([a-z ]+)(?:</span>)?</td>", page
    )
    return dict(rows)


@pytest.mark.notebook
def test_index_and_status_agree_when_the_index_fails(tmp_path, monkeypatch, capsys):
    p = _project(tmp_path)
    monkeypatch.setattr(report_status, "render_index", _fragile_index(report_status.render_index))
    lines: list[str] = []
    assert run_report("tiny", log=lines.append, **p["kwargs"]) == 0  # the stages all ran
    status = _status(p["out"])
    assert _states(p["out"]) == {"01_alpha": "ok", "02_beta": "ok", "03_gamma": "ok"}
    assert status["index_error"] == {"ename": "RuntimeError", "evalue": "<b>section</b> exploded"}
    page = (p["out"] / "index.html").read_text()
    assert _fallback_states(page) == _states(p["out"])  # the page says what status.json says
    assert "running" not in page and "The full index could not be drawn" in page
    assert "&lt;b&gt;section&lt;/b&gt; exploded" in page and "<b>section</b>" not in page
    assert sum("index.html is the fallback page" in line for line in lines) == 1

    # resuming works on such a run, and the last run's durations give the ETA
    lines.clear()
    assert run_report("tiny", from_stage="03", log=lines.append, **p["kwargs"]) == 0
    start = next(line for line in lines if " running — " in line)
    assert start.startswith("[1/1 03_gamma] running — log: ") and "(last run: " in start
    assert _states(p["out"]) == {"01_alpha": "kept", "02_beta": "kept", "03_gamma": "ok"}
    assert _fallback_states((p["out"] / "index.html").read_text()) == _states(p["out"])

    # --index-only too: the fallback page again (exit 1: the full page is still not there) ...
    before = (p["out"] / "status.json").read_text()
    capsys.readouterr()
    assert main([*p["flags"], "--index-only"]) == 1
    err = capsys.readouterr().err
    assert "could not be drawn" in err and err.count("\n") == 1
    assert (p["out"] / "status.json").read_text() == before
    # ... and, once rendering works again, the full page, with status.json saying so
    monkeypatch.undo()
    assert main([*p["flags"], "--index-only"]) == 0
    page = (p["out"] / "index.html").read_text()
    assert "<h2>Stages</h2>" in page and 'class="status kept"' in page and "could not be drawn" not in page
    assert _status(p["out"])["index_error"] is None
    assert [s["status"] for s in _status(p["out"])["stages"]] == ["kept", "kept", "ok"]


def test_the_fallback_page_escapes_everything(tmp_path):
    stages = [
        {
            "name": "01_<x>",
            "status": "failed",
            "duration_s": 1.5,
            "started": "<t>",
            "html": "01.html",
            "error": {"ename": "E<", "evalue": "<script>alert(1)</script>"},
        },
        "garbage",
    ]
    page = report_status._fallback_index("<p>", "now", stages, {"ename": "X", "evalue": "<i>"}, tmp_path)
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;i&gt;" in page and "01_&lt;x&gt;" in page
    assert "1.5 s" in page and "garbage" in page and "<a href" not in page  # 01.html does not exist


# ----------------------------------------------------------------------------------------- Ctrl-C


def test_ctrl_c_marks_the_stage_interrupted_and_exits_130(tmp_path, monkeypatch, capsys):
    p = _project(tmp_path)
    fake = FakeStages(interrupt="02_beta")
    monkeypatch.setattr(runner, "execute_stage", fake)
    p["out"].mkdir(parents=True)
    (p["out"] / "02_beta.html").write_text("an older run's page")
    records.record_stage(p["run"], "02_beta", {"run_dir": str(p["run"])})  # an older run's record

    assert main(p["flags"]) == 130
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and captured.err.count("\n") == 1
    line = captured.err.strip()
    match = re.fullmatch(r"goalrm report: interrupted in 02_beta after \d+\.\d s; resume with (goalrm report .*)", line)
    assert match, line
    assert match.group(1).startswith("goalrm report --profile tiny --from 02 ")
    assert "[2/3 02_beta] running — " in captured.out  # flushed before the stage began

    assert _states(p["out"]) == {"01_alpha": "ok", "02_beta": "interrupted", "03_gamma": "not run"}
    entry = _status(p["out"])["stages"][1]
    assert entry["error"]["ename"] == "KeyboardInterrupt" and isinstance(entry["duration_s"], float)
    page = (p["out"] / "index.html").read_text()
    assert (
        'class="status interrupted"' in page
        and 'class="status not-run"' in page
        and 'class="status running"' not in page
    )
    assert not (p["out"] / "02_beta.html").exists()  # not this run's page
    assert not (p["run"] / "stages" / "02_beta.json").exists()  # the stage's artifacts are not current

    # the printed command resumes the run
    fake.interrupt = None
    assert main(shlex.split(match.group(1))[2:]) == 0
    assert _states(p["out"]) == {"01_alpha": "kept", "02_beta": "ok", "03_gamma": "ok"}
    assert [c[0] for c in fake.calls] == ["01_alpha", "02_beta", "02_beta", "03_gamma"]


class _Killed(BaseException):
    """SIGKILL, as far as the runner can tell: nothing of its own runs after it (no ``except`` it has)."""


class PageWritingStages(FakeStages):
    """``execute_stage`` without a kernel that writes each stage's executed notebook (so the runner exports
    its page) and stops in stage ``interrupt`` as ``how`` says: Ctrl-C, SIGTERM or a kill."""

    def __init__(self, interrupt: str | None = None, how: str = "Ctrl-C"):
        super().__init__(interrupt)
        self.how = how

    def __call__(self, notebook, output, parameters, kernel_name, cwd, log_path=None):
        import nbformat

        self.calls.append((notebook.stem, dict(parameters)))
        if notebook.stem == self.interrupt:
            raise {"Ctrl-C": KeyboardInterrupt, "SIGTERM": signals.Terminated, "killed": _Killed}[self.how]()
        cell = nbformat.v4.new_markdown_cell(f"# {notebook.stem}\n\n## Results\n\nstage {notebook.stem} ran")
        nbformat.write(nbformat.v4.new_notebook(cells=[cell]), str(output))
        return None, True


def _files(out, names) -> dict:
    """Each named stage's notebook and page: (bytes, st_mtime_ns)."""
    found = {}
    for name in names:
        for path in (out / f"{name}.ipynb", out / f"{name}.html"):
            found[path.name] = (path.read_bytes(), path.stat().st_mtime_ns)
    return found


@pytest.mark.parametrize(
    "stopped, how, earlier",
    [
        *[
            (stopped, how, earlier)
            for stopped in ("02_beta", "03_gamma")
            for how in ("Ctrl-C", "killed")
            for earlier in ("first run", "after a complete run")
        ],
        ("02_beta", "SIGTERM", "after a complete run"),
    ],
)
def test_a_resumed_run_leaves_the_kept_stages_pages_as_they_are(tmp_path, monkeypatch, stopped, how, earlier):
    """(53, item 3) a run stopped in a stage (Ctrl-C and SIGTERM drop its pages; a kill leaves an older run's), then
    resumed from it: the stages before it are kept, and a kept stage's notebook and page stand as they are (same
    bytes, same mtime), though the resumed stage's page appears next to them."""
    p = _project(tmp_path)
    names = ["01_alpha", "02_beta", "03_gamma"]
    if earlier == "after a complete run":
        monkeypatch.setattr(runner, "execute_stage", PageWritingStages())
        assert run_report("tiny", log=lambda _: None, **p["kwargs"]) == 0
    monkeypatch.setattr(runner, "execute_stage", PageWritingStages(interrupt=stopped, how=how))
    with pytest.raises(KeyboardInterrupt if how != "killed" else _Killed):
        run_report("tiny", log=lambda _: None, **p["kwargs"])
    before = names[: names.index(stopped)]
    assert all(_states(p["out"])[n] == "ok" for n in before)
    old = 1_000_000_000  # an mtime no write today gives the file: a rewrite shows, however coarse the clock
    for name in before:
        for path in (p["out"] / f"{name}.ipynb", p["out"] / f"{name}.html"):
            os.utime(path, ns=(old, old))
    kept = _files(p["out"], before)

    fake = PageWritingStages()
    monkeypatch.setattr(runner, "execute_stage", fake)
    assert run_report("tiny", from_stage=stopped[:2], log=lambda _: None, **p["kwargs"]) == 0
    assert [c[0] for c in fake.calls] == names[names.index(stopped) :]
    assert _states(p["out"]) == {n: "kept" if n in before else "ok" for n in names}
    assert _files(p["out"], before) == kept
    assert all((p["out"] / f"{n}.html").exists() for n in names)


def test_rerunning_one_stage_leaves_the_other_stages_pages_as_they_are(tmp_path, monkeypatch):
    """(53, item 3) ``--only 02`` after a complete run, the stage failing before it wrote anything (its pages
    dropped): 01 and 03 are kept, and their notebooks and pages stand as they are."""
    p = _project(tmp_path)
    monkeypatch.setattr(runner, "execute_stage", PageWritingStages())
    assert run_report("tiny", log=lambda _: None, **p["kwargs"]) == 0
    others = ["01_alpha", "03_gamma"]
    old = 1_000_000_000
    for name in others:
        for path in (p["out"] / f"{name}.ipynb", p["out"] / f"{name}.html"):
            os.utime(path, ns=(old, old))
    kept = _files(p["out"], others)
    monkeypatch.setattr(runner, "execute_stage", lambda *args, **kwargs: (RuntimeError("no kernel"), False))
    assert run_report("tiny", only=["02"], log=lambda _: None, **p["kwargs"]) == 1
    assert _states(p["out"]) == {"01_alpha": "kept", "02_beta": "failed", "03_gamma": "kept"}
    assert not (p["out"] / "02_beta.html").exists()
    assert _files(p["out"], others) == kept


def test_ctrl_c_reaches_callers_of_run_report_as_a_keyboard_interrupt(tmp_path, monkeypatch):
    p = _project(tmp_path)
    monkeypatch.setattr(runner, "execute_stage", FakeStages(interrupt="01_alpha"))
    with pytest.raises(KeyboardInterrupt) as caught:  # a sweep stops too
        run_report("tiny", log=lambda _: None, **p["kwargs"])
    stop = caught.value
    assert isinstance(stop, runner.ReportInterrupted) and stop.stage == "01_alpha" and stop.resume_from == "01_alpha"
    assert stop.describe().startswith("interrupted in 01_alpha after ")
    assert stop.describe().endswith("; resume with goalrm report --profile tiny --from 01")
    assert _states(p["out"]) == {"01_alpha": "interrupted", "02_beta": "not run", "03_gamma": "not run"}


def test_sigterm_is_an_interrupt_too(tmp_path, monkeypatch, capsys):
    p = _project(tmp_path)

    def terminated(notebook, *args, **kwargs):
        raise runner.Terminated()

    monkeypatch.setattr(runner, "execute_stage", terminated)
    assert main(p["flags"]) == 143
    err = capsys.readouterr().err
    assert err.startswith("goalrm report: interrupted (SIGTERM) in 01_alpha after ") and err.count("\n") == 1
    assert _status(p["out"])["stages"][0]["error"]["evalue"] == "interrupted (SIGTERM)"


def test_a_signal_during_a_paired_write_waits_for_the_end_of_it():
    import os
    import signal

    done = []
    with pytest.raises(KeyboardInterrupt):
        with signals.interrupts_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
            done.append("both files")
    assert done == ["both files"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.notebook
@pytest.mark.parametrize("signal_name, code, how", [("SIGINT", 130, ""), ("SIGTERM", 143, " (SIGTERM)")])
def test_a_real_signal_stops_the_kernel_and_leaves_no_traceback(tmp_path, signal_name, code, how):
    """The signal to the runner while a cell runs (Ctrl-C reaches the runner alone: the kernel has a
    session of its own)."""
    import psutil

    cell = (
        "import os, signal, time, pathlib\n"
        "pathlib.Path(pid_file).write_text(str(os.getpid()))\n"
        f"os.kill(int(os.environ.get('JPY_PARENT_PID') or os.getppid()), signal.{signal_name})\n"
        "time.sleep(120)"
    )
    p = _project(tmp_path, body02=(cell,))
    done = subprocess.run(
        [sys.executable, "-m", "goalrm_core.cli", "report", *p["flags"]],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=resolve_path("."),
    )
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert re.match(
        rf"goalrm report: interrupted{re.escape(how)} in 02_beta after \d+\.\d s; resume with goalrm report "
        r"--profile tiny --from 02 ",
        done.stderr,
    ), done.stderr
    assert _states(p["out"]) == {"01_alpha": "ok", "02_beta": "interrupted", "03_gamma": "not run"}
    kernel = int((tmp_path / "kernel.pid").read_text())
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if psutil.Process(kernel).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.2)
    else:
        pytest.fail("the stage's kernel outlived the interrupted run")


# ------------------------------------------------------------------------------------- --set


def test_set_values_are_yaml_and_reach_the_notebooks(tmp_path, monkeypatch, capsys):
    p = _project(tmp_path)
    fake = FakeStages()
    monkeypatch.setattr(runner, "execute_stage", fake)
    assert (
        main([*p["flags"], "--set", "sampling_temperature=2", "--set", "rm.encoding=official", "--set", "n_samples=6"])
        == 0
    )
    given = dict(fake.calls)
    assert given["02_beta"]["sampling_temperature"] == 2.0 and isinstance(
        given["02_beta"]["sampling_temperature"], float
    )
    assert given["02_beta"]["encoding"] == "official" and given["01_alpha"]["n_samples"] == 6
    # a changed experiment gets its own report and run folders, never the profile's
    assert not p["out"].exists() and "reports to" in capsys.readouterr().out
    out = p["out"].parent / "tiny-set"
    prov = json.loads((out / "metrics.json").read_text())["provenance"]["profile"]
    assert prov["overrides"] == {
        "encoding": "official",
        "n_samples": 6,
        "run_dir": "runs/tiny-set",
        "sampling_temperature": 2.0,
    }
    assert prov["parameters"]["sampling_temperature"] == 2.0 and prov["parameters"]["seed"] == 3
    shutil.rmtree(resolve_path("runs/tiny-set"))  # the default run folder of a --set run, which 02_beta noted itself in


def test_parse_set_flags():
    assert parse_set_flags(["a=4", "b=1e-5", "c=true", "d=[0, 1]", "e=cosine", "f=", "g='7'", "h=null"]) == {
        "a": 4,
        "b": 1e-05,
        "c": True,
        "d": [0, 1],
        "e": "cosine",
        "f": "",
        "g": "7",
        "h": None,
    }
    for bad, message in [
        ("a", "expected KEY=VALUE"),
        ("=1", "expected KEY=VALUE"),
        ("a=.nan", "not a finite number"),
        ("a={b: 1}", "must be a scalar"),
        ("a=[1, [2]]", "must be a scalar"),
        ("a=[1", "not a YAML value"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_set_flags([bad])
    with pytest.raises(ValueError, match="'a' is given twice"):
        parse_set_flags(["a=1", "a=2"])


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--set", "sampling_temprature=1"],
            r"^--set: key 'sampling_temprature' is not a parameter of any notebook; "
            r"did you mean sampling_temperature\?$",
        ),
        (["--set", "sampling_temperature=-1"], r"^--set: sampling_temperature must be a finite number > 0, got -1$"),
        (["--set", "sampling_temperature=hot"], r"^--set: key 'sampling_temperature' expects float .*got str: 'hot'$"),
        (["--set", "rm.encoding=utf8"], r"^--set: unknown encoding 'utf8'; valid: official, split$"),
        (["--set", "n_samples=0"], r"^--set: n_samples must be an integer >= 1, got 0$"),
        (
            ["--set", "torch_threads=0"],
            r"^--set: torch_threads must be an integer >= 1 \(pinned: floats depend on it\), got 0$",
        ),
        (["--set", "reports_dir=x"], r"^--set: key 'reports_dir' is the runner's to set"),
        (["--set", "seed"], r"^--set 'seed': expected KEY=VALUE$"),
        (["--index-only", "--set", "seed=1"], r"--set has no effect"),
        (["--set", "seed=1", "--only", "99"], r"^unknown stage '99': stages are 01_alpha, 02_beta, 03_gamma$"),
        (["--set", "seed=1", "--from", "03"], r"never succeeded"),
    ],
)
def test_bad_set_values_stop_before_any_stage(tmp_path, monkeypatch, capsys, flags, message):
    p = _project(tmp_path)
    fake = FakeStages()
    monkeypatch.setattr(runner, "execute_stage", fake)
    assert main([*p["flags"], *flags]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("goalrm report: error: ")
    assert re.search(message, err.strip()[len("goalrm report: error: ") :]), err
    assert fake.calls == [] and not p["out"].exists()
    # the notice of where a --set run reports comes only once its values passed, and no folder is left behind
    assert "reports to" not in out and not (p["out"].parent / "tiny-set").exists()


def test_a_list_on_the_command_line_is_written_either_way(tmp_path, monkeypatch, capsys):
    p = _project(tmp_path, profile={"rm_seeds": [0]})
    write_notebook(tmp_path / "notebooks" / "03_gamma.ipynb", 'profile = "demo"\nrm_seeds = [0]', "print(rm_seeds)")
    fake = FakeStages()
    monkeypatch.setattr(runner, "execute_stage", fake)
    for typed in ("rm_seeds=0,1", "rm_seeds=[0, 1]"):
        assert main([*p["flags"], "--set", typed, "--set", f"run_dir={tmp_path / 'run-lists'}", "--name", "lists"]) == 0
        assert dict(fake.calls)["03_gamma"]["rm_seeds"] == [0, 1]
        fake.calls.clear()
    assert main([*p["flags"], "--set", "rm_seeds=x"]) == 2
    assert capsys.readouterr().err.strip().endswith("got str: 'x'; a list is written [0, 1]")


def test_command_line_profiles_point_to_their_command(capsys):
    """`goalrm report` lists the notebook profiles, with the command-line ones apart; given one of those,
    it names the command that runs it instead of listing the ~70 keys the profile does not set."""
    assert main(["--profile", "nosuch"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        "are: confident, confident-power, demo, multidigit, smoke "
        "(run by `python -m goalrm_core.paper`, not the notebooks: " in err
    )
    assert main(["--profile", "paper-math"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "goalrm report: error: params/paper-math.yaml is a command-line profile, not a notebook one: run "
        "`python -m goalrm_core.paper script --profile paper-math` (docs/migration.md)"
    )
    from goalrm_core.pipeline import sweep

    with pytest.raises(ValueError, match=r"gpu-check\.yaml is a command-line profile.*paper gpu-check"):
        sweep.plan_sweep("gpu-check", {"seed": [1, 2]})


# ------------------------------------------------------------------------------ ranges up front


@pytest.mark.parametrize(
    "values, message",
    [
        ({"sampling_temperature": -1}, r"^tiny\.yaml: sampling_temperature must be a finite number > 0, got -1$"),
        ({"rm": {"encoding": "utf8"}}, r"^tiny\.yaml: unknown encoding 'utf8'; valid: official, split$"),
        ({"n_samples": 0}, r"^tiny\.yaml: n_samples must be an integer >= 1, got 0$"),
        ({"torch_threads": 0}, r"^tiny\.yaml: torch_threads must be an integer >= 1"),
    ],
)
def test_the_profile_files_values_are_checked_before_any_stage(tmp_path, monkeypatch, capsys, values, message):
    p = _project(tmp_path, profile=values)
    fake = FakeStages()
    monkeypatch.setattr(runner, "execute_stage", fake)
    assert main(p["flags"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    shown = err[len("goalrm report: error: ") :]
    assert re.search(message, shown.rsplit("/", 1)[-1]), err  # the file is named (relative where it can be)
    assert fake.calls == [] and not p["out"].exists()


def test_the_demo_profile_lists_every_key_and_passes(tmp_path):
    from goalrm_core.study.recipe import RM_KEYS

    demo = load_profile("demo")
    assert set(demo) <= set(PROFILE_RULES), sorted(set(demo) - set(PROFILE_RULES))
    written_out = set(PROFILE_RULES) - set(RM_KEYS)  # the rules that are not the trainer's rm: block
    assert written_out <= set(demo), sorted(written_out - set(demo))
    for name in ("demo", "smoke", "multidigit", "confident"):
        check_ranges(load_profile(name), f"params/{name}.yaml")
    for keys, _, _ in RELATIONS:
        assert set(keys) <= set(PROFILE_RULES)


def test_every_profile_key_says_what_it_is():
    """One line of help per key: the notebook keys' own, the trainer keys' from the trainer's flag."""
    import dataclasses

    from goalrm_core.pipeline.profile_rules import PROFILE_HELP
    from goalrm_core.study.recipe import TRAINER_KEYS
    from goalrm_core.train.config import TrainRMConfig

    assert list(PROFILE_HELP) == list(PROFILE_RULES)
    for key, text in PROFILE_HELP.items():
        assert isinstance(text, str) and text.strip() and "\n" not in text, key
    flags = {f.name: f for f in dataclasses.fields(TrainRMConfig)}
    for key in TRAINER_KEYS:  # the rm: block's keys and the seed, each under the trainer's own name
        assert PROFILE_HELP[key] == flags[key].metadata["help"], key


def test_every_notebook_key_has_a_rule():
    from goalrm_core.pipeline.notebook_params import RUNNER_KEYS
    from goalrm_core.pipeline.runner import discover_stages, inspect_stages

    declared = inspect_stages(discover_stages(resolve_path("notebooks")))
    keys = {k for params in declared.values() for k in params} - set(RUNNER_KEYS)
    assert keys <= set(PROFILE_RULES), sorted(keys - set(PROFILE_RULES))


def test_the_rules_agree_with_the_library():
    """The readers' and the model's choices reach profiles.py through torch-free modules (no model
    import to check a profile): they must be the ones the code acting on them uses; the trainer's
    ranges are the trainer's."""
    import dataclasses

    from goalrm_core.inference.forward import READOUTS
    from goalrm_core.inference.goal_state import GOAL_METHODS
    from goalrm_core.model.encoding import ENCODINGS
    from goalrm_core.model.losses import CONTRASTIVE_STRATEGIES, PAIR_FORMS, PERCENTILE_WINDOWS
    from goalrm_core.model.reward_model import VALUE_HEAD_STRATEGIES
    from goalrm_core.study.artifacts import HEADLINE_SETS
    from goalrm_core.study.recipe import TRAINER_KEYS
    from goalrm_core.train.config import TrainRMConfig

    choices = {
        "goal_method": GOAL_METHODS,
        "encoding": ENCODINGS,
        "readout": READOUTS,
        "headline": HEADLINE_SETS,
        "contrastive_strategy": CONTRASTIVE_STRATEGIES,
        "contrastive_pairs": PAIR_FORMS,
        "contrastive_window": PERCENTILE_WINDOWS,
        "value_head_strategy": VALUE_HEAD_STRATEGIES,
    }
    for key, options in choices.items():
        assert set(PROFILE_RULES[key].options) == set(options), key
    fields = {f.name: f for f in dataclasses.fields(TrainRMConfig)}
    for key in TRAINER_KEYS:  # a trainer key checks its value as the trainer's flag of the same name does
        meta = fields[key].metadata
        if "range" in meta:
            assert PROFILE_RULES[key] is meta["range"], key
        elif "choices" in meta:
            assert set(PROFILE_RULES[key].options) == set(meta["choices"]), key
        else:  # a flag with neither: any value of its type, as the trainer takes it
            assert PROFILE_RULES[key] is None, key
    assert set(PROFILE_RULES["zero_stage"].options) == {0, 1, 2, 3}


@pytest.mark.parametrize(
    "values, message",
    [
        ({"sampling_temperature": 0}, "sampling_temperature must be a finite number > 0, got 0"),
        ({"decode_temperature": -0.5}, "decode_temperature must be a finite number >= 0 (0 = greedy), got -0.5"),
        ({"max_steps": -1}, "max_steps must be an integer >= 0 (0 = the epochs), got -1"),
        ({"val_fraction": 0.0}, "val_fraction must be a finite number in (0, 1), got 0.0"),
        ({"eval_fraction": 1}, "eval_fraction must be a finite number in (0, 1), got 1"),
        ({"readout": "first"}, "unknown readout 'first'; valid: eos, last_token"),
        ({"goal_method": "median"}, "unknown goal_method 'median'; valid: mean_last, random_response"),
        ({"headline": "best"}, "unknown headline 'best'; valid: greedy, sample0"),
        (
            {"rm_seeds": [0, 0]},
            "rm_seeds must be a non-empty list of distinct values, each an integer >= 0, got [0, 0]",
        ),
        ({"operations": "+/"}, "operations must be a non-empty string of distinct operators from '+-*', got '+/'"),
        ({"sampling_temperature": float("nan")}, "sampling_temperature must be a finite number > 0, got nan"),
        ({"min_chain_steps": 4, "max_chain_steps": 3}, "max_chain_steps (3) must be >= min_chain_steps (4)"),
        (
            {"train_batch_size": 32, "micro_train_batch_size": 5, "rm_processes": 1},
            "rm.train_batch_size (32) must be a multiple of",
        ),
    ],
)
def test_ranges_choices_and_relations(values, message):
    with pytest.raises(ValueError) as caught:
        check_ranges({**load_profile("smoke"), **values}, "params/smoke.yaml")
    assert str(caught.value).startswith("params/smoke.yaml: ") and message in str(caught.value)
    with pytest.raises(ValueError, match=r"^--set: "):  # a value given elsewhere is named where it came from
        check_ranges({**load_profile("smoke"), **values}, "params/smoke.yaml", sources={k: "--set" for k in values})


def test_sweep_and_report_share_the_checks(tmp_path):
    from goalrm_core.pipeline import profile_checks, profile_values, sweep

    assert sweep.parse_value is profile_values.parse_value and sweep.check_ranges is profile_checks.check_ranges
    assert sweep._parse_set(["rm_seeds=[0, 1]", "rm.contrastive_loss_beta=1e-1"]) == {
        "rm_seeds": [0, 1],
        "contrastive_loss_beta": 0.1,
    }
    declared = {"01_a": {"sampling_temperature": {"inferred_type_name": "None", "default": "1.7"}}}
    with pytest.raises(ValueError, match=r"^p 1: sampling_temperature must be a finite number > 0, got -1$"):
        sweep.check_point({"sampling_temperature": -1}, declared, source="p 1")
    assert check_settings({"sampling_temperature": 2.0, "sampling_temprature": 1}, declared, "p.yaml") == [
        "p.yaml: key 'sampling_temprature' is not a parameter of any notebook; did you mean sampling_temperature?"
    ]


def test_a_users_run_never_writes_a_tracked_file():
    """`make report` (and `goalrm sweep`) report under a git-ignored folder by default, so running the main
    job first cannot move the committed reference pages that the suite's drift tests read; the resume
    hint names the folder only where it is not the default."""
    import inspect
    import shutil

    from goalrm_core.paths import resolve_path
    from goalrm_core.pipeline import sweep

    assert runner.build_parser().parse_args([]).reports_dir == runner.USER_REPORTS
    assert inspect.signature(run_report).parameters["reports_root"].default == runner.USER_REPORTS
    assert inspect.signature(sweep.plan_sweep).parameters["reports_root"].default == runner.USER_REPORTS
    assert runner.USER_REPORTS != runner.REFERENCE_REPORTS
    hint = runner.resume_command(runner.build_parser().parse_args(["--profile", "demo"]), "03_representations")
    assert hint == "goalrm report --profile demo --from 03"
    maintainer = runner.build_parser().parse_args(["--reports-dir", runner.REFERENCE_REPORTS])
    assert runner.resume_command(maintainer, "03").endswith(f"--reports-dir {runner.REFERENCE_REPORTS}")
    root = resolve_path(".")
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("not a git checkout: whether the folder is ignored cannot be asked")
    page = f"{runner.USER_REPORTS}/demo/index.html"
    ignored = subprocess.run(["git", "check-ignore", "-q", page], cwd=root)
    assert ignored.returncode == 0, f"{page} is not git-ignored"
    tracked = subprocess.run(
        ["git", "ls-files", f"{runner.REFERENCE_REPORTS}/demo/index.html"], cwd=root, capture_output=True, text=True
    )
    assert tracked.stdout.strip(), "the committed reference report is where the drift tests read it"


def test_a_running_stage_says_where_it_is_until_it_ends(tmp_path):
    """The terminal hears from a long stage at every beat: time in, time left by the last run, and the
    last line of its log (a progress bar's latest state); nothing after the stage ends."""
    log_path = tmp_path / "02_training.log"
    log_path.write_text(
        "papermill starts\nbaseline seed 0: 400 steps, held-out accuracy 0.816\n\nsteps:  10%|#  | 40/400\r"
        "steps:  20%|## | 80/400\r"
    )
    lines: list[str] = []
    with runner.heartbeat("[2/5 02_training]", log_path, 3600.0, lines.append, every=0.05):
        time.sleep(0.3)
    assert lines and all(line.startswith("[2/5 02_training] 0s in, ETA ~") for line in lines)
    assert lines[-1].endswith(" — steps:  20%|## | 80/400")
    n = len(lines)
    time.sleep(0.2)
    assert len(lines) == n  # stopped with the stage
    lines.clear()
    with runner.heartbeat("[1/1 x]", None, None, lines.append, every=0.05):
        time.sleep(0.2)
    assert lines and lines[0] == "[1/1 x] 0s in, no earlier run to estimate from"
    assert runner.last_log_line(tmp_path / "absent.log") == ""
    assert len(runner.last_log_line(log_path, width=10)) == 10


def test_a_dry_run_checks_everything_prints_the_plan_and_runs_nothing(tmp_path, monkeypatch, capsys):
    p = _project(tmp_path)
    fake = FakeStages()
    monkeypatch.setattr(runner, "execute_stage", fake)
    assert main([*p["flags"], "--dry-run", "--only", "01", "02"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        out[0].startswith("goalrm report --dry-run: profile 'tiny' and every --set checked") and "2 stage(s)" in out[0]
    )
    assert out[1:3] == ["  01_alpha: no estimate", "  02_beta: no estimate"] and out[-1] == "nothing was run"
    assert "no earlier run of this profile" in out[-2]
    assert fake.calls == [] and not p["out"].exists() and not p["run"].exists()
    # a bad --set is refused as in a real run
    assert main([*p["flags"], "--dry-run", "--set", "n_samples=0"]) == 2
    # after a run, the estimate is that run's stage times
    assert main(p["flags"]) == 0
    capsys.readouterr()
    fake.calls.clear()
    assert main([*p["flags"], "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"  03_gamma: ~\d+s\n", out) and "estimated from the last run in" in out and fake.calls == []


def _reference_report(tmp_path, monkeypatch, durations, matmul_gflops):
    """A committed reference report of profile 'tiny' under ``tmp_path/reference`` (each stage's time in
    ``durations``, run at ``matmul_gflops``), where the runner looks for it."""
    folder = tmp_path / "reference" / "tiny"
    folder.mkdir(parents=True)
    stages = [{"name": name, "status": "ok", "duration_s": seconds} for name, seconds in durations.items()]
    (folder / "status.json").write_text(json.dumps({"stages": stages}))
    speed = {"matmul_gflops": matmul_gflops}
    (folder / "metrics.json").write_text(json.dumps({"provenance": {"machine": {"speed": speed}}}))
    monkeypatch.setattr(runner, "REFERENCE_REPORTS", str(tmp_path / "reference"))


def test_a_first_run_takes_its_eta_from_the_committed_report(tmp_path, monkeypatch, capsys):
    """In a report folder with no earlier run, the stage lines' ETA is the committed reference report's time
    scaled to this machine's speed, and says so."""
    p = _project(tmp_path)
    _reference_report(tmp_path, monkeypatch, dict.fromkeys(("01_alpha", "02_beta", "03_gamma"), 60.0), 100.0)
    monkeypatch.setattr(runner, "execute_stage", FakeStages())
    assert main(p["flags"]) == 0
    first = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("[1/3 01_alpha] running"))
    assert re.search(r"ETA ~\d+(m\d+)?s \(estimated from the committed report: [\d.]+ s\), ~\d", first), first
    assert main(p["flags"]) == 0  # the second run has its own last run
    assert "(last run: " in capsys.readouterr().out


# ----------------------------------------------------------------------- progress and ETA (53, item 4)


class TrainingStage(FakeStages):
    """A stage that trains an RM: its trainer's progress file appears in the stage's progress folder, as
    ``train_rm`` places it in a report run, and the stage runs on past a heartbeat."""

    def __call__(self, notebook, output, parameters, kernel_name, cwd, log_path=None):
        from goalrm_core.pipeline.batch_run import batch_environment
        from goalrm_core.train.progress_file import PROGRESS_DIR_VAR, ProgressWriter, progress_path

        self.calls.append((notebook.stem, dict(parameters)))
        env = batch_environment(log_path)  # what the stage's kernel, and so its trainings, inherit
        assert env[PROGRESS_DIR_VAR].endswith(f"{notebook.stem}.progress")
        writer = ProgressWriter(
            progress_path(resolve_path(parameters["run_dir"]) / "logs" / "train-baseline-seed1.log", env),
            total=2400,
            label="baseline seed 1",
        )
        writer.started -= 210.0  # 840 steps in 210 s: 1560 left at 0.25 s
        writer.update(840, force=True)
        time.sleep(0.4)
        return None, False


def test_each_rm_s_step_and_eta_reach_the_stage_line(tmp_path, monkeypatch, capsys):
    p = _project(tmp_path)
    monkeypatch.setattr(runner, "execute_stage", TrainingStage())
    monkeypatch.setattr(runner, "HEARTBEAT_S", 0.1)
    assert main([*p["flags"], "--only", "02"]) == 0
    beats = [
        line for line in capsys.readouterr().out.splitlines() if line.startswith("[1/1 02_beta] ") and " in, " in line
    ]
    assert beats, "no heartbeat line"
    assert re.search(r" — baseline seed 1: step 840/2400, ETA 6m\d\ds$", beats[-1]), beats[-1]


def test_the_eta_takes_an_earlier_run_s_own_time_before_the_scaled_reference(tmp_path, monkeypatch, capsys):
    """A new report folder of a run folder that ran before: the stage records' own times, not the committed
    report's scaled by the probe (which then never runs); metrics.json's stage times count as well."""
    p = _project(tmp_path)
    _reference_report(tmp_path, monkeypatch, dict.fromkeys(("01_alpha", "02_beta", "03_gamma"), 60.0), 100.0)
    records.record_stage(p["run"], "01_alpha", {"run_dir": str(p["run"])}, duration_s=1500.0)
    p["out"].mkdir(parents=True)
    (p["out"] / "metrics.json").write_text(json.dumps({"timings": {"beta": {"wall_s": 700.0}}}))
    probed = []
    monkeypatch.setattr("goalrm_core.threads.matmul_gflops", lambda threads: probed.append(threads) or 50.0)
    monkeypatch.setattr(runner, "execute_stage", FakeStages())
    assert main([*p["flags"], "--only", "01", "02"]) == 0
    out = capsys.readouterr().out
    assert "[1/2 01_alpha] running — " in out and "ETA ~25m00s (last run: 1500.0 s)" in out
    assert "ETA ~11m40s (last run: 700.0 s)" in out and probed == []
    assert (
        json.loads((p["run"] / "stages" / "01_alpha.json").read_text())["duration_s"] >= 0
    )  # this run's, for the next


def test_a_probe_on_a_loaded_machine_says_the_eta_may_be_long(tmp_path, monkeypatch, capsys):
    from goalrm_core.pipeline import progress

    p = _project(tmp_path)
    _reference_report(tmp_path, monkeypatch, {"01_alpha": 600.0}, 300.0)
    monkeypatch.setattr("goalrm_core.threads.matmul_gflops", lambda threads: 30.0)
    monkeypatch.setattr(progress.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(progress, "_load_average", lambda: 5.2)
    monkeypatch.setattr(runner, "execute_stage", FakeStages())
    assert main([*p["flags"], "--only", "01"]) == 0
    out = capsys.readouterr().out
    assert "ETA: speed probe 30 GFLOP/s with load 5.2 on 2 cores: the ETA may be long" in out
    assert "ETA ~1h40m (estimated from the committed report: 6000.0 s)" in out
    assert main([*p["flags"], "--dry-run", "--only", "01", "--reports-dir", str(tmp_path / "elsewhere")]) == 0
    assert "  (speed probe 30 GFLOP/s with load 5.2 on 2 cores: the ETA may be long)" in capsys.readouterr().out
    monkeypatch.setattr(progress, "_load_average", lambda: 0.3)  # an idle machine: no note
    assert main([*p["flags"], "--dry-run", "--only", "01", "--reports-dir", str(tmp_path / "elsewhere")]) == 0
    assert "with load" not in capsys.readouterr().out
    assert progress.loaded_probe_note(30.0, threads=2, load=1.5, cores=16) is None  # 14 cores idle beside the probe's 2


def test_papermill_s_bar_reads_as_cells_done_not_as_the_stage_s_progress(tmp_path):
    log_path = tmp_path / "01_data.log"
    log_path.write_text(
        "Executing:  41%|####1     | 7/17 [00:20<00:29]\rExecuting:  53%|#####2    | 9/17 [00:31<00:28,  3.50s/cell]"
    )
    assert runner.last_log_line(log_path) == "9 of 17 notebook cells done"
