"""Execute the notebooks of a profile with papermill and publish them as an HTML report.

``<reports>/<profile>/`` (``runs/reports/`` unless ``--reports-dir`` names another root) receives, per stage, the
executed ``NN_topic.ipynb`` and its ``NN_topic.html``
(inputs hidden: the report is read, the notebook is for editing), plus ``status.json`` (what ran, how
it went, how long it took) and ``index.html`` (the same, for a browser, with the headline metrics).
Both are rewritten after every stage so that a long run can be watched and an interrupted run still
says how far it got. A failed stage stops the run: later stages depend on its artifacts.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

from goalrm_core.data.io import ArtifactError, atomic_write_json, check_output_dir, timestamp, writer_lock
from goalrm_core.data.rundir import RunDir
from goalrm_core.flags import debugging, error_line, path_part, symlink_loop
from goalrm_core.paths import relative_paths, resolve_path, shown_path
from goalrm_core.pipeline.execute import discover_stages, error_info, execute_stage, match_stage, project_relative
from goalrm_core.pipeline.notebook_params import TRAINING_STAGE, declared_parameters, missing_keys
from goalrm_core.pipeline.profile_checks import check_settings, coerce_to_declared, list_from_text, unknown_key_message
from goalrm_core.pipeline.profile_files import load_profile, notebook_profile, notebooks_folder, profile_path
from goalrm_core.pipeline.profile_values import check_value, parse_set_flags
from goalrm_core.pipeline.progress import (
    HEARTBEAT_S,
    SUCCEEDED,
    heartbeat,
    last_durations,
    last_log_line,  # noqa: F401
    plan_lines,
    progress_line,
    stage_estimates,
)
from goalrm_core.pipeline.provenance import code_version, collect_provenance
from goalrm_core.pipeline.records import record_provenance, record_stage
from goalrm_core.pipeline.signals import Terminated, interrupts_deferred, sigterm_as_interrupt
from goalrm_core.pipeline.status import (
    index_error_of,
    killed_run_cleared,
    load_previous,
    rebuild_index,
    status_entry,
    write_status,
)
from goalrm_core.report.metrics_view import METRICS_FILE, TIMINGS_KEY
from goalrm_core.report.pages import export_html, refresh_navigation
from goalrm_core.study.recipe import RM_KEYS

#: Where a user's run reports: under ``runs/``, which git ignores, so ``make report`` never writes a
#: tracked file (on a machine whose floats differ it would move the committed pages under the suite's
#: drift tests). The committed reference reports are ``REFERENCE_REPORTS``, regenerated only by naming
#: it: ``goalrm report --profile demo --reports-dir reports``.
USER_REPORTS = "runs/reports"
REFERENCE_REPORTS = "reports"

# the exit code of a run stopped by Ctrl-C (128 + SIGINT), as a shell reports it
INTERRUPTED_EXIT = 130
TERMINATED_EXIT = 143  # 128 + SIGTERM


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
        return status_entry(name, "not run")
    entry = dict(old)
    if entry.get("status") in SUCCEEDED:
        entry["status"] = "kept"
    return entry


def stage_parameters(
    profile_name: str, profile: Mapping[str, Any], declared: Mapping[str, Any], out_dir: Path, stage: str | None = None
) -> dict:
    """What papermill injects: the keys the notebook declares, ``profile``, and the report folder; the
    training notebook (``stage`` :data:`TRAINING_STAGE`) also every key of the profile's ``rm:`` block it does
    not write out, under the trainer's names (a new trainer flag needs no notebook edit).

    ``reports_dir`` is owned by the runner (it follows ``--reports-dir``), so a notebook that
    declares it records its metrics next to its own executed copy.
    """
    params = {k: v for k, v in profile.items() if k in declared or (stage == TRAINING_STAGE and k in RM_KEYS)}
    params["profile"] = profile_name
    if "reports_dir" in declared:
        params["reports_dir"] = project_relative(out_dir)
    return params


#: The file of a run folder that names the profile whose stages write it (``{"profile": ...}``).
RUN_DIR_OWNER = "profile.json"


def check_run_dir_owner(run_dir: Path, profile: str) -> None:
    """A ``ValueError`` naming both profiles when ``run_dir`` records another profile: two profiles that share a run
    folder would mix their data, models and scores silently (each stage reads what the other wrote)."""
    owner_file = run_dir / RUN_DIR_OWNER
    if not owner_file.is_file():
        return
    try:
        owner = json.loads(owner_file.read_text(encoding="utf-8")).get("profile")
    except (OSError, ValueError, AttributeError):
        raise ValueError(
            f"{owner_file}: damaged (it should name the profile whose run this is); fix or delete it"
        ) from None
    if owner != profile:
        raise ValueError(
            f"run_dir {run_dir} holds the run of profile {owner!r} ({owner_file}), not of {profile!r}: two profiles in "
            f"one run folder would mix their data; give this profile its own run_dir (--set run_dir=runs/{profile}), "
            "or delete that folder"
        )


def claim_run_dir(run_dir: Path, profile: str) -> None:
    """Record ``profile`` as the one whose stages write ``run_dir`` (:func:`check_run_dir_owner` first)."""
    check_run_dir_owner(run_dir, profile)
    if not (run_dir / RUN_DIR_OWNER).is_file():
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_json(run_dir / RUN_DIR_OWNER, {"profile": profile})


def run_dir_of(profile_name: str, profile: Mapping[str, Any]) -> Path:
    """The profile's run directory (``run_dir``, by default ``runs/<profile>``)."""
    return resolve_path(str(profile.get("run_dir") or f"runs/{profile_name}"))


