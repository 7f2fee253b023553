"""``goalrm sweep``: a profile's stages once per point of a parameter grid, and one page comparing the points.

    goalrm sweep --profile demo --grid rm.contrastive_loss_beta=0,0.1,0.5,1 --grid rm.goal_state_percentile=0,0.5
    goalrm sweep --spec ablations        # params/ablations.yaml: the paper's ablations, one key at a time

Repeated ``--grid`` flags form a Cartesian product; ``--one-at-a-time`` varies each key alone around
the base profile instead (plus the base point itself). With ``<sweep>`` = ``<profile>-sweep-<name>``::

    runs/<profile>/                    the base profile's run: the stages before --stages (01 by default)
                                       run here once, and only when their parameters changed
    runs/<profile>/rm-store/<key>/     every RM a sweep trained, by the hash of its training config: an RM
                                       whose config did not change (a baseline, when β is swept) trains once
    runs/<sweep>/<point>/              one run directory per point; data/ links to the base run's
    reports/<sweep>/<point>/           the point's own report; point.json, written last, marks it complete
    reports/<sweep>/index.html         the comparison page (``sweep_page``); sweep.json: the plan

A point whose ``point.json`` is there (with the same overrides) is skipped, so an interrupted sweep
resumes where it stopped. Everything that can be checked before a kernel starts is: a grid key no
selected notebook declares, a key a shared stage reads, a value of the wrong type or outside what the
trainer accepts are errors before any stage runs.
"""

from __future__ import annotations

import argparse
import ast
import functools
import itertools
import json
import multiprocessing
import os
import re
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from goalrm_core.data.io import ArtifactError, atomic_write_json, check_output_dir, timestamp
from goalrm_core.data.rundir import STAGE_FOLDERS, RunDir
from goalrm_core.flags import Interrupted, interrupted_how, path_part, positive_int, run_command
from goalrm_core.paths import resolve_path, shown_path
from goalrm_core.pipeline.notebook_params import TRAINING_STAGE
from goalrm_core.pipeline.profile_checks import (
    check_profile_against_notebooks,
    check_ranges,
    check_trainer,
    coerce_to_declared,
    unknown_key_message,
)
from goalrm_core.pipeline.profile_files import load_profile, notebook_profile, read_yaml, sweep_spec_path
from goalrm_core.pipeline.profile_values import parse_set_flags, parse_value
from goalrm_core.pipeline.records import stage_is_current
from goalrm_core.pipeline.runner import (
    USER_REPORTS,
    discover_stages,
    inspect_stages,
    match_stage,
    run_dir_of,
    run_report,
    stage_parameters,
)
from goalrm_core.pipeline.signals import sigterm_as_interrupt
from goalrm_core.report.sweep_layout import (
    PAIRED_FILE,
    PLAN_FILE,
    POINT_MANIFEST,
    format_value,
    point_folder,
    renamed_record,
)
from goalrm_core.study.recipe import RM_BLOCK, RM_KEYS, setting_key

# Keys the sweep sets itself for every point: a grid or --set may not.
SET_BY_SWEEP = ("profile", "run_dir", "reports_dir", "rm_store")
BASE_POINT = "base"
SPEC_KEYS = ("profile", "name", "grid", "one_at_a_time", "stages", "seeds", "set")


# ------------------------------------------------------------------------------- values and names


def write_comparison(report_dir: Path, report_links: bool = True) -> Path:
    """:func:`goalrm_core.report.sweep_page.write_comparison`, imported when the page is drawn: the
    page's tables and figures load pandas and matplotlib, which ``--help``, an argument error and
    ``--dry-run`` do without."""
    from goalrm_core.report.sweep_page import write_comparison as write

    return write(report_dir, report_links=report_links)


def parse_grid_flag(flag: str) -> tuple[str, list]:
    """``"rm.contrastive_loss_beta=0,0.1"`` -> ``("contrastive_loss_beta", [0, 0.1])``: a trainer setting is
    named as the profile's ``rm:`` block has it (``study.recipe.setting_key``), an old key refused."""
    key, sep, values = flag.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"--grid {flag!r}: expected KEY=VALUE[,VALUE...]")
    key = setting_key(key, "--grid")
    parts = [v for v in values.split(",")]
    if not values.strip() or any(not v.strip() for v in parts):
        raise ValueError(f"--grid {flag!r}: empty value")
    return key, [parse_value(v) for v in parts]


