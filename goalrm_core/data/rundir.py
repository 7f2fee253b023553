"""One run directory, one layout: every artifact path of a run is a property or method of `RunDir`.

A run directory holds what one profile makes, stage by stage::

    <root>/
      data/policy/                       the policy (01)
      data/benchmarks/task.json          the task config and benchmark order (01)
      data/benchmarks/<bench>/test.jsonl benchmark questions (01)
      data/generations/<bench>/          the policy's generations: greedy.jsonl, samples.jsonl (01)
      data/preference/{train,eval}.jsonl preference pairs (01); data/preference/<source>/… one source's
      data/backbone/, data/manifest.json a recipe's backbone and its data's counts (the GPU check, real-cpu)
      data/feature-cache/                frozen lower layers' states of training texts, shared by RMs (real-lm)
      models/<model>/                    one trained RM per name and seed (02)
      logs/train-<model>.log             its training log (02)
      representations/<model>/           its goal states (03)
      eval/<model>/<bench>/{greedy,all}/output-metrics-dense.jsonl   dense scores (04)
      eval/<model>/eval_rm.json          what the scoring ran with (04)
      decoding/                          decoding artifacts (05)
      stages/<stage>.json                what each stage that succeeded ran with (the report runner)
      rm-store/<key>/                    RMs trained by a sweep, by the hash of their training config

``<model>`` is ``<rm>-seed<k>`` (see `RunDir.model_name`). What the names of the RMs are is the
study's business; this module only places them.

>>> run = RunDir("runs/demo")
>>> run.model("baseline", seed=1).as_posix()
'runs/demo/models/baseline-seed1'
>>> run.scored("baseline", "toy-id", "all").as_posix()
'runs/demo/eval/baseline-seed0/toy-id/all/output-metrics-dense.jsonl'
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from goalrm_core.flags import safe_path_part

# The split a benchmark's sampled generations are scored under (the official eval_rm layout calls it
# ``all``); greedy generations keep ``greedy``.
SCORED_SPLITS = ("greedy", "all")
# The file name the official eval_rm.py writes (readers take every *.jsonl of a split folder).
SCORED_FILE = "output-metrics-dense.jsonl"
# The official layout of ``all/``: the greedy rows, then the samples one pass at a time (what the official
# eval_rm.py's glob of a benchmark folder gives, and what its metrics.py groups by position). eval-rm writes
# it so; each greedy row there carries GREEDY_IN_ALL and each sample SAMPLE_ROW (its place in the input), so
# goalrm's readers take the samples alone, in their input order (:func:`samples_of_all`).
GREEDY_IN_ALL = "greedy_copy"
SAMPLE_ROW = "sample_row"


def official_all_rows(greedy: list[dict], samples: list[dict]) -> list[dict]:
    """The rows of ``all/`` in the official layout: the greedy rows (marked), then the samples in pass order
    (stably by ``sample_index`` when every sample has one; else as given, as a pass-per-file input already is).

    >>> rows = official_all_rows([{"question": "A"}, {"question": "B"}],
    ...                          [{"question": q, "sample_index": i} for q in "AB" for i in range(2)])
    >>> [(r["question"], r.get("sample_index")) for r in rows]
    [('A', None), ('B', None), ('A', 0), ('B', 0), ('A', 1), ('B', 1)]
    >>> samples_of_all(rows) == [{"question": q, "sample_index": i} for q in "AB" for i in range(2)]
    True
    """
    marked = [{**row, SAMPLE_ROW: i} for i, row in enumerate(samples)]
    if marked and all("sample_index" in row for row in marked):
        marked.sort(key=lambda row: row["sample_index"])
    return [{**row, GREEDY_IN_ALL: True} for row in greedy] + marked


def is_official_all(rows: list[dict]) -> bool:
    """Whether ``all/`` rows eval-rm wrote hold the greedy rows too (:func:`official_all_rows`)."""
    return any(row.get(GREEDY_IN_ALL) for row in rows)


def samples_of_all(rows: list[dict]) -> list[dict]:
    """The samples of ``all/`` rows in their input order, without the layout's marks (rows of an older
    goalrm folder, samples alone, come back as they are)."""
    if not any(SAMPLE_ROW in row for row in rows) and not is_official_all(rows):
        return rows
    kept = sorted((row for row in rows if not row.get(GREEDY_IN_ALL)), key=lambda row: row[SAMPLE_ROW])
    return [{k: v for k, v in row.items() if k != SAMPLE_ROW} for row in kept]


# What eval-rm ran with (RM, goal state, template, --filter_threshold …), at the root of its --save_dir.
EVAL_SETTINGS = "eval_rm.json"
# What the trainer writes into an RM's folder beside the weights.
TRAIN_SUMMARY = "train_summary.json"
# The top-level folders each stage writes, by stage number: what a sweep point shares, by a link to
# the base run's folder, for the stages it does not run itself.
STAGE_FOLDERS = {"01": ("data",), "02": ("models",), "03": ("representations",), "04": ("eval",), "05": ("decoding",)}


@dataclass(frozen=True)
class RunDir:
    """Paths of one run directory (nothing is created or read here)."""

    root: Path

    def __init__(self, root: str | os.PathLike) -> None:
        object.__setattr__(self, "root", Path(root))

    def __fspath__(self) -> str:
        return os.fspath(self.root)

    # --- data stage (01) ---------------------------------------------------------------------

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def policy(self) -> Path:
        return self.data / "policy"

    @property
    def benchmarks(self) -> Path:
        return self.data / "benchmarks"

    @property
    def task_json(self) -> Path:
        return self.benchmarks / "task.json"

    def benchmark_questions(self, bench: str) -> Path:
        return self.benchmarks / bench / "test.jsonl"

    @property
    def generations(self) -> Path:
        return self.data / "generations"

    @property
    def preference(self) -> Path:
        return self.data / "preference"

    def preference_pairs(self, split: str, source: str | None = None) -> Path:
        """The pairs of one split; given ``source``, that source's own (a recipe that trains on several)."""
        return (self.preference if source is None else self.preference / source) / f"{split}.jsonl"

    @property
    def backbone(self) -> Path:
        """A randomly initialised backbone a recipe writes in place of a trained policy."""
        return self.data / "backbone"

    @property
    def feature_cache(self) -> Path:
        """Frozen lower layers' states of the training texts, kept across RMs (``--feature_cache_dir``)."""
        return self.data / "feature-cache"

    @property
    def data_manifest(self) -> Path:
        """A recipe's counts of the data it prepared."""
        return self.data / "manifest.json"

    # --- one trained RM per (name, seed): models, logs, goal states, scores (02-04) ------------

    @staticmethod
    def model_name(rm: str, seed: int = 0) -> str:
        return f"{rm}-seed{seed}"

    @property
    def models(self) -> Path:
        return self.root / "models"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def representations(self) -> Path:
        return self.root / "representations"

    def model(self, rm: str, seed: int = 0) -> Path:
        return self.models / self.model_name(rm, seed)

    def training_log(self, rm: str, seed: int = 0) -> Path:
        return self.logs / f"train-{self.model_name(rm, seed)}.log"

    def goal_state(self, rm: str, seed: int = 0, method: str = "mean_last") -> Path:
        name = "goal_state.npy" if method == "mean_last" else f"goal_state_{method}.npy"
        return self.representations / self.model_name(rm, seed) / name

    @property
    def eval_root(self) -> Path:
        """``eval-rm --save_dir``: it writes each RM under the name of its model folder."""
        return self.root / "eval"

    def eval(self, rm: str, seed: int = 0) -> Path:
        return self.eval_root / self.model_name(rm, seed)

    def scored(self, rm: str, bench: str, split: str, seed: int = 0) -> Path:
        return scored_path(self.eval(rm, seed), bench, split)

    # --- decoding (05) -----------------------------------------------------------------------

    @property
    def decoding(self) -> Path:
        return self.root / "decoding"

    @property
    def steering_policy(self) -> Path:
        """The style-SFT copy of the policy the steering study decodes with."""
        return self.decoding / "steer_policy"

    # --- bookkeeping of the report runner and the sweeps --------------------------------------

    def stage_record(self, stage: str) -> Path:
        """What stage ``stage`` (``01_data`` …) last succeeded with, written by the report runner."""
        return self.root / "stages" / f"{stage}.json"

    @property
    def rm_store(self) -> Path:
        """Trained RMs by training-config hash, shared by every sweep over this run (see
        `goalrm_core.study.training.train_rms`)."""
        return self.root / "rm-store"