def _run_one(
    path: Path,
    out_dir: Path,
    params: dict,
    kernel_name: str,
    log: Callable[[str], Any],
    stages: list[str] | None = None,
    log_path: Path | None = None,
    tag: str | None = None,
) -> dict:
    """Execute and export one stage, returning its status entry (the caller announces the start).
    ``tag`` prefixes its lines (default ``[name]``)."""
    name = path.stem
    tag = tag or f"[{name}]"
    started, t0 = timestamp(), time.monotonic()
    executed = out_dir / f"{name}.ipynb"
    error, written = execute_stage(path, executed, params, kernel_name, resolve_path("."), log_path)
    duration = round(time.monotonic() - t0, 2)
    entry = status_entry(name, "failed" if error else "ok", started=started, duration_s=duration)
    if log_path is not None:
        entry["log"] = relative_paths(str(log_path))
    if error is not None:
        entry["error"] = error_info(error)
    if not written:  # an older run's output would pass for this run's: drop it
        _drop_outputs(out_dir, name)
    if executed.exists():
        try:
            export_html(executed, out_dir / f"{name}.html", stages, code_version())
        except Exception as exc:  # a report without HTML is still a report
            entry["html_error"] = f"{type(exc).__name__}: {exc}"
            log(f"{tag} HTML export failed: {exc}")
    if error is None:
        parts = _stage_parts(out_dir, name)
        line = f"{tag} ok in {duration:.1f} s" + (f" ({parts})" if parts else "")
        log(line)
        if parts and log_path is not None:
            with open(log_path, "a", encoding="utf-8") as f:
                f.write(line + "\n")
    else:
        info = entry["error"]
        where = f" (log: {entry['log']})" if entry.get("log") else ""
        log(f"{tag} FAILED after {duration:.1f} s: {info['ename']}: {info['evalue']}{where}")
    return entry


def _stage_parts(out_dir: Path, name: str) -> str:
    """``"sft 41.2 s, greedy 3.1 s, ..."``: the parts the stage timed (``Stage.part``), read back from the
    timings it recorded in ``metrics.json`` (stage ``01_data`` records as ``data``); empty if none."""
    import json

    try:
        timings = json.loads((out_dir / METRICS_FILE).read_text(encoding="utf-8")).get(TIMINGS_KEY, {})
    except (OSError, ValueError, AttributeError):
        return ""
    parts = (timings.get(name.split("_", 1)[-1]) or {}).get("parts") if isinstance(timings, dict) else None
    if not isinstance(parts, dict):
        return ""
    return ", ".join(f"{k} {v:.1f} s" for k, v in parts.items() if isinstance(v, (int, float)))


def _drop_outputs(out_dir: Path, name: str) -> None:
    for stale in (out_dir / f"{name}.ipynb", out_dir / f"{name}.html"):
        stale.unlink(missing_ok=True)


class ReportInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped ``run_report``, after ``status.json`` and the index were written to say so.

    ``stage`` is the stage it stopped (``None`` when it came between stages), ``elapsed_s`` how long
    that stage had run, ``resume_from`` the first stage a resumed run must execute. Still a
    ``KeyboardInterrupt``, so that whatever called the runner (a sweep) stops too."""

    def __init__(
        self,
        profile: str,
        stage: str | None,
        elapsed_s: float | None,
        resume_from: str | None,
        after: str | None = None,
        how: str = "Ctrl-C",
    ):
        super().__init__(stage or after or profile)
        self.profile, self.stage, self.elapsed_s, self.resume_from, self.after = (
            profile,
            stage,
            elapsed_s,
            resume_from,
            after,
        )
        self.how = how

    @property
    def exit_code(self) -> int:
        """What a shell reports for the signal: 130 for Ctrl-C (SIGINT), 143 for SIGTERM."""
        return TERMINATED_EXIT if self.how == "SIGTERM" else INTERRUPTED_EXIT

    def describe(self, resume_command: str | None = None) -> str:
        """``interrupted in 02_training after 41.2 s; resume with <command>`` (``(SIGTERM)`` after
        ``interrupted`` when that was the signal)."""
        what = "interrupted" if self.how == "Ctrl-C" else f"interrupted ({self.how})"
        if self.stage is not None:
            where = f"{what} in {self.stage} after {self.elapsed_s:.1f} s"
        elif self.after is not None:
            where = f"{what} after {self.after}"
        else:
            where = f"{what} before any stage ran"
        if self.resume_from is None:
            return where
        command = resume_command or f"goalrm report --profile {self.profile} --from {self.resume_from[:2]}"
        return f"{where}; resume with {command}"


def inspect_stages(stages: list[Path]) -> dict[str, dict]:
    """Each stage's declared parameters, so a bad profile fails before any kernel starts (read from
    the notebook's parameters cell, as papermill reports them, without importing papermill)."""
    declared = {}
    for path in stages:
        try:
            declared[path.stem] = declared_parameters(path)
        except Exception as e:
            raise ValueError(f"{path}: cannot read its parameters cell ({e})") from e
    return declared


def checked_settings(
    settings: Mapping[str, Any],
    overrides: Mapping[str, Any] | None,
    declared: Mapping[str, Mapping[str, Any]],
    source: str,
    overrides_source: str = "--set",
) -> tuple[dict, list[str]]:
    """The profile's values with ``overrides`` on top, after every check that needs no kernel; and
    the warnings (profile keys no notebook declares, with "did you mean").

    An override must name a key a notebook declares or the runner reads ("did you mean" otherwise),
    never ``profile`` or ``reports_dir`` (the runner's); an int for a declared float becomes that
    float. Then, on the merged values: every declared key is set, each value has the declared type
    and lies in its key's range or choices (``profiles.check_settings``), ``torch_threads`` is an
    integer >= 1. Each error is one line naming where the value came from: ``source`` (the profile
    file) or ``overrides_source`` (``--set``), the key, the value and what was expected.
    """
    overrides = dict(overrides or {})
    for key, value in overrides.items():
        check_value(overrides_source, key, value)
        if key in ("profile", "reports_dir"):
            raise ValueError(f"{overrides_source}: key {key!r} is the runner's to set (--profile, --reports-dir)")
        message = unknown_key_message(key, declared, overrides_source)
        if message:
            raise ValueError(message)
    overrides = {k: list_from_text(k, v, declared) for k, v in overrides.items()}  # "0,1" for a list is [0, 1]
    merged = {**settings, **overrides}  # checked as given, so that an error shows the value typed
    missing = missing_keys(merged, declared)
    if missing:
        raise ValueError(
            f"{source} sets no value for {', '.join(missing)}: a notebook profile sets every key "
            f"a notebook declares (`goalrm sync-notebooks` writes the demo's into the notebooks)"
        )
    sources = {k: overrides_source for k in overrides}
    found = check_settings(merged, declared, source, sources)
    threads = merged.get("torch_threads")
    if not (isinstance(threads, int) and not isinstance(threads, bool) and threads >= 1):
        raise ValueError(
            f"{sources.get('torch_threads', source)}: torch_threads must be an integer >= 1 "
            f"(pinned: floats depend on it), got {threads!r}"
        )
    return {**settings, **{k: coerce_to_declared(k, v, declared) for k, v in overrides.items()}}, found