def point_name(values: Mapping[str, Any]) -> str:
    """The folder name of a point: its overrides, ``key=value`` joined by ``__`` (``base`` for none)."""
    if not values:
        return BASE_POINT
    return "__".join(f"{k}={re.sub(r'[^A-Za-z0-9._+-]', '-', format_value(v))}" for k, v in values.items())


def parse_stages(text: str, names: list[str]) -> list[str]:
    """``"02-04"``, ``"02,03"`` or ``"03"`` -> the stage names, in order; they must be contiguous."""
    chosen: set[str] = set()
    for part in text.split(","):
        first, sep, last = part.partition("-")
        lo = names.index(match_stage(first, names))
        hi = names.index(match_stage(last, names)) if sep else lo
        if hi < lo:
            raise ValueError(f"--stages {text!r}: {names[lo]} comes after {names[hi]}")
        chosen.update(names[lo : hi + 1])
    ordered = [n for n in names if n in chosen]
    span = names[names.index(ordered[0]) : names.index(ordered[-1]) + 1]
    if ordered != span:
        raise ValueError(
            f"--stages {text!r} skips {', '.join(sorted(set(span) - chosen))}: a point runs contiguous stages"
        )
    return ordered


# ------------------------------------------------------------------------------------------ plan


@dataclass(frozen=True)
class Point:
    """One grid point: its name (its folder) and the values of the swept keys it sets."""

    name: str
    values: dict


@dataclass
class SweepPlan:
    """Everything a sweep will do, checked: built by :func:`plan_sweep`, recorded as ``sweep.json``."""

    profile: str
    name: str
    grid: dict[str, list]
    one_at_a_time: bool
    stages: list[str]
    shared: list[str]
    common: dict
    base_values: dict
    points: list[Point]
    settings: dict = field(repr=False)
    declared: dict = field(repr=False)
    notebooks_dir: Path = Path("notebooks")
    params_dir: Path = Path("params")
    reports_root: Path = Path(USER_REPORTS)
    kernel_name: str = "goalrm"

    @property
    def title(self) -> str:
        return f"{self.profile}-sweep-{self.name}"

    @property
    def report_dir(self) -> Path:
        return self.reports_root / self.title

    @property
    def base_run(self) -> Path:
        return run_dir_of(self.profile, self.settings)

    @property
    def run_root(self) -> Path:
        return self.base_run.parent / self.title

    @property
    def default_point(self) -> str | None:
        """The point at the base profile's values of every swept key, if the grid has one."""
        for p in self.points:
            if all(_same(p.values.get(k, self.base_values[k]), self.base_values[k]) for k in self.grid):
                return p.name
        return None

    def report_folder(self, point: str) -> Path:
        """Point ``point``'s report folder: its own, or an older sweep's named before the ``rm:`` block
        (``contrastive_beta=0.1`` for ``contrastive_loss_beta=0.1``, :func:`point_folder`)."""
        return point_folder(self.report_dir, point)

    def run_folder(self, point: str) -> Path:
        """Point ``point``'s run folder, found as :meth:`report_folder` finds its report folder."""
        return point_folder(self.run_root, point)

    def overrides(self, point: Point) -> dict:
        """What the point's report runs with on top of the base profile."""
        return {
            **self.common,
            **point.values,
            "run_dir": _shown_path(self.run_root / point.name),
            "rm_store": _shown_path(RunDir(self.base_run).rm_store),
        }

    def record(self) -> dict:
        """``sweep.json``: what the comparison page needs, without the machine's paths."""
        return {
            "profile": self.profile,
            "name": self.name,
            "grid": self.grid,
            "one_at_a_time": self.one_at_a_time,
            "stages": self.stages,
            "shared": self.shared,
            "common": self.common,
            "base_values": self.base_values,
            "default_point": self.default_point,
            "points": [{"name": p.name, "values": p.values} for p in self.points],
        }


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a) == json.dumps(b) or (
        isinstance(a, (int, float))
        and isinstance(b, (int, float))
        and not isinstance(a, bool)
        and not isinstance(b, bool)
        and float(a) == float(b)
    )


