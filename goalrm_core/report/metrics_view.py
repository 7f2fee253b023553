"""``metrics.json`` for the pages: the one place in ``report/`` that reads the file (:func:`load_metrics`,
:func:`read_metrics`, :func:`reports_under`), the names of its top-level sections besides the stages', and
one typed view of it: the parts the pages read (the sections, each scorer's
AUROC per benchmark with its interval, the primary summaries across seeds, the profile's parameters)
as values that are always of the expected type, so a page never checks what a damaged or older file
holds. A missing key, or a value that is not a mapping where one is expected, reads as absent
(``{}``, ``None``); undefined numbers stay as recorded, for the formatters to write ``undefined``.

>>> m = Metrics({"evaluation": {"baseline": {"toy-id": {"auroc": 0.7, "auroc_ci_low": 0.6}}, "primary": 3}})
>>> m.auroc("baseline", "toy-id"), m.primary, m.benchmarks
(Auroc(value=0.7, low=0.6, high=None, reason=None), {}, ['toy-id'])
>>> m.auroc("baseline", "toy-id").text(), m.auroc("goal-conditioned", "toy-id").text()
('0.70', 'undefined')
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from goalrm_core.study import formatting as fmt
from goalrm_core.study.rms import RMS

#: a report folder's record of its results (written by :mod:`goalrm_core.pipeline.records`)
METRICS_FILE = "metrics.json"
# metrics.json's sections besides the stages': wall-clock numbers, which differ between identical runs
TIMINGS_KEY = "timings"
# and what produced the report (:mod:`goalrm_core.pipeline.provenance`), which differs between runs too
PROVENANCE_KEY = "provenance"
# metrics.json's layout: readers take a file without the key for schema 1 (before across-seed figures)
SCHEMA_KEY = "schema_version"
SCHEMA_VERSION = 2


def metrics_schema(metrics: Mapping[str, Any]) -> int | None:
    """The schema of a ``metrics.json`` read back: its ``schema_version``, 1 when the key is absent, None
    when what it records is no integer (``goalrm compare`` writes ``schema ?``; reading the file,
    :func:`load_metrics` refuses it)."""
    value = metrics.get(SCHEMA_KEY, 1)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ------------------------------------------------------------------------------------- reading


def load_metrics(path: str | Path) -> dict:
    """The metrics of a report: ``path`` is a report folder (its ``metrics.json``) or the file.
    A missing file is a ``FileNotFoundError``, a malformed one a ``ValueError``, each naming it."""
    p = Path(path)
    if p.is_dir():
        p = p / METRICS_FILE
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such metrics.json (give a report folder or its metrics.json)")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{p}: malformed metrics.json (not UTF-8 text)") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}: malformed metrics.json ({e.msg}, line {e.lineno})") from None
    except RecursionError:
        raise ValueError(f"{p}: malformed metrics.json (nested too deeply to be one goalrm wrote)") from None
    if not isinstance(data, dict):
        raise ValueError(f"{p}: malformed metrics.json (expected a JSON object, got {type(data).__name__})")
    version = data.get(SCHEMA_KEY, 1)
    if version not in range(1, SCHEMA_VERSION + 1) or isinstance(version, bool):
        raise ValueError(
            f"{p}: schema_version {json.dumps(version)[:40]} is not one this goalrm reads "
            f"(1 to {SCHEMA_VERSION}): it would be compared as if it were another"
        )
    return data


def read_metrics(report_dir: str | Path, strict: bool = False, absent: Any = None) -> Any:
    """What ``<report_dir>/metrics.json`` holds, as parsed; ``absent`` where there is no such file. A file
    that cannot be read or parsed reads as None, or with ``strict`` raises (``OSError``,
    ``json.JSONDecodeError``)."""
    path = Path(report_dir) / METRICS_FILE
    if not path.is_file():
        return absent
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        if strict:
            raise
        return None


def reports_under(root: str | Path) -> dict[str, Any]:
    """Every ``<root>/*/metrics.json``, in the order of their paths, by folder name: what each holds as
    parsed (None where it cannot be read or parsed); empty where ``root`` is no folder."""
    root = Path(root)
    if not root.is_dir():
        return {}
    return {p.parent.name: read_metrics(p.parent) for p in sorted(root.glob(f"*/{METRICS_FILE}"))}