def run_report(
    profile: str,
    *,
    notebooks_dir: str | os.PathLike | None = None,
    params_dir: str | os.PathLike = "params",
    reports_root: str | os.PathLike = USER_REPORTS,
    kernel_name: str = "goalrm",
    from_stage: str | None = None,
    only: list[str] | None = None,
    log: Callable[[str], Any] = functools.partial(print, flush=True),
    logs_dir: str | os.PathLike | None = None,
    overrides: Mapping[str, Any] | None = None,
    report_name: str | None = None,
    overrides_source: str = "--set",
    notice: str | None = None,
    dry_run: bool = False,
) -> int:
    """Execute the profile's stages in order; return 0 if every executed stage succeeded, else 1.

    Each stage's log (papermill's progress and records, the cells' printed output, the warnings
    held back from the page) goes to ``<logs_dir>/<stage>.log``, by default the profile's
    ``run_dir``'s ``logs/`` folder. ``metrics.json`` receives the run's provenance first. Each
    stage that succeeds is noted, with its parameters, in the run directory it was given
    (``run_dir``; ``RunDir.stage_record``), so a later run can tell whether its artifacts are current;
    the note is removed when the stage starts, so a stage that fails or is interrupted is never current.
    Each stage starts with a line saying where the run is, where its log goes and how long the last
    run of it took (:func:`progress_line`).

    ``overrides`` are profile values that win over the file's (``goalrm report --set``; one point of a
    sweep); they are checked like the file's own (:func:`checked_settings`), named ``overrides_source``
    in errors, and recorded in the provenance. The report goes to ``<reports_root>/<report_name>``,
    by default ``<reports_root>/<profile>``.

    Problems that can be seen before any kernel starts (unknown profile, stage or key, a profile value
    of the wrong type or out of range, resuming past a stage that never succeeded) raise ``ValueError``
    instead, before any folder is made; ``notice`` (a line for the user) is logged once they passed.
    ``dry_run``: after those checks, log the plan with a time estimate (:func:`plan_lines`) and run nothing.
    Ctrl-C marks the running stage ``interrupted`` and the later ones ``not run`` in
    ``status.json`` and the index, then raises :class:`ReportInterrupted`.
    """
    settings, stages, declared, applied = _checked_profile(
        profile, params_dir, notebooks_dir, overrides, overrides_source, log
    )
    notebooks = {p.stem: p for p in stages}
    names = list(notebooks)

    out_dir = resolve_path(reports_root) / (report_name or profile)
    _select(names, from_stage, only)  # an unknown stage, and resuming past a stage that never ran: before any folder
    if from_stage is not None:
        _check_resumable(names, from_stage, load_previous(out_dir / "status.json"), profile)
    if notice:
        log(notice)
    check_output_dir(out_dir, "--reports-dir: the report folder")  # a file, under a file, a link loop, not writable
    run_dir = run_dir_of(profile, settings)
    check_run_dir_owner(run_dir, profile)  # another profile's run folder: its data would mix with this one's
    if dry_run:
        for line in plan_lines(
            profile, _select(names, from_stage, only), out_dir, settings, resolve_path(REFERENCE_REPORTS)
        ):
            log(line)
        return 0
    out_dir.mkdir(parents=True, exist_ok=True)
    # one run per report folder at a time; a run killed outright (SIGKILL, a power cut) is found here
    with writer_lock(out_dir, "goalrm report: the report folder", f"goalrm report --profile {profile}"):
        previous = killed_run_cleared(out_dir, load_previous(out_dir / "status.json"))
        claim_run_dir(run_dir, profile)
        if from_stage is not None:
            _check_resumable(names, from_stage, previous, profile)
        selected = _select(names, from_stage, only)
        logs = resolve_path(logs_dir) if logs_dir is not None else run_dir_of(profile, settings) / "logs"
        _record_run_provenance(profile, settings, applied, out_dir)

        progress = _Progress(profile, out_dir, names, selected, previous, log)
        _estimate_stages(progress, profile, out_dir, settings, log)
        try:
            for k, name in enumerate(progress.todo, 1):
                if progress.failed:
                    progress.entries[name] = status_entry(name, "not run")
                    continue
                params = stage_parameters(profile, settings, declared[name], out_dir, name)
                progress.run_stage(k, name, notebooks[name], params, logs / f"{name}.log", kernel_name)
            progress.finish()
        except KeyboardInterrupt as stop:
            progress.stop(stop)
        log(f"report: {out_dir / 'index.html'}")
        return 1 if progress.failed else 0