def _shown_path(path: Path) -> str:
    """``path`` relative to the project when inside it (so reports name no machine folder)."""
    try:
        return str(Path(path).resolve().relative_to(resolve_path(".").resolve()))
    except ValueError:
        return str(path)


def _default_of(key: str, declared: Mapping[str, Mapping], stages: Sequence[str]) -> Any:
    """The notebook default of ``key`` (the first selected stage declaring it)."""
    for stage in stages:
        if key in declared[stage]:
            try:
                return ast.literal_eval(str(declared[stage][key].get("default")))
            except (ValueError, SyntaxError):
                return None
    return None


def _check_key(key: str, declared: Mapping[str, Mapping], stages: list[str], shared: list[str], what: str) -> None:
    if key in SET_BY_SWEEP:
        raise ValueError(f"{what} key {key!r} is set by the sweep itself for every point")
    users = [nb for nb, params in declared.items() if key in params]
    if not users and key in RM_KEYS:  # an rm key no notebook writes out: notebook 02 receives the block whole
        users = [nb for nb in declared if nb == TRAINING_STAGE]
    if not users:
        raise ValueError(
            unknown_key_message(key, declared, what, exclude=SET_BY_SWEEP)
            or f"{what}: key {key!r} is read by no notebook the sweep runs"
        )
    read_by_shared = [nb for nb in users if nb in shared]
    if read_by_shared:
        raise ValueError(
            f"{what} key {key!r} is read by {', '.join(read_by_shared)}, which the sweep shares from the base "
            f"run ({', '.join(shared)}): it cannot differ between points; put that stage in --stages"
        )
    if not set(users) & set(stages):
        raise ValueError(
            f"{what} key {key!r} is read only by {', '.join(users)}, which --stages "
            f"{'-'.join([stages[0], stages[-1]])} does not run"
        )


def _coerce(key: str, value: Any, declared: Mapping[str, Mapping], stages: Sequence[str]) -> Any:
    """An int where the notebooks declare a float becomes that float (``0`` -> ``0.0``)."""
    return coerce_to_declared(key, value, declared, stages)


def check_point(settings: Mapping[str, Any], declared: Mapping[str, Mapping], source: str) -> None:
    """Everything about one point's parameters that can fail before a kernel starts: the types the
    notebooks declare, the trainer's choices and ranges, then every profile key's range, choices and
    relations (``profiles.check_ranges``, which ``goalrm report`` applies to a profile and its ``--set``)."""
    check_profile_against_notebooks(settings, declared, source=source)
    check_trainer(settings, source)  # the trainer's choices and ranges
    check_ranges(settings, source)


def plan_sweep(
    profile: str,
    grid: Mapping[str, Sequence[Any]],
    *,
    one_at_a_time: bool = False,
    stages: str = "02-04",
    seeds: Sequence[int] | None = None,
    common: Mapping[str, Any] | None = None,
    name: str | None = None,
    notebooks_dir: str | os.PathLike = "notebooks",
    params_dir: str | os.PathLike = "params",
    reports_root: str | os.PathLike = USER_REPORTS,
    kernel_name: str = "goalrm",
) -> SweepPlan:
    """Check a sweep and list its points; raises ``ValueError`` (nothing has run) on a bad key or value.

    ``common`` holds profile values that every point changes alike (``--set``, ``seeds`` as
    ``rm_seeds``); ``name`` defaults to the swept keys.
    """
    if not grid:
        raise ValueError("a sweep needs at least one --grid KEY=VALUE[,VALUE...]")
    settings = _base_settings(profile, params_dir)
    declared, selected, shared = _sweep_stages(notebooks_dir, stages)
    common = _checked_common(common, seeds, declared, selected, shared)
    grid = _checked_grid(grid, common, declared, selected, shared)
    common = {k: _coerce(k, v, declared, selected) for k, v in common.items()}
    base_values = {k: settings[k] if k in settings else _default_of(k, declared, selected) for k in grid}
    points = _points(grid, base_values, one_at_a_time)

    plan = SweepPlan(
        profile=profile,
        name=name or "-".join(grid),
        grid=grid,
        one_at_a_time=one_at_a_time,
        stages=selected,
        shared=shared,
        common=common,
        base_values=base_values,
        points=points,
        settings=settings,
        declared=declared,
        notebooks_dir=resolve_path(notebooks_dir),
        params_dir=resolve_path(params_dir),
        reports_root=resolve_path(reports_root),
        kernel_name=kernel_name,
    )
    if not re.fullmatch(r"[A-Za-z0-9._+=-]+", plan.name):
        raise ValueError(f"sweep name {plan.name!r}: use letters, digits and . _ + = - only")
    for p in points:
        check_point({**settings, **plan.overrides(p)}, declared, source=f"{profile} sweep point {p.name}")
    return plan


