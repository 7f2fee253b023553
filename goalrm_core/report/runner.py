"""Execute the notebooks of a profile with papermill and publish them as an HTML report.

``reports/<profile>/`` receives, per stage, the executed ``NN_topic.ipynb`` and its ``NN_topic.html``
(inputs hidden: the report is read, the notebook is for editing), plus ``status.json`` (what ran, how
it went, how long it took) and ``index.html`` (the same, for a browser, with the headline metrics).
Both are rewritten after every stage so that a long run can be watched and an interrupted run still
says how far it got. A failed stage stops the run: later stages depend on its artifacts.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import json
import os
import re
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

from goalrm_core.data.io import ArtifactError, atomic_path, atomic_write_json, atomic_write_text
from goalrm_core.report.frontpage import result_sections
from goalrm_core.report.pages import export_html, refresh_navigation
from goalrm_core.report.profiles import check_profile_against_notebooks, load_profile, profile_path, resolve_path
from goalrm_core.report.provenance import PROVENANCE_KEY, _now, collect_provenance, provenance_html
from goalrm_core.runtime import batch_environment, project_root, relative_paths

TIMINGS_KEY = "timings"
STAGE_PATTERN = re.compile(r"^\d{2}_[A-Za-z0-9_\-]+\.ipynb$")
SUCCEEDED = ("ok", "kept")


# --------------------------------------------------------------------------------------- metrics


def _sorted_tree(obj: Any) -> Any:
    """Dicts with sorted (string) keys at every level, so identical runs give identical files."""
    if isinstance(obj, Mapping):
        return {str(k): _sorted_tree(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [_sorted_tree(v) for v in obj]
    return obj


def _read_json_object(path: Path) -> dict:
    """A JSON object from ``path`` (``{}`` when absent); a corrupt file is an ``ArtifactError``."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ArtifactError(f"{path}: malformed JSON ({e.msg}, line {e.lineno})") from None
    if not isinstance(data, dict):
        raise ArtifactError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def record_metrics(
    stage: str,
    metrics: Mapping[str, Any],
    reports_dir: str | os.PathLike,
    timings: Mapping[str, Any] | None = None,
) -> Path:
    """Merge one stage's metrics into ``<reports_dir>/metrics.json`` and return its path.

    The stage's previous entry is replaced, not merged, so a metric a notebook stopped producing
    disappears. Wall-clock numbers go under a separate top-level ``"timings"`` section: everything
    else in the file is then identical across identical runs and can be diffed.
    """
    if stage in (TIMINGS_KEY, PROVENANCE_KEY):
        raise ValueError(f"stage name {stage!r} is reserved for the {stage} section")
    path = resolve_path(reports_dir) / "metrics.json"
    data = _read_json_object(path)
    data[stage] = dict(metrics)
    if timings is not None:
        data.setdefault(TIMINGS_KEY, {})[stage] = dict(timings)
    atomic_write_json(path, _sorted_tree(data))
    return path


def record_provenance(provenance: Mapping[str, Any], reports_dir: str | os.PathLike) -> Path:
    """Write what produced this report (:func:`collect_provenance`) into ``metrics.json`` under
    ``"provenance"``. Like ``"timings"`` it differs between identical runs: compare runs without it."""
    path = resolve_path(reports_dir) / "metrics.json"
    data = _read_json_object(path)
    data[PROVENANCE_KEY] = dict(provenance)
    atomic_write_json(path, _sorted_tree(data))
    return path