def _estimate_stages(progress: _Progress, profile: str, out_dir: Path, settings: Mapping[str, Any], log) -> None:
    """Give ``progress`` each stage's ETA: an earlier run's own time (status.json, metrics.json's timings, the run
    folder's stage records), else the committed report's at this machine's speed, said when the probe ran on a
    loaded machine."""
    estimate = stage_estimates(
        profile,
        out_dir,
        int(settings.get("torch_threads") or 1),
        resolve_path(REFERENCE_REPORTS),
        names=progress.todo,
        run_dir=run_dir_of(profile, settings),
    )
    progress.durations, progress.basis = estimate.durations, estimate.bases
    if estimate.note:
        log(f"ETA: {estimate.note}")


def _checked_profile(
    profile: str,
    params_dir,
    notebooks_dir,
    overrides: Mapping[str, Any] | None,
    overrides_source: str,
    log: Callable[[str], Any],
) -> tuple[dict, list[Path], dict, dict]:
    """(the profile's settings with ``overrides`` on top, checked; the stage notebooks; the parameters
    each declares; the overrides as applied). The warnings are logged once, on the run's own output
    (a sweep prefixes them with the point)."""
    settings = load_profile(notebook_profile(profile, params_dir), params_dir)
    source = shown_path(profile_path(profile, params_dir))
    for key, value in (overrides or {}).items():
        check_value(overrides_source, key, value)
    notebooks_dir = notebooks_dir if notebooks_dir is not None else notebooks_folder(settings)
    stages = discover_stages(resolve_path(notebooks_dir))
    if not stages:
        raise ValueError(f"no NN_topic.ipynb notebooks in {resolve_path(notebooks_dir)}")
    declared = inspect_stages(stages)
    settings, found = checked_settings(settings, overrides, declared, source, overrides_source)
    applied = {k: settings[k] for k in (overrides or {})}
    for message in found:
        log(f"warning: {message}")
    return settings, stages, declared, applied


def _record_run_provenance(
    profile: str, settings: Mapping[str, Any], applied: Mapping[str, Any], out_dir: Path
) -> None:
    """What produced this report, with the overrides applied, first into ``metrics.json``."""
    provenance = collect_provenance(profile, settings)
    if applied:
        provenance.setdefault("profile", {})["overrides"] = dict(applied)
    record_provenance(provenance, out_dir)