def _base_settings(profile: str, params_dir) -> dict:
    """The base profile, which must name the run whose data the points share."""
    settings = load_profile(notebook_profile(profile), params_dir)
    if not settings.get("run_dir"):
        raise ValueError(
            f"profile {profile!r} sets no run_dir: a sweep shares the base run's data and needs to know where it is"
        )
    return settings


def _sweep_stages(notebooks_dir, stages: str) -> tuple[dict, list[str], list[str]]:
    """(the parameters each stage notebook declares, the stages each point runs, the earlier stages
    the points share from the base run)."""
    paths = discover_stages(resolve_path(notebooks_dir))
    if not paths:
        raise ValueError(f"no NN_topic.ipynb notebooks in {resolve_path(notebooks_dir)}")
    names = [p.stem for p in paths]
    declared = inspect_stages(paths)
    selected = parse_stages(stages, names)
    shared = names[: names.index(selected[0])]
    for stage in shared:
        if stage[:2] not in STAGE_FOLDERS:
            raise ValueError(
                f"stage {stage} cannot be shared between points (no run-directory folders are known for it): "
                "include it in --stages"
            )
    return declared, selected, shared


def _checked_common(
    common: Mapping[str, Any] | None,
    seeds: Sequence[int] | None,
    declared: Mapping[str, Mapping],
    selected: list[str],
    shared: list[str],
) -> dict:
    """The values every point sets alike (``--set``, and ``seeds`` as ``rm_seeds``), each key read by a stage the
    points run."""
    common = dict(common or {})
    if seeds is not None:
        if not seeds:
            raise ValueError("--seeds: give at least one seed")
        common["rm_seeds"] = [int(s) for s in seeds]
    for key in common:
        _check_key(key, declared, selected, shared, "--set")
    return common


def _checked_grid(
    grid: Mapping[str, Sequence[Any]],
    common: Mapping[str, Any],
    declared: Mapping[str, Mapping],
    selected: list[str],
    shared: list[str],
) -> dict[str, list]:
    """The swept values by key, as the notebooks declare them (``0`` -> ``0.0`` for a float): each key
    read by a stage the points run, not also in ``common``, with at least one value and none twice."""
    grid = {key: list(values) for key, values in grid.items()}
    for key, values in grid.items():
        _check_key(key, declared, selected, shared, "grid")
        if key in common:
            raise ValueError(f"key {key!r} is both swept and set for every point")
        if not values:
            raise ValueError(f"grid key {key!r} has no values")
        grid[key] = [_coerce(key, v, declared, selected) for v in values]
        if len({json.dumps(v) for v in grid[key]}) < len(values):
            raise ValueError(f"grid key {key!r} repeats a value: {values}")
    return grid


def _points(grid: Mapping[str, list], base_values: Mapping[str, Any], one_at_a_time: bool) -> list[Point]:
    """Every combination of the grid's values or, ``one_at_a_time``, the base point and each value
    that differs from the base alone; each point with its own folder name."""
    if one_at_a_time:
        values_list = [{}] + [{k: v} for k, vs in grid.items() for v in vs if not _same(v, base_values[k])]
    else:
        values_list = [dict(zip(grid, combo)) for combo in itertools.product(*grid.values())]
    points = [Point(point_name(v), v) for v in values_list]
    if len({p.name for p in points}) < len(points):
        raise ValueError("two grid points would share a folder name: make the values differ in more than punctuation")
    return points


# ------------------------------------------------------------------------------------------- run


