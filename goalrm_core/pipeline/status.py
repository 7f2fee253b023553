"""``status.json`` and ``index.html`` of a report folder: what ran, how it went and how long it took,
written together after every stage so that a long run can be watched and an interrupted run still
says how far it got. When the front page cannot be drawn, a plain fallback page says why."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from goalrm_core.data.io import ArtifactError, atomic_write_json, atomic_write_text, timestamp
from goalrm_core.pipeline.records import read_json_object
from goalrm_core.pipeline.signals import interrupts_deferred


def status_entry(name: str, status: str, **fields: Any) -> dict:
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


def killed_run_cleared(out_dir: Path, previous: dict[str, dict]) -> dict[str, dict]:
    """With the folder's lock held, no other run is writing it: the temp files of a run killed
    outright (``.NN_*.tmp.ipynb``) go, and a stage its status still calls ``running`` was interrupted."""
    for leftover in out_dir.glob(".*.tmp*"):
        leftover.unlink(missing_ok=True)
    return {
        name: ({**entry, "status": "interrupted"} if entry.get("status") == "running" else entry)
        for name, entry in previous.items()
    }


def load_previous(status_path: Path) -> dict[str, dict]:
    """Last run's stage entries by name; a corrupt status file counts as no earlier run."""
    try:
        stages = read_json_object(status_path).get("stages", [])
    except ArtifactError:
        return {}
    return {s["name"]: s for s in stages if isinstance(s, dict) and "name" in s}


def render_index(*args, **kwargs) -> str:
    """:func:`goalrm_core.report.index_page.render_index`, imported when a page is drawn: the front
    page's statistics load scipy, which ``goalrm report --help`` and an argument error do without."""
    from goalrm_core.report.index_page import render_index as render

    return render(*args, **kwargs)


def _fallback_index(profile: str, generated: str, stages: list[dict], error: Mapping[str, Any], out_dir: Path) -> str:
    """The page written when :func:`render_index` fails (``templates/fallback.html.j2``): the stage
    table and the error, from the status entries alone, so that it cannot fail the same way
    (``goalrm report --index-only`` draws the full page again once the cause is fixed)."""
    from goalrm_core.report.templating import render, stage_view

    said = {key: "" if error.get(key) is None else str(error[key]) for key in ("ename", "evalue")}
    return render(
        "fallback.html.j2",
        profile=profile,
        generated=generated,
        error=said,
        stages=[stage_view(s, out_dir) for s in stages],
    )


def _render(profile: str, generated: str, stages: list[dict], out_dir: Path) -> tuple[str, dict | None]:
    """The index page and, when the full page could not be drawn, why (the page is then the fallback)."""
    try:
        metrics = read_json_object(out_dir / "metrics.json")
    except ArtifactError as e:
        metrics = {"metrics.json": f"unreadable: {e}"}
    try:
        return render_index(profile, generated, stages, metrics, out_dir), None
    except Exception as exc:  # the page is a view of status.json: it must never stop the run
        error = {"ename": type(exc).__name__, "evalue": str(exc)}
        return _fallback_index(profile, generated, stages, error, out_dir), error


def write_status(out_dir: Path, profile: str, stages: list[dict]) -> dict | None:
    """Refresh ``status.json`` and ``index.html`` together, so they never disagree, and return the
    rendering error (``None`` when the full page was drawn).

    The page is drawn first: when :func:`render_index` raises, a fallback page (the stage table and
    the error) is written instead and ``status.json`` records the failure as ``index_error``. Both
    files are then written with Ctrl-C held back, so one is never left behind the other.
    """
    generated = timestamp()
    page, index_error = _render(profile, generated, stages, out_dir)
    status = {"profile": profile, "generated": generated, "stages": stages, "index_error": index_error}
    with interrupts_deferred():
        atomic_write_json(out_dir / "status.json", status)
        atomic_write_text(out_dir / "index.html", page)
    return index_error


def rebuild_index(out_dir: Path) -> Path:
    """Re-render ``index.html`` from the ``status.json`` and ``metrics.json`` already there, running
    nothing (``goalrm report --index-only``): for a page whose rendering code changed after the run.
    When the full page cannot be drawn the fallback page is written; ``status.json`` is rewritten only
    when its ``index_error`` changes (so that it always says which page is there)."""
    status_path = out_dir / "status.json"
    status = read_json_object(status_path)
    if not isinstance(status.get("stages"), list):
        raise ArtifactError(f"{status_path} has no stage list: run the report first")
    page, index_error = _render(
        str(status.get("profile", out_dir.name)), str(status.get("generated", "")), status["stages"], out_dir
    )
    with interrupts_deferred():
        if status.get("index_error") != index_error:
            atomic_write_json(status_path, {**status, "index_error": index_error})
        atomic_write_text(out_dir / "index.html", page)
    return out_dir / "index.html"


def index_error_of(out_dir: Path) -> dict | None:
    """The ``index_error`` that ``status.json`` records (``None``: the full index is there)."""
    try:
        error = read_json_object(out_dir / "status.json").get("index_error")
    except ArtifactError:
        return None
    return error if isinstance(error, dict) else None
