"""What a report run records: each stage's metrics, the run's provenance and the timings in
``<reports_dir>/metrics.json``, and, in the run directory, which stages succeeded with which
parameters (``RunDir.stage_record``). A notebook records through :class:`~goalrm_core.pipeline.stage.Stage`,
which needs this module and not the runner. The file's layout (its section names and schema) is the
reader's, :mod:`goalrm_core.report.metrics_view`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from goalrm_core.data.io import ArtifactError, atomic_write_json, timestamp
from goalrm_core.data.rundir import RunDir
from goalrm_core.paths import resolve_path
from goalrm_core.report.metrics_view import METRICS_FILE, PROVENANCE_KEY, SCHEMA_KEY, SCHEMA_VERSION, TIMINGS_KEY


def _sorted_tree(obj: Any) -> Any:
    """Dicts with sorted (string) keys at every level, so identical runs give identical files."""
    if isinstance(obj, Mapping):
        return {str(k): _sorted_tree(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [_sorted_tree(v) for v in obj]
    return obj


def read_json_object(path: Path) -> dict:
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
    else in the file is then identical across identical runs and can be diffed. The top-level
    ``"schema_version"`` (:data:`SCHEMA_VERSION`) says which layout the file has; a file without it
    is schema 1 (:func:`~goalrm_core.report.metrics_view.metrics_schema`).
    """
    if stage in (TIMINGS_KEY, PROVENANCE_KEY, SCHEMA_KEY):
        raise ValueError(f"stage name {stage!r} is reserved for the {stage} section")
    path = resolve_path(reports_dir) / METRICS_FILE
    data = read_json_object(path)
    data[stage] = dict(metrics)
    if timings is not None:
        data.setdefault(TIMINGS_KEY, {})[stage] = dict(timings)
    data[SCHEMA_KEY] = SCHEMA_VERSION
    atomic_write_json(path, _sorted_tree(data))
    return path


def record_provenance(provenance: Mapping[str, Any], reports_dir: str | os.PathLike) -> Path:
    """Write what produced this report (:func:`collect_provenance`) into ``metrics.json`` under
    ``"provenance"``. Like ``"timings"`` it differs between identical runs: compare runs without it."""
    path = resolve_path(reports_dir) / METRICS_FILE
    data = read_json_object(path)
    data[PROVENANCE_KEY] = dict(provenance)
    data[SCHEMA_KEY] = SCHEMA_VERSION
    atomic_write_json(path, _sorted_tree(data))
    return path


# Parameters that name where a stage's report goes, not what the stage computes.
_REPORT_ONLY = ("profile", "reports_dir")


def record_stage(run_dir: Path, stage: str, params: Mapping[str, Any], duration_s: float | None = None) -> None:
    """Note in the run directory that ``stage`` succeeded, with which parameters and, given, in how many
    seconds (the next run's ETA for it where its report folder has no earlier run)."""
    computed = {k: v for k, v in params.items() if k not in _REPORT_ONLY}
    record = {"stage": stage, "finished": timestamp(), "parameters": _sorted_tree(computed)}
    if isinstance(duration_s, (int, float)) and not isinstance(duration_s, bool):
        record["duration_s"] = round(float(duration_s), 2)
    atomic_write_json(RunDir(run_dir).stage_record(stage), record)


def recorded_parameters(parameters: Any) -> Any:
    """Parameters a run recorded (a stage record's, a report's provenance) under today's names: a key profiles
    used before the ``rm:`` block (``rm_steps``) read as the trainer's name that replaced it (``max_steps``,
    :data:`~goalrm_core.study.recipe.OLD_KEYS`), so a run folder recorded before the rename is current when
    its values are. A record holding both an old key and its new name is left as it is (it matches nothing);
    anything but a mapping too.

    >>> recorded_parameters({"rm_steps": 200, "contrastive_beta": 0.5, "seed": 0})
    {'max_steps': 200, 'contrastive_loss_beta': 0.5, 'seed': 0}
    """
    from goalrm_core.study.recipe import renamed

    if not isinstance(parameters, Mapping):
        return parameters
    out = {renamed(str(k)): v for k, v in parameters.items()}
    return out if len(out) == len(parameters) else dict(parameters)


def stage_is_current(run_dir: Path, stage: str, params: Mapping[str, Any]) -> bool:
    """Did ``stage`` last succeed in ``run_dir`` with these parameters (its artifacts are then
    what running it again would write)? The record is read under today's names (:func:`recorded_parameters`):
    a run folder of the profiles before the ``rm:`` block is current when its values are the same."""
    try:
        record = read_json_object(RunDir(run_dir).stage_record(stage))
    except ArtifactError:
        return False
    computed = {k: v for k, v in params.items() if k not in _REPORT_ONLY}
    return recorded_parameters(record.get("parameters")) == json.loads(json.dumps(_sorted_tree(computed)))