def _stale_shared_stages(plan: SweepPlan) -> list[str]:
    """The shared stages whose record in the base run does not match the base profile (to run)."""
    return [
        s
        for s in plan.shared
        if not stage_is_current(
            plan.base_run, s, stage_parameters(plan.profile, plan.settings, plan.declared[s], plan.report_dir, s)
        )
    ]


def _link_shared(plan: SweepPlan, run: Path) -> None:
    """The point's run directory, with the shared stages' folders linked to the base run's."""
    run.mkdir(parents=True, exist_ok=True)
    for stage in plan.shared:
        for folder in STAGE_FOLDERS[stage[:2]]:
            link, target = run / folder, plan.base_run / folder
            if link.is_symlink() and link.resolve() == target.resolve():
                continue
            if link.is_symlink() or link.exists():
                raise ArtifactError(
                    f"{link} exists and is not a link to the base run's {folder}/: remove it to share the base's"
                )
            link.symlink_to(os.path.relpath(target, run))


def point_complete(plan: SweepPlan, point: Point) -> bool:
    """The point's manifest is there and records the overrides and stages it would run with now."""
    try:
        manifest = json.loads((plan.report_folder(point.name) / POINT_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    if not isinstance(manifest, dict):
        return False
    manifest = renamed_record(manifest)  # a point of an older sweep, its keys read under their names now
    expected = json.loads(json.dumps({"overrides": plan.overrides(point), "stages": plan.stages}))
    return {k: manifest.get(k) for k in expected} == expected


def _run_point(job: dict) -> int:
    """One point's report (a top-level function, so a process pool can run it)."""
    say = _prefixed(job["point"])
    code = run_report(
        job["profile"],
        notebooks_dir=job["notebooks_dir"],
        params_dir=job["params_dir"],
        reports_root=job["reports_root"],
        kernel_name=job["kernel_name"],
        only=job["stages"],
        log=say,
        overrides=job["overrides"],
        report_name=job["report_name"],
    )
    if code == 0:
        atomic_write_json(
            Path(job["reports_root"]) / job["report_name"] / POINT_MANIFEST,
            {
                "point": job["point"],
                "values": job["values"],
                "overrides": job["overrides"],
                "stages": job["stages"],
                "finished": timestamp(),
            },
        )
    return code


def record_paired_deltas(plan: SweepPlan, n_boot: int = 1000, seed: int = 0) -> list[str]:
    """For every complete point but the base point (:attr:`SweepPlan.default_point`): the paired
    bootstrap Δ of the goal-conditioned RM's seed-0 reward AUROC, point − base point, on the same
    headline generations of the primary benchmark (every point shares the base run's data), written
    to ``<point>/paired_vs_base.json`` for the comparison page. Returns the points recorded; a point
    whose scored generations are missing or differ from the base point's is left out. A point of an older
    sweep is found in its folders as they were named (:meth:`SweepPlan.report_folder`, :meth:`SweepPlan.run_folder`)."""
    from goalrm_core.evaluation.tables import delta_auroc  # the scoring stack: only once points have run
    from goalrm_core.study.artifacts import headline_rows
    from goalrm_core.study.rms import GOAL_CONDITIONED, ID_BENCH

    base = plan.default_point
    if base is None or not (plan.report_folder(base) / POINT_MANIFEST).exists():
        return []
    headline = str(plan.settings.get("headline", "greedy"))
    detail_seed = int((plan.settings.get("rm_seeds") or [0])[0])  # the RM seed of the detail tables
    try:
        base_rows = headline_rows(plan.run_folder(base), GOAL_CONDITIONED, ID_BENCH, headline, detail_seed)
    except (OSError, ValueError):
        return []
    done = []
    for p in plan.points:
        if p.name == base or not (plan.report_folder(p.name) / POINT_MANIFEST).exists():
            continue
        try:
            rows = headline_rows(plan.run_folder(p.name), GOAL_CONDITIONED, ID_BENCH, headline, detail_seed)
            d = delta_auroc(rows, base_rows, n_boot=n_boot, seed=seed)
        except (OSError, ValueError):
            continue
        atomic_write_json(
            plan.report_folder(p.name) / PAIRED_FILE,
            {
                "base_point": base,
                "rm": GOAL_CONDITIONED,
                "benchmark": ID_BENCH,
                "headline": headline,
                "rm_seed": 0,
                "n_boot": n_boot,
                "delta": d["delta"],
                "ci_low": d["ci_low"],
                "ci_high": d["ci_high"],
                "p_value": d["p_value_two_sided"],
            },
        )
        done.append(p.name)
    return done


def _prefixed(point: str) -> Callable[[str], None]:
    return lambda message: print(f"[{point}] {message}", flush=True)


def _shared_stages_ready(plan: SweepPlan, log: Callable[[str], Any]) -> bool:
    """Run the shared stages once where they are not current; whether they now are (a failure is logged)."""
    stale = _stale_shared_stages(plan)
    if stale:
        log(f"shared stage(s) {', '.join(stale)}: running once in {_shown_path(plan.base_run)}")
        code = run_report(
            plan.profile,
            notebooks_dir=plan.notebooks_dir,
            params_dir=plan.params_dir,
            reports_root=plan.reports_root,
            kernel_name=plan.kernel_name,
            only=stale,
            log=_prefixed("shared"),
            report_name=f"{plan.title}/shared",
        )
        if code != 0:
            log(f"the shared stages failed: see {plan.report_dir / 'shared' / 'index.html'}; no point was run")
            return False
    elif plan.shared:
        log(f"shared stage(s) {', '.join(plan.shared)}: current in {_shown_path(plan.base_run)}")
    return True


def _record_eval_pair_count(plan: SweepPlan) -> None:
    """Add the held-out pair count to the plan file, where the shared stages wrote the pairs: the comparison
    page's interval of a one-seed pair accuracy needs it."""
    held_out = RunDir(plan.base_run).preference_pairs("eval")
    if held_out.exists():
        with held_out.open(encoding="utf-8") as f:
            n_eval = sum(1 for line in f if line.strip())
        atomic_write_json(plan.report_dir / PLAN_FILE, {**plan.record(), "n_eval_pairs": n_eval})


def _point_jobs(plan: SweepPlan, log: Callable[[str], Any]) -> list[dict]:
    """One job per incomplete point (its folder readied: the old manifest removed, the shared stages linked);
    the complete ones are logged as skipped."""
    todo = []
    for p in plan.points:
        if point_complete(plan, p):
            log(f"[{p.name}] complete: skipped")
            continue
        plan.report_folder(p.name).joinpath(POINT_MANIFEST).unlink(missing_ok=True)  # (an older sweep's folder too)
        _link_shared(plan, plan.run_root / p.name)
        todo.append(
            {
                "point": p.name,
                "values": p.values,
                "profile": plan.profile,
                "overrides": plan.overrides(p),
                "notebooks_dir": str(plan.notebooks_dir),
                "params_dir": str(plan.params_dir),
                "reports_root": str(plan.reports_root),
                "kernel_name": plan.kernel_name,
                "stages": plan.stages,
                "report_name": f"{plan.title}/{p.name}",
            }
        )
    return todo


def _run_points(plan: SweepPlan, todo: list[dict], jobs: int, report_links: bool) -> list[int]:
    """Run the points' jobs, ``jobs`` at a time (one each in a fresh process when more than one), rewriting the
    comparison page as each ends; returns their exit codes in ``todo``'s order."""
    if jobs == 1 or len(todo) <= 1:
        codes = []
        for job in todo:
            codes.append(_run_point(job))
            write_comparison(plan.report_dir, report_links=report_links)
        return codes
    # spawn: each point gets a fresh interpreter (papermill and the kernels are not fork-safe)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(_run_point, job): i for i, job in enumerate(todo)}
        codes = [1] * len(todo)
        for future in as_completed(futures):
            codes[futures[future]] = future.result()
            write_comparison(plan.report_dir, report_links=report_links)
    return codes


def run_sweep(
    plan: SweepPlan, jobs: int = 1, log: Callable[[str], Any] | None = None, report_links: bool = True
) -> int:
    """Run the shared stages if they are not current, then every incomplete point (``jobs`` at a
    time, each in its own process when ``jobs`` > 1), then write the comparison page. Returns 0
    when every point is complete, else 1."""
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    log = log or functools.partial(print, flush=True)
    plan.report_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(plan.report_dir / PLAN_FILE, plan.record())
    if not _shared_stages_ready(plan, log):
        write_comparison(plan.report_dir, report_links=report_links)
        return 1
    _record_eval_pair_count(plan)
    todo = _point_jobs(plan, log)
    log(f"sweep {plan.title}: {len(plan.points)} point(s), {len(todo)} to run, stages {', '.join(plan.stages)}")
    codes = _run_points(plan, todo, jobs, report_links)
    paired = record_paired_deltas(plan)
    if paired:
        log(f"paired Δ against the base point {plan.default_point}: {len(paired)} point(s)")
    page = write_comparison(plan.report_dir, report_links=report_links)
    failed = [job["point"] for job, code in zip(todo, codes) if code != 0]
    if failed:
        log(f"failed point(s): {', '.join(failed)} (their reports say why); run the same command again to retry them")
    log(f"comparison: {page}")
    return 1 if failed else 0


# ------------------------------------------------------------------------------------ spec files


def _spec_keys(mapping: Mapping[str, Any], where: str) -> dict:
    """A spec's ``grid`` or ``set`` with its ``rm:`` block's keys lifted under their own names, every key
    read through :func:`~goalrm_core.study.recipe.setting_key`."""
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if key == RM_BLOCK and isinstance(value, dict):
            out.update({setting_key(f"{RM_BLOCK}.{k}", where): v for k, v in value.items()})
        else:
            out[setting_key(str(key), where)] = value
    return out


def load_sweep_spec(name: str, params_dir: str | os.PathLike = "params") -> dict:
    """A sweep spec (``params/<name>.yaml`` with a top-level ``sweep:`` mapping), keys checked."""
    path = sweep_spec_path(name, params_dir)
    spec = dict(read_yaml(path)["sweep"])
    for part in ("grid", "set"):  # an rm: block of the trainer's settings, as in a profile; old keys refused
        if isinstance(spec.get(part), dict):
            spec[part] = _spec_keys(spec[part], f"{shown_path(path)}: sweep {part}")
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        raise ValueError(f"{path}: unknown sweep key(s) {unknown}; valid: {', '.join(SPEC_KEYS)}")
    if not isinstance(spec.get("grid"), dict) or not spec["grid"]:
        raise ValueError(f"{path}: 'grid' must map each swept key to a list of values")
    for key, values in spec["grid"].items():
        if not isinstance(values, list):
            raise ValueError(f"{path}: grid key {key!r} must have a list of values, got {values!r}")
    kinds = {
        "profile": (str, "a profile name"),
        "name": (str, "a name"),
        "one_at_a_time": (bool, "true or false"),
        "stages": ((str, int), "stages such as 02-04"),
        "seeds": (list, "a list of seeds, e.g. [0, 1, 2]"),
        "set": (dict, "a mapping of profile keys to values"),
    }
    for key, (kind, expected) in kinds.items():
        value = spec.get(key)
        if value is not None and (not isinstance(value, kind) or (kind is not bool and isinstance(value, bool))):
            raise ValueError(f"{path}: sweep key {key!r} must be {expected}, got {type(value).__name__}: {value!r}")
    for seed in spec.get("seeds") or []:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"{path}: sweep key 'seeds' must list integers >= 0, got {seed!r}")
    return {
        "profile": spec.get("profile", "demo"),
        "name": spec.get("name", name),
        "grid": spec["grid"],
        "one_at_a_time": bool(spec.get("one_at_a_time", False)),
        "stages": str(spec.get("stages", "02-04")),
        "seeds": spec.get("seeds"),
        "common": dict(spec.get("set") or {}),
    }


# ----------------------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="goalrm sweep", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--profile", default=None, type=path_part, help="base profile, params/<profile>.yaml (default: demo)"
    )
    p.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="a swept key and its values; repeated flags form a Cartesian product",
    )
    p.add_argument(
        "--spec",
        default=None,
        type=path_part,
        help="a sweep spec, params/<spec>.yaml (e.g. ablations), instead of --grid",
    )
    p.add_argument("--one-at-a-time", action="store_true", help="vary each key alone around the base profile")
    p.add_argument(
        "--stages",
        default=None,
        help="the stages each point runs, contiguous (default: 02-04); earlier ones are shared",
    )
    p.add_argument(
        "--seeds", default=None, help="RM seeds of every point, e.g. 0,1,2 (default: the profile's rm_seeds)"
    )
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a profile value every point changes alike"
    )
    p.add_argument(
        "--name",
        default=None,
        type=path_part,
        help="the sweep's name: <reports-dir>/<profile>-sweep-<name>/ (default: the swept keys)",
    )
    p.add_argument(
        "--jobs", type=positive_int, default=1, help="points run at once, each in its own process (default: 1)"
    )
    p.add_argument("--dry-run", action="store_true", help="check the sweep and list its points; run nothing")
    p.add_argument(
        "--index-only", action="store_true", help="rebuild the comparison page from what is there; run nothing"
    )
    p.add_argument(
        "--no-report-links",
        action="store_true",
        help="link each point's metrics.json only, not its full report (for a page committed without them)",
    )
    p.add_argument("--kernel", default="goalrm", help="Jupyter kernel name (default: goalrm)")
    p.add_argument("--notebooks-dir", default="notebooks")
    p.add_argument("--params-dir", default="params")
    p.add_argument(
        "--reports-dir",
        default=USER_REPORTS,
        help=f"root folder; output goes to <dir>/<profile>-sweep-<name>/ (default: {USER_REPORTS}, git-ignored)",
    )
    return p