def value(tree: Any, *keys: Any, default: Any = None) -> Any:
    """The value down ``keys``; ``default`` where a key is missing or a step is not a mapping."""
    for key in keys:
        if not isinstance(tree, Mapping) or key not in tree:
            return default
        tree = tree[key]
    return tree


def mapping(tree: Any, *keys: Any) -> Mapping | None:
    """The mapping down ``keys``; ``None`` where it is absent or not a mapping."""
    found = value(tree, *keys)
    return found if isinstance(found, Mapping) else None


def section(tree: Any, *keys: Any) -> Mapping:
    """The mapping down ``keys``; ``{}`` where it is absent or not a mapping."""
    found = mapping(tree, *keys)
    return {} if found is None else found


def entries(tree: Any, *keys: Any, strict: bool = False) -> dict[str, Mapping]:
    """The entries of the mapping down ``keys`` that are mappings themselves (per benchmark, per RM).
    ``strict``: a value there that is neither a mapping nor empty raises instead of reading as absent
    (the section that reads it then says it could not be drawn)."""
    found = (value(tree, *keys) or {}) if strict else section(tree, *keys)
    return {k: v for k, v in found.items() if isinstance(v, Mapping)}


def detail_seed(metrics: Any) -> int:
    """The RM seed of a report's detail tables and figures: the first of its profile's ``rm_seeds``
    (0 where the provenance does not say)."""
    seeds = value(metrics, "provenance", "profile", "parameters", "rm_seeds")
    return int(seeds[0]) if isinstance(seeds, list) and seeds and isinstance(seeds[0], int) else 0


@dataclass(frozen=True)
class Auroc:
    """One scorer's AUROC on one benchmark with its 95% interval and, when undefined, why."""

    value: Any = None
    low: Any = None
    high: Any = None
    reason: str | None = None

    @classmethod
    def of(cls, row: Any) -> Auroc:
        row = row if isinstance(row, Mapping) else {}
        return cls(row.get("auroc"), row.get("auroc_ci_low"), row.get("auroc_ci_high"), fmt.reason_of(row, "auroc"))

    @property
    def triple(self) -> tuple[Any, Any, Any]:
        return self.value, self.low, self.high

    def text(self) -> str:
        """``0.71 [0.64, 0.78]``, or ``undefined (reason)``."""
        return fmt.ci(*self.triple, reason=self.reason)


@dataclass(frozen=True)
class Metrics:
    """``metrics.json`` as the pages read it."""

    raw: Mapping

    def __post_init__(self):
        if not isinstance(self.raw, Mapping):
            object.__setattr__(self, "raw", {})

    @property
    def evaluation(self) -> Mapping:
        return section(self.raw, "evaluation")

    @property
    def training(self) -> Mapping:
        return section(self.raw, "training")

    @property
    def decoding(self) -> Mapping:
        return section(self.raw, "decoding")

    @property
    def data(self) -> Mapping:
        return section(self.raw, "data")

    @property
    def primary(self) -> Mapping:
        """``evaluation.primary``: the summaries across RM seeds (schema 2)."""
        return section(self.raw, "evaluation", "primary")

    @property
    def step_verifiers(self) -> Mapping:
        """``evaluation.step_verifiers``: the step-verifier bench (``study.step_bench.bench_metrics``)."""
        return section(self.raw, "evaluation", "step_verifiers")

    def parameter(self, name: str) -> Any:
        """A parameter of the profile the run used (``provenance.profile.parameters``)."""
        return value(self.raw, "provenance", "profile", "parameters", name)

    def auroc(self, scorer: str, bench: str) -> Auroc:
        return Auroc.of(value(self.evaluation, scorer, bench))

    @property
    def benchmarks(self) -> list[str]:
        """The benchmarks the evaluation recorded, in report order."""
        ev = self.evaluation
        return fmt.order_benchmarks(entries(ev, "delta_auroc" if section(ev, "delta_auroc") else RMS[0]))