def _flatten(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(obj, Mapping):
        rows = []
        for key, value in obj.items():
            rows.extend(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return rows
    return [(prefix, obj)]


# ---------------------------------------------------------------------------------------- stages


def discover_stages(notebooks_dir: Path) -> list[Path]:
    """The ``NN_topic.ipynb`` notebooks in run order; whichever exist are the stages."""
    if not notebooks_dir.is_dir():
        return []
    return sorted(p for p in notebooks_dir.iterdir() if STAGE_PATTERN.match(p.name))


def match_stage(selector: str, names: list[str]) -> str:
    """The stage named by ``selector``: its ``NN`` prefix, its full name, or its file name."""
    wanted = selector.strip()
    if wanted.endswith(".ipynb"):
        wanted = wanted[: -len(".ipynb")]
    for name in names:
        if wanted == name or wanted == name.split("_", 1)[0]:
            return name
    raise ValueError(f"unknown stage {selector!r}: stages are {', '.join(names) or 'none'}")


def _error_info(exc: BaseException) -> dict:
    """What the index shows about a failure: papermill's cell error when there is one."""
    ename = getattr(exc, "ename", None) or type(exc).__name__
    evalue = getattr(exc, "evalue", None)
    if evalue is None:
        evalue = str(exc)
    return {
        "ename": str(ename),
        "evalue": str(evalue),
        "cell_index": getattr(exc, "cell_index", None),
        "exec_count": getattr(exc, "exec_count", None),
    }


class _NothingWritten(Exception):
    """Raised inside ``atomic_path`` to abandon an empty output instead of renaming it."""


@contextlib.contextmanager
def _environment(values: Mapping[str, str]):
    """``os.environ`` with ``values`` set for the block (a kernel started inside inherits them)."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


@contextlib.contextmanager
def _papermill_logging_to(stream):
    """papermill's log records (cell starts, kernel messages) into ``stream`` instead of the terminal."""
    import logging

    logger = logging.getLogger("papermill")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    saved = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def execute_stage(
    notebook: Path, output: Path, parameters: dict, kernel_name: str, cwd: Path, log_path: Path | None = None
) -> tuple[BaseException | None, bool]:
    """Run one notebook into ``output`` atomically; return (its exception or None, whether it was written).

    papermill keeps writing the output while cells run, so it goes to a temporary file that is
    renamed when execution ends, whether it succeeded or not: a failed notebook, with its traceback,
    is exactly what the reader needs. Only when papermill wrote nothing (the kernel never started)
    is the temporary file dropped.

    The kernel runs as a batch run (:func:`goalrm_core.runtime.batch_environment`, and the
    ``goalrm_core.runtime`` IPython extension): no progress bars, warnings or library log records
    in the cells. Those, papermill's own progress bar and log, and a transcript of every cell's
    printed output go to ``log_path`` (created afresh) when it is given.
    """
    import papermill as pm

    error: BaseException | None = None
    written = False
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(f"# {notebook.name} -> {output}, started {_now()}\n", encoding="utf-8")
    # append mode: the kernel appends its held-back warnings to the same file
    log = open(log_path, "a", encoding="utf-8") if log_path is not None else open(os.devnull, "w")
    with contextlib.ExitStack() as stack:
        stack.enter_context(log)
        stack.enter_context(_papermill_logging_to(log))
        stack.enter_context(_environment(batch_environment(log_path)))
        stack.enter_context(contextlib.suppress(_NothingWritten))
        tmp = stack.enter_context(atomic_path(output, suffix=".ipynb"))
        try:
            pm.execute_notebook(
                str(notebook),
                str(tmp),
                parameters=parameters,
                kernel_name=kernel_name,
                cwd=str(cwd),
                # TQDM_DISABLE is set for the kernel, not for this bar: keep it on, in the log
                progress_bar={"file": log, "disable": False, "mininterval": 5.0},
                stdout_file=log,
                stderr_file=log,
                # the extension quiets the kernel; its own start-up chatter (e.g. "running over TCP
                # without encryption") would otherwise land on the terminal between the stage lines
                extra_arguments=["--IPKernelApp.extra_extensions=goalrm_core.runtime", "--IPKernelApp.log_level=ERROR"],
                execution_timeout=None,
                start_timeout=120,
            )
        except Exception as exc:  # any failure is reported in the index, not raised
            error = exc
        if tmp.stat().st_size == 0:
            raise _NothingWritten
        with contextlib.suppress(json.JSONDecodeError, OSError):
            _relative_papermill_paths(tmp, notebook, output)
        written = True
    return error, written


# ------------------------------------------------------------------------------------ status/index


def _status_entry(name: str, status: str, **fields: Any) -> dict:
    entry = {
        "name": name,
        "status": status,
        "started": None,
        "duration_s": None,
        "notebook": f"{name}.ipynb",
        "html": f"{name}.html",
        "error": None,
    }
    entry.update(fields)
    return entry


def _load_previous(status_path: Path) -> dict[str, dict]:
    """Last run's stage entries by name; a corrupt status file counts as no earlier run."""
    try:
        stages = _read_json_object(status_path).get("stages", [])
    except ArtifactError:
        return {}
    return {s["name"]: s for s in stages if isinstance(s, dict) and "name" in s}


def write_status(out_dir: Path, profile: str, stages: list[dict]) -> None:
    """Refresh ``status.json`` and ``index.html`` together, so they never disagree."""
    generated = _now()
    atomic_write_json(out_dir / "status.json", {"profile": profile, "generated": generated, "stages": stages})
    try:
        metrics = _read_json_object(out_dir / "metrics.json")
    except ArtifactError as e:
        metrics = {"metrics.json": f"unreadable: {e}"}
    atomic_write_text(out_dir / "index.html", render_index(profile, generated, stages, metrics, out_dir))


def rebuild_index(out_dir: Path) -> Path:
    """Re-render ``index.html`` from the ``status.json`` and ``metrics.json`` already there, running
    nothing (``goalrm report --index-only``): for a page whose rendering code changed after the run."""
    status = _read_json_object(out_dir / "status.json")
    if not isinstance(status.get("stages"), list):
        raise ArtifactError(f"{out_dir / 'status.json'} has no stage list: run the report first")
    metrics = _read_json_object(out_dir / "metrics.json")
    page = render_index(str(status.get("profile", out_dir.name)), str(status.get("generated", "")), status["stages"], metrics, out_dir)
    atomic_write_text(out_dir / "index.html", page)
    return out_dir / "index.html"


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 64rem;
       padding: 0 1rem; color: #222; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
.meta { color: #666; margin-top: 0; }
table { border-collapse: collapse; width: 100%; font-size: .92rem; }
th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid #e3e3e3; vertical-align: top; }
th { background: #f5f5f5; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.status { font-weight: 600; padding: .1rem .45rem; border-radius: .3rem; white-space: nowrap; }
.ok { background: #e3f5e6; color: #1b6b2c; } .kept { background: #e6eefb; color: #27508f; }
.failed { background: #fbe4e4; color: #9b1c1c; } .not-run, .pending { background: #eee; color: #666; }
.running { background: #fff4d6; color: #8a5a00; }
.error { font-family: ui-monospace, monospace; font-size: .85rem; color: #9b1c1c; white-space: pre-wrap; }
img { max-width: 100%; } details summary { cursor: pointer; color: #27508f; margin: .4rem 0; }
"""


def _format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, dict)):
        text = json.dumps(value)
        return text if len(text) <= 80 else text[:77] + "..."
    return "null" if value is None else str(value)


def _stage_row(stage: dict, out_dir: Path) -> str:
    e = html.escape
    name = e(stage["name"])
    link = stage.get("html")
    cell = f'<a href="{e(link)}">{name}</a>' if link and (out_dir / link).exists() else name
    status = stage["status"]
    duration = stage.get("duration_s")
    shown = f"{duration:.1f} s" if isinstance(duration, (int, float)) else ""
    error = stage.get("error") or {}
    excerpt = ""
    if error:
        where = f" (cell {error['cell_index']})" if error.get("cell_index") is not None else ""
        message = f"{error.get('ename', '')}: {error.get('evalue', '')}"
        excerpt = message if len(message) <= 400 else message[:397] + "..."
        excerpt += where
    return (
        f"<tr><td>{cell}</td><td><span class=\"status {e(status.replace(' ', '-'))}\">{e(status)}</span></td>"
        f"<td class=\"num\">{e(shown)}</td><td>{e(stage.get('started') or '')}</td>"
        f"<td class=\"error\">{e(excerpt)}</td></tr>"
    )


def _gate(metrics: Mapping[str, Any]) -> str:
    """The evaluation's length gate (recorded by notebook 04), first on the page; empty before it ran."""
    gate = metrics.get("evaluation", {}).get("gate") if isinstance(metrics.get("evaluation"), Mapping) else None
    if not isinstance(gate, Mapping):
        return ""
    return gate_html(dict(gate))


def gate_html(gate: dict) -> str:
    """The gate as a coloured notice (green: both RMs above length-only; red: the later tables measure noise)."""
    def ci(v):
        return f"{v['auroc']:.2f} [{v['ci_low']:.2f}, {v['ci_high']:.2f}]"

    rms = [k for k in gate if k not in ("benchmark", "passed", "length_only")]
    scores = "; ".join(f"{rm} {ci(gate[rm])}" for rm in rms)
    if gate["passed"]:
        colour, border, head = "#e8f5e9", "#2e7d32", "Both reward models beat the length-only scorer"
        tail = "The comparisons below measure what the RMs learned beyond response length."
    else:
        colour, border, head = "#ffebee", "#c62828", "Not every reward model beats the length-only scorer"
        tail = ("The later tables compare RMs that know less than a character count: they measure noise, "
                "not the method. Read them as a test of the software only.")
    return (f'<div style="background:{colour};border-left:6px solid {border};padding:0.6em 1em;margin:0.6em 0">'
            f'<b>{head}</b> on {gate["benchmark"]} (AUROC, 95% CI): {scores}; length only {ci(gate["length_only"])}. '
            f'{tail}</div>')


def render_index(profile: str, generated: str, stages: list[dict], metrics: Mapping[str, Any], out_dir: Path) -> str:
    """A self-contained page, in reading order: the length gate, a summary generated from the numbers,
    the key figures and tables (``frontpage``), the stage table with links and failures, then every
    metric in a collapsible section."""
    e = html.escape
    stage_rows = "\n".join(_stage_row(s, out_dir) for s in stages)
    rows = _flatten({k: v for k, v in metrics.items() if k not in (TIMINGS_KEY, "provenance")})
    metric_rows = "\n".join(
        f'<tr><td>{e(k)}</td><td class="num">{e(_format_value(v))}</td></tr>' for k, v in rows
    )
    if rows:
        metrics_html = (f"<details><summary>All metrics ({len(rows)}; full precision in metrics.json)</summary>\n"
                        f"<table><tr><th>metric</th><th>value</th></tr>\n{metric_rows}\n</table></details>")
    else:
        metrics_html = "<p class=\"meta\">No metrics recorded yet.</p>"
    try:
        results = result_sections(metrics)
    except Exception as exc:  # a page must render even when a section cannot: say so, keep the rest
        results = f'<p class="error">The result sections could not be drawn: {e(type(exc).__name__)}: {e(str(exc))}</p>'
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>goalrm report: {e(profile)}</title>
<style>{_CSS}</style></head>
<body>
<h1>Goal-conditioned reward models: profile {e(profile)}</h1>
<p class="meta">Generated {e(generated)}</p>
{_gate(metrics)}
{results}
<h2>Stages</h2>
<table><tr><th>stage</th><th>status</th><th>duration</th><th>started</th><th>error</th></tr>
{stage_rows}
</table>
<h2>All metrics</h2>
{metrics_html}
{provenance_html(metrics)}
</body></html>
"""


# ------------------------------------------------------------------------------------------ runner


def _select(names: list[str], from_stage: str | None, only: list[str] | None) -> list[str]:
    """The stages to execute this time, in order."""
    chosen = list(names)
    if from_stage is not None:
        start = names.index(match_stage(from_stage, names))
        chosen = names[start:]
    if only:
        wanted = {match_stage(s, names) for s in only}
        chosen = [n for n in chosen if n in wanted]
    return chosen


def _check_resumable(names: list[str], from_stage: str, previous: dict[str, dict], profile: str) -> None:
    """Resuming needs every earlier stage to have succeeded before; otherwise say what to run."""
    start = names.index(match_stage(from_stage, names))
    missing = [n for n in names[:start] if previous.get(n, {}).get("status") not in SUCCEEDED]
    if missing:
        raise ValueError(
            f"cannot resume profile {profile!r} from {names[start]}: earlier stage(s) "
            f"{', '.join(missing)} never succeeded; run `goalrm report --profile {profile} "
            f"--from {missing[0]}` instead"
        )


def _carried_over(name: str, previous: dict[str, dict]) -> dict:
    """The entry of a stage not executed this time: its last result, marked kept if it succeeded."""
    old = previous.get(name)
    if old is None:
        return _status_entry(name, "not run")
    entry = dict(old)
    if entry.get("status") in SUCCEEDED:
        entry["status"] = "kept"
    return entry


def _parameters(profile_name: str, profile: dict, declared: dict, out_dir: Path) -> dict:
    """What papermill injects: the keys the notebook declares, ``profile``, and the report folder.

    ``reports_dir`` is owned by the runner (it follows ``--reports-dir``), so a notebook that
    declares it records its metrics next to its own executed copy.
    """
    params = {k: v for k, v in profile.items() if k in declared}
    params["profile"] = profile_name
    if "reports_dir" in declared:
        params["reports_dir"] = _project_relative(out_dir)
    return params


def _project_relative(path: Path) -> str:
    """``path`` relative to the project root when it lies inside it (executed notebooks then name
    no folder of the machine), else as it is."""
    try:
        return str(Path(path).resolve().relative_to(project_root()))
    except ValueError:
        return str(path)


def _relative_papermill_paths(notebook_path: Path, source: Path, output: Path) -> None:
    """papermill records absolute input/output paths (the output's a temporary name) in the executed
    notebook's metadata: record the project-relative source and final output instead."""
    data = json.loads(notebook_path.read_text(encoding="utf-8"))
    meta = data.get("metadata", {}).get("papermill")
    if isinstance(meta, dict):
        meta["input_path"], meta["output_path"] = _project_relative(source), _project_relative(output)
        notebook_path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _run_one(
    path: Path, out_dir: Path, params: dict, kernel_name: str, log: Callable[[str], Any],
    stages: list[str] | None = None, log_path: Path | None = None,
) -> dict:
    """Execute and export one stage, returning its status entry."""
    name = path.stem
    started, t0 = _now(), time.monotonic()
    log(f"[{name}] running")
    executed = out_dir / f"{name}.ipynb"
    error, written = execute_stage(path, executed, params, kernel_name, resolve_path("."), log_path)
    duration = round(time.monotonic() - t0, 2)
    entry = _status_entry(name, "failed" if error else "ok", started=started, duration_s=duration)
    if log_path is not None:
        entry["log"] = relative_paths(str(log_path))
    if error is not None:
        entry["error"] = _error_info(error)
    if not written:  # an older run's output would pass for this run's: drop it
        for stale in (executed, out_dir / f"{name}.html"):
            stale.unlink(missing_ok=True)
    if executed.exists():
        try:
            export_html(executed, out_dir / f"{name}.html", stages)
        except Exception as exc:  # a report without HTML is still a report
            entry["html_error"] = f"{type(exc).__name__}: {exc}"
            log(f"[{name}] HTML export failed: {exc}")
    if error is None:
        log(f"[{name}] ok in {duration:.1f} s")
    else:
        info = entry["error"]
        where = f" (log: {entry['log']})" if entry.get("log") else ""
        log(f"[{name}] FAILED after {duration:.1f} s: {info['ename']}: {info['evalue']}{where}")
    return entry


def _inspect(stages: list[Path]) -> dict[str, dict]:
    """Each stage's declared parameters, so a bad profile fails before any kernel starts."""
    import papermill as pm

    declared = {}
    for path in stages:
        try:
            declared[path.stem] = pm.inspect_notebook(str(path))
        except Exception as e:
            raise ValueError(f"{path}: cannot read its parameters cell ({e})") from e
    return declared


def run_report(
    profile: str,
    *,
    notebooks_dir: str | os.PathLike = "notebooks",
    params_dir: str | os.PathLike = "params",
    reports_root: str | os.PathLike = "reports",
    kernel_name: str = "goalrm",
    from_stage: str | None = None,
    only: list[str] | None = None,
    log: Callable[[str], Any] = print,
    logs_dir: str | os.PathLike | None = None,
) -> int:
    """Execute the profile's stages in order; return 0 if every executed stage succeeded, else 1.

    Each stage's log (papermill's progress and records, the cells' printed output, the warnings
    held back from the page) goes to ``<logs_dir>/<stage>.log``, by default the profile's
    ``run_dir``'s ``logs/`` folder. ``metrics.json`` receives the run's provenance first.

    Problems that can be seen before any kernel starts (unknown profile or stage, a profile value
    of the wrong type, resuming past a stage that never succeeded) raise ``ValueError`` instead.
    """
    settings = load_profile(profile, params_dir)
    source = str(profile_path(profile, params_dir))
    stages = discover_stages(resolve_path(notebooks_dir))
    if not stages:
        raise ValueError(f"no NN_topic.ipynb notebooks in {resolve_path(notebooks_dir)}")
    names = [p.stem for p in stages]
    declared = _inspect(stages)
    for message in check_profile_against_notebooks(settings, declared, source=source):
        warnings.warn(message, stacklevel=2)
        log(f"warning: {message}")

    out_dir = resolve_path(reports_root) / profile
    out_dir.mkdir(parents=True, exist_ok=True)
    previous = _load_previous(out_dir / "status.json")
    if from_stage is not None:
        _check_resumable(names, from_stage, previous, profile)
    selected = _select(names, from_stage, only)
    if logs_dir is None:
        logs_dir = Path(str(settings.get("run_dir") or f"runs/{profile}")) / "logs"
    logs = resolve_path(logs_dir)
    record_provenance(collect_provenance(profile, settings), out_dir)

    entries = {n: _carried_over(n, previous) if n not in selected else _status_entry(n, "pending") for n in names}
    failed = False
    for path in stages:
        name = path.stem
        if name not in selected:
            continue
        if failed:
            entries[name] = _status_entry(name, "not run")
            continue
        entries[name] = _status_entry(name, "running", started=_now())
        write_status(out_dir, profile, list(entries.values()))
        entries[name] = _run_one(path, out_dir, _parameters(profile, settings, declared[name], out_dir), kernel_name, log,
                                 stages=names, log_path=logs / f"{name}.log")
        failed = entries[name]["status"] == "failed"
        refresh_navigation(out_dir, names)
        write_status(out_dir, profile, list(entries.values()))
    refresh_navigation(out_dir, names)
    write_status(out_dir, profile, list(entries.values()))
    log(f"report: {out_dir / 'index.html'}")
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="goalrm report", description="Execute the notebooks and build the HTML report.")
    parser.add_argument("--profile", default="demo", help="params/<profile>.yaml (default: demo)")
    parser.add_argument("--from", dest="from_stage", default=None, help="resume from this stage (NN or NN_topic)")
    parser.add_argument("--only", nargs="+", default=None, help="run only these stages (NN or NN_topic)")
    parser.add_argument("--kernel", default="goalrm", help="Jupyter kernel name (default: goalrm)")
    parser.add_argument("--notebooks-dir", default="notebooks")
    parser.add_argument("--params-dir", default="params")
    parser.add_argument("--reports-dir", default="reports", help="root folder; output goes to <dir>/<profile>/")
    parser.add_argument("--index-only", action="store_true",
                        help="re-render index.html from the existing status.json and metrics.json; run no stage")
    return parser


def main(argv: list[str] | None = None) -> int:
    """``goalrm report``: exit 0 when all stages succeed, 1 when one fails, 2 on a usage error."""
    args = build_parser().parse_args(argv)
    try:
        if args.index_only:
            print(f"report: {rebuild_index(resolve_path(args.reports_dir) / args.profile)}")
            return 0
        return run_report(
            args.profile,
            notebooks_dir=args.notebooks_dir,
            params_dir=args.params_dir,
            reports_root=args.reports_dir,
            kernel_name=args.kernel,
            from_stage=args.from_stage,
            only=args.only,
        )
    except (ValueError, ArtifactError) as e:
        print(f"goalrm report: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