def _parse_set(flags: list[str]) -> dict:
    return parse_set_flags(flags, "--set")


def _parse_seeds(text: str) -> list[int]:
    try:
        return [int(s) for s in text.split(",")]
    except ValueError:
        raise ValueError(f"--seeds {text!r}: expected integers separated by commas") from None


def main(argv: list[str] | None = None) -> int:
    """``goalrm sweep``: exit 0 when every point is complete, 1 when one failed, 2 on a usage error."""
    args = build_parser().parse_args(argv)
    if args.spec:
        if args.grid:
            raise ValueError("give either --spec or --grid, not both")
        spec = load_sweep_spec(args.spec, args.params_dir)
    else:
        spec = {
            "profile": "demo",
            "name": None,
            "grid": dict(parse_grid_flag(g) for g in args.grid),
            "one_at_a_time": False,
            "stages": "02-04",
            "seeds": None,
            "common": {},
        }
        if len(spec["grid"]) < len(args.grid):
            raise ValueError("a key is given to --grid twice: give all its values in one flag")
    plan = plan_sweep(
        args.profile or spec["profile"],
        spec["grid"],
        one_at_a_time=args.one_at_a_time or spec["one_at_a_time"],
        stages=args.stages or spec["stages"],
        seeds=_parse_seeds(args.seeds) if args.seeds else spec["seeds"],
        common={**spec["common"], **_parse_set(args.set)},
        name=args.name or spec["name"],
        notebooks_dir=args.notebooks_dir,
        params_dir=args.params_dir,
        reports_root=args.reports_dir,
        kernel_name=args.kernel,
    )
    check_output_dir(
        plan.report_dir, "--reports-dir: the sweep's folder"
    )  # a file, under a file, a link loop, not writable
    if args.dry_run:
        print(
            f"sweep {plan.title}: stages {', '.join(plan.stages)}; shared from {_shown_path(plan.base_run)}: "
            f"{', '.join(plan.shared) or 'none'}"
        )
        for p in plan.points:
            state = "complete" if point_complete(plan, p) else "to run"
            print(f"  {p.name:<60} {state}")
        return 0
    if args.index_only:
        print(f"comparison: {write_comparison(plan.report_dir, report_links=not args.no_report_links)}")
        return 0
    try:
        with sigterm_as_interrupt():
            return run_sweep(plan, jobs=args.jobs, report_links=not args.no_report_links)
    except KeyboardInterrupt as stop:
        import shlex

        done = [p.name for p in plan.points if point_complete(plan, p)]
        command = " ".join(["goalrm sweep", *map(shlex.quote, sys.argv[1:] if argv is None else argv)])
        raise Interrupted(
            f"{len(done)} of {len(plan.points)} point(s) complete in {_shown_path(plan.report_dir)} and kept "
            f"(an interrupted point is never counted complete); resume with: {command}",
            interrupted_how(stop),
        ) from None


if __name__ == "__main__":
    sys.exit(run_command(main, sys.argv[1:], "goalrm sweep"))