class _Progress:
    """The stages of one report run as it goes: their status entries (``status.json`` and the index,
    rewritten at every change), the stage running now, and the last one done."""

    def __init__(
        self,
        profile: str,
        out_dir: Path,
        names: list[str],
        selected: list[str],
        previous: dict[str, dict],
        log: Callable[[str], Any],
    ):
        self.profile, self.out_dir, self.names, self.log = profile, out_dir, names, log
        self.entries = {
            n: _carried_over(n, previous) if n not in selected else status_entry(n, "pending") for n in names
        }
        self.todo = [n for n in names if n in selected]
        self.durations, self.basis = last_durations(previous), "last run"
        self.failed = False
        self.current: str | None = None  # the stage whose entry is not final yet
        self.last_done: str | None = None
        self.t0 = time.monotonic()
        self._index_errors: list[dict | None] = [None]

    def refresh(self) -> None:
        """Rewrite status.json and the index; say so once when the index falls back to the stage table."""
        error = write_status(self.out_dir, self.profile, list(self.entries.values()))
        if error is not None and error != self._index_errors[-1]:
            self.log(
                f"warning: index.html is the fallback page (stage table only): rendering failed with "
                f"{error['ename']}: {error['evalue']}; status.json records it as index_error"
            )
        self._index_errors.append(error)

    def run_stage(
        self, k: int, name: str, notebook: Path, params: Mapping[str, Any], log_path: Path, kernel_name: str
    ) -> None:
        """Run stage ``name`` (the ``k``-th to do); note it in its run directory when it succeeds."""
        run_dir = resolve_path(params["run_dir"]) if params.get("run_dir") else None
        self.current, self.t0 = name, time.monotonic()
        self.entries[name] = status_entry(name, "running", started=timestamp(), log=relative_paths(str(log_path)))
        if run_dir is not None:  # until it succeeds again, the stage's artifacts are not current
            RunDir(run_dir).stage_record(name).unlink(missing_ok=True)
        self.refresh()
        self.log(progress_line(k, self.todo, log_path, self.durations, self.basis))
        tag = f"[{k}/{len(self.todo)} {name}]"
        with heartbeat(tag, log_path, self.durations.get(name), self.log, every=HEARTBEAT_S):
            self.entries[name] = _run_one(
                notebook, self.out_dir, params, kernel_name, self.log, stages=self.names, log_path=log_path, tag=tag
            )
        self.current, self.last_done = None, name
        self.failed = self.entries[name]["status"] == "failed"
        if not self.failed and run_dir is not None:
            record_stage(run_dir, name, params, duration_s=self.entries[name].get("duration_s"))
        self.refresh_pages()
        self.refresh()

    def refresh_pages(self) -> None:
        """The stage pages' previous/next links, but for the kept stages' pages: a kept stage's artifacts stand as
        they are, so a resumed run never rewrites an earlier stage's page (53, item 3), though its link to a page
        this run made or dropped then says what was there when it ran."""
        kept = {n for n, entry in self.entries.items() if entry["status"] == "kept"}
        refresh_navigation(self.out_dir, self.names, keep=kept)

    def finish(self) -> None:
        self.refresh_pages()
        self.refresh()

    def stop(self, stop: KeyboardInterrupt) -> None:
        """Ctrl-C or SIGTERM: the running stage becomes ``interrupted`` (its pages dropped), the later
        ones ``not run``; then :class:`ReportInterrupted` says where to resume."""
        how = "SIGTERM" if isinstance(stop, Terminated) else "Ctrl-C"
        with interrupts_deferred():
            elapsed = None
            if self.current is not None:
                elapsed = round(time.monotonic() - self.t0, 2)
                self.entries[self.current] = {
                    **self.entries[self.current],
                    "status": "interrupted",
                    "duration_s": elapsed,
                    "error": {
                        "ename": type(stop).__name__,
                        "evalue": f"interrupted ({how})",
                        "cell_index": None,
                        "exec_count": None,
                    },
                }
                _drop_outputs(self.out_dir, self.current)  # an older run's pages would pass for this run's
            for name in self.todo:
                if self.entries[name]["status"] in ("pending", "running"):
                    self.entries[name] = status_entry(name, "not run")
            with contextlib.suppress(Exception):
                self.refresh_pages()
            write_status(self.out_dir, self.profile, list(self.entries.values()))
        resume_from = next((n for n in self.todo if self.entries[n]["status"] not in SUCCEEDED), None)
        raise ReportInterrupted(
            self.profile, self.current, elapsed, resume_from, after=self.last_done, how=how
        ) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="goalrm report", description="Execute the notebooks and build the HTML report."
    )
    parser.add_argument("--profile", default="demo", type=path_part, help="params/<profile>.yaml (default: demo)")
    parser.add_argument(
        "--set",
        dest="set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a profile value for this run, over the file's (repeatable); VALUE is YAML: 4, 1e-5, true, "
        "cosine, [0, 1]. Checked like the file's values before any stage starts",
    )
    parser.add_argument("--from", dest="from_stage", default=None, help="resume from this stage (NN or NN_topic)")
    parser.add_argument("--only", nargs="+", default=None, help="run only these stages (NN or NN_topic)")
    parser.add_argument("--kernel", default="goalrm", help="Jupyter kernel name (default: goalrm)")
    parser.add_argument(
        "--notebooks-dir",
        default=None,
        help="the stage notebooks (default: the profile's `notebooks` key, else notebooks/)",
    )
    parser.add_argument("--params-dir", default="params")
    parser.add_argument(
        "--reports-dir",
        default=USER_REPORTS,
        help=f"root folder; output goes to <dir>/<profile>/ (default: {USER_REPORTS}, git-ignored; the "
        f"committed reference reports are regenerated with --reports-dir {REFERENCE_REPORTS})",
    )
    parser.add_argument(
        "--name",
        default=None,
        type=path_part,
        help="report folder <reports-dir>/<name>/ (default: the profile; with --set, <profile>-set, and its "
        "run_dir runs/<name> unless --set names one: a changed experiment never overwrites the profile's report)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="check the profile, every --set and the stages, print the plan with a time estimate for this "
        "machine, and run nothing",
    )
    parser.add_argument(
        "--index-only",
        action="store_true",
        help="re-render index.html from the existing status.json and metrics.json; run no stage",
    )
    return parser