def rm_name(reward_model_path: str | os.PathLike) -> str:
    """The name ``eval-rm`` files an RM's scores under: its folder's last component (as the official
    eval_rm.py does), so two RMs scored into one ``--save_dir`` never overwrite each other.

    >>> rm_name("ckpt/contrastive_reward_model/")
    'contrastive_reward_model'
    """
    path = Path(reward_model_path)
    name = path.name if path.name not in ("", ".", "..") else path.resolve().name
    return safe_path_part(name, f"the RM name (the last folder of {reward_model_path})")


def _beside(save_path: str | os.PathLike, suffix: str) -> Path:
    save = Path(str(save_path).rstrip("/") or ".")
    return save.parent / f"{save.name}{suffix}"


def rm_metrics_path(save_path: str | os.PathLike) -> Path:
    """Where a training run writes its metrics rows unless ``--metrics_path`` says otherwise: beside
    the RM's folder, which a save replaces whole.

    >>> rm_metrics_path("runs/demo/models/baseline-seed0/").as_posix()
    'runs/demo/models/baseline-seed0.metrics.jsonl'
    """
    return _beside(save_path, ".metrics.jsonl")


def rm_checkpoint_dir(save_path: str | os.PathLike) -> Path:
    """Where a training run writes its checkpoints unless ``--ckpt_path`` says otherwise (beside the RM's folder)."""
    return _beside(save_path, ".checkpoints")


def train_summary_path(save_path: str | os.PathLike) -> Path:
    """The summary the trainer writes into the RM's folder (steps, held-out accuracy, reward statistics)."""
    return Path(save_path) / TRAIN_SUMMARY


def scored_path(eval_dir: str | os.PathLike, bench: str, split: str) -> Path:
    """Where ``eval-rm`` writes one benchmark's scored split of one RM (``<save_dir>/<rm_name>``)."""
    if split not in SCORED_SPLITS:
        raise ValueError(f"split must be one of {SCORED_SPLITS}, got {split!r}")
    return Path(eval_dir) / bench / split / SCORED_FILE


def eval_settings_path(eval_dir: str | os.PathLike) -> Path:
    """Where ``eval-rm`` records what it ran with, beside one RM's scores (``<save_dir>/<rm_name>``)."""
    return Path(eval_dir) / EVAL_SETTINGS