def resume_command(args: argparse.Namespace, stage: str) -> str:
    """The ``goalrm report`` command line that resumes ``args``'s run from ``stage``."""
    import shlex

    parts = ["goalrm report", "--profile", shlex.quote(args.profile), "--from", stage[:2]]
    if args.only:
        parts += ["--only", *map(shlex.quote, args.only)]
    for flag in args.set:
        parts += ["--set", shlex.quote(flag)]
    if getattr(args, "name", None):
        parts += ["--name", shlex.quote(args.name)]
    for option, default in (
        ("kernel", "goalrm"),
        ("notebooks_dir", None),
        ("params_dir", "params"),
        ("reports_dir", USER_REPORTS),
    ):
        value = getattr(args, option)
        if value != default:
            parts += [f"--{option.replace('_', '-')}", shlex.quote(str(value))]
    return " ".join(parts)


def main(argv: list[str] | None = None) -> int:
    """``goalrm report``: exit 0 when all stages succeed, 1 when one fails (or, with ``--index-only``,
    when only the fallback index could be drawn), 2 on a usage error, 130 when Ctrl-C stopped it
    (143 for SIGTERM), after one line saying where and how to resume."""
    args = build_parser().parse_args(argv)
    # A signal can land while nbclient has made a coroutine it has not yet awaited; the run stops
    # there on purpose, so Python's "never awaited" warning at exit would only be noise after the one line.
    warnings.filterwarnings(
        "ignore", message=r"coroutine 'NotebookClient\.\w+' was never awaited", category=RuntimeWarning
    )
    try:
        with sigterm_as_interrupt():
            return _main(args)
    except ReportInterrupted as stop:
        command = resume_command(args, stop.resume_from) if stop.resume_from else None
        print(f"goalrm report: {stop.describe(command)}", file=sys.stderr, flush=True)
        return stop.exit_code
    except KeyboardInterrupt as stop:
        terminated = isinstance(stop, Terminated)
        print(
            f"goalrm report: interrupted{' (SIGTERM)' if terminated else ''} before any stage ran",
            file=sys.stderr,
            flush=True,
        )
        return TERMINATED_EXIT if terminated else INTERRUPTED_EXIT
    except (ValueError, ArtifactError, OSError, RuntimeError) as e:
        if debugging() or not (
            isinstance(e, (ValueError, OSError)) or symlink_loop(e)
        ):  # --debug: the traceback, as every goalrm command shows it
            raise
        print(f"goalrm report: error: {error_line(e)}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    """``goalrm report`` once its flags are parsed (:func:`main` turns what it raises into exit codes)."""
    if args.index_only:
        if args.set:
            raise ValueError("--index-only runs nothing: --set has no effect with it")
        out_dir = resolve_path(args.reports_dir) / (args.name or args.profile)
        page = rebuild_index(out_dir)
        error = index_error_of(out_dir)
        if error is not None:
            print(
                f"goalrm report: the full index could not be drawn ({error.get('ename')}: {error.get('evalue')}); "
                f"{page} is the fallback page (stage table only)",
                file=sys.stderr,
            )
            return 1
        print(f"report: {page}")
        return 0
    overrides = parse_set_flags(args.set) or {}
    name, notice = args.name, None
    if overrides and name is None:
        name = f"{args.profile}-set"
        notice = (
            f"goalrm report: --set changes the experiment, so it reports to {args.reports_dir}/{name}/ (--name "
            "to choose)"
        )
    if name is not None and name != args.profile and "run_dir" not in overrides:
        overrides["run_dir"] = f"runs/{name}"
    return run_report(
        args.profile,
        notebooks_dir=args.notebooks_dir,
        params_dir=args.params_dir,
        reports_root=args.reports_dir,
        kernel_name=args.kernel,
        from_stage=args.from_stage,
        only=args.only,
        overrides=overrides or None,
        report_name=name,
        notice=notice,
        dry_run=args.dry_run,
    )


if __name__ == "__main__":
    raise SystemExit(main())
