"""Render the committed calibration records (``reports/calibration/{policy,rm,verify}.jsonl``, appended by
``calibrate_policy.py`` and ``calibrate_rm.py``) as ``reports/calibration/README.md``: settings ->
result, one table per stage, every run that was made.

    python scripts/calibration_table.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import smoke_margin  # scripts/smoke_margin.py: this folder is first on sys.path when run as a script
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
DIR = ROOT / "reports" / "calibration"

INTRO = """# Calibration of the embedded default (digit-chain ToyMath)

Every calibration run made for the demo profile, as recorded by the scripts (never edited by hand).
Regenerate this page with `python scripts/calibration_table.py`.

- **Policy** (`scripts/calibrate_policy.py`): a tiny char Llama (h128, 4 layers) SFT-trained on
  digit chains; accuracy per benchmark, greedy and sampled. Target: `toy-id` sampled accuracy 40-80%,
  each shifted benchmark 10-60%, at the same temperature.
- **Reward model** (`scripts/calibrate_rm.py`): one recipe, several seeds, each seed's RM scored on
  the same headline set (one sampled solution per `toy-id` question). Target, as means over 3 seeds:
  AUROC >= 0.80, AUROC >= length-only + 0.15, held-out pairwise accuracy >= 0.75.
"""


def markdown(df: pd.DataFrame, index: bool = True) -> str:
    """A GitHub markdown table (no extra dependency)."""
    if index:
        df = df.reset_index()
    cells = [[str(c) for c in df.columns]] + [[str(v) for v in row] for row in df.itertuples(index=False)]
    lines = ["| " + " | ".join(r) + " |" for r in cells]
    lines.insert(1, "|" + "|".join("---" for _ in df.columns) + "|")
    return "\n".join(lines)


# The fields each table reads from every row (a row missing one would be dropped by a groupby, or become NaN in a
# mean, or stop the page with a KeyError that names neither file nor line): checked by _read, named by file and line.
# confident.jsonl holds two kinds of row: its policy rows (kind: policy) need POLICY_OF_CONFIDENT instead.
RM_FIELDS = (
    "name",
    "strategy",
    "run_dir",
    "seed",
    "recipe",
    "auroc",
    "auroc_ci",
    "eval_accuracy",
    "length_auroc",
    "logprob_auroc",
    "train_s",
)
REQUIRED = {
    "policy.jsonl": ("name", "policy_steps", "decoding", "benchmark", "accuracy"),
    "rm.jsonl": RM_FIELDS,
    "verify.jsonl": (
        "name",
        "strategy",
        "run_dir",
        "seed",
        "recipe",
        "data",
        "eval_accuracy",
        "auroc",
        "auroc_well_formed",
        "auroc_well_formed_ci",
        "length_auroc_well_formed",
        "logprob_auroc_well_formed",
        "n_incorrect_well_formed",
        "train_s",
    ),
    "filter-rules.jsonl": (
        "name",
        "run_dir",
        "rm",
        "rm_seed",
        "benchmark",
        "rule",
        "q_based",
        "share_of_oracle",
        "accuracy_change",
    ),
    "confident.jsonl": RM_FIELDS + ("data", "n_eval_rows", "n_incorrect"),
    "step-verifier.jsonl": ("name", "run_dir", "bench", "kind", "verifier", "split_seed"),
    "rollout-labels.jsonl": (
        "name",
        "n_pairs",
        "n_available",
        "subset_seed",
        "k",
        "temperature",
        "same_line",
        "earlier",
        "later",
        "none",
        "n_rollouts",
        "seconds",
        "seconds_per_pair",
        "load_average_1min",
        "exact_file",
        "rollout_file",
    ),
}
POLICY_OF_CONFIDENT = (
    "name",
    "run_dir",
    "task",
    "policy_steps",
    "policy_hidden_size",
    "policy_layers",
    "temperature",
    "n_questions",
    "samples",
    "accuracy",
    "errors_on_mistaught",
    "n_errors",
    "share_errors_well_formed",
    "length_auroc",
    "logprob_auroc",
)
# fields that may be null in a row (a figure that is undefined for it); the rest must hold a value
NULLABLE = {"auroc_well_formed", "auroc_well_formed_ci", "length_auroc_well_formed", "logprob_auroc_well_formed"}


def _check_fields(path: Path, number: int, row) -> None:
    if not isinstance(row, dict):
        raise ValueError(f"{path}:{number}: a row must be a JSON object, got {type(row).__name__}")
    needed = REQUIRED.get(path.name, ())
    if path.name == "confident.jsonl" and row.get("kind") == "policy":
        needed = POLICY_OF_CONFIDENT
    for field in needed:
        if field not in row:
            raise ValueError(
                f"{path}:{number}: field {field!r} is missing (every row of {path.name} needs {', '.join(needed)})"
            )
        if row[field] is None and field not in NULLABLE:
            raise ValueError(f"{path}:{number}: field {field!r} is null; this table needs a value there")


def _read(path: Path, check: bool = False) -> pd.DataFrame:
    """A table's rows, indexed by their line number in ``path``; a line that is no JSON, or (``check``) a row
    without a field its table reads (:data:`REQUIRED`), is a ``ValueError`` naming the file, the line and the field."""
    if not path.exists():
        return pd.DataFrame()
    rows, numbers = [], []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{number}: not a JSON row ({e.msg})") from None
        if check:
            _check_fields(path, number, row)
        rows.append(row)
        numbers.append(number)
    return pd.DataFrame(rows, index=numbers)


# An RM calibration row is one seed of a recipe: the rows of one (name, strategy, run_dir) are averaged together,
# so they must have run the same recipe, on the same pairs, task and scoring. These fields say so.
RECIPE_KEY = ("name", "strategy", "run_dir")
RECIPE_IDENTITY = ("recipe", "data", "task", "bench", "headline", "score_set")


def _differences(a, b) -> tuple[str, str]:
    """Two values of one field, shown by what differs (the keys of two mappings that differ)."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = [k for k in dict.fromkeys([*a, *b]) if a.get(k, "-") != b.get(k, "-")]
        return ", ".join(f"{k}={a.get(k, '-')}" for k in keys), ", ".join(f"{k}={b.get(k, '-')}" for k in keys)
    return str(a), str(b)


def recipe_conflict(rows: pd.DataFrame, source, new: dict | None = None) -> str | None:
    """The one line that refuses rows of one recipe (:data:`RECIPE_KEY`) which ran differently
    (:data:`RECIPE_IDENTITY`): two rows of ``rows`` (indexed by line number in ``source``), or, given ``new`` (a row
    about to be appended), a row of ``rows`` against it. None when every recipe's rows agree. A field a row lacks (an
    older row) is not compared."""
    if rows.empty or any(k not in rows for k in RECIPE_KEY):
        return None
    if "kind" in rows:
        rows = rows[rows["kind"].ne("policy")]  # the confident table's policy rows are no RM recipe
    seen: dict[tuple, tuple] = {}
    candidates = [(line, dict(r)) for line, r in rows.iterrows()] + ([("(this run)", new)] if new else [])
    for line, row in candidates:
        key = tuple(str(row.get(k)) for k in RECIPE_KEY)
        present = {
            f: row[f] for f in RECIPE_IDENTITY if f in row and not (isinstance(row[f], float) and np.isnan(row[f]))
        }
        if key not in seen:
            seen[key] = (line, present)
            continue
        first_line, first = seen[key]
        for field in RECIPE_IDENTITY:
            if (
                field in first
                and field in present
                and json.dumps(first[field], sort_keys=True, default=str)
                != json.dumps(present[field], sort_keys=True, default=str)
            ):
                theirs, ours = _differences(first[field], present[field])
                where = f"line {line}" if line != "(this run)" else "this run"
                return (
                    f"{source}: recipe {key[0]!r} ({key[1]}, {key[2]}) "
                    f"was recorded at line {first_line} with {field} {theirs}, "
                    f"but {where} has {field} {ours}; one recipe name is one recipe: give the new one another --name"
                )
    return None


def _temperature(decoding: str) -> float:
    """``"T=1.7"`` -> 1.7 (a decoding that names no temperature sorts last)."""
    try:
        return float(str(decoding).split("=", 1)[1])
    except (IndexError, ValueError):
        return float("inf")


def policy_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "_No policy calibration recorded._\n"
    df = df.assign(setting=lambda d: d["name"] + " (" + d["policy_steps"].astype(str) + " SFT steps)")
    # rows sorted: by SFT steps (most first), then greedy, then the sampling temperatures in rising order
    df = df.assign(_steps=-df["policy_steps"], _t=[-1.0 if d == "greedy" else _temperature(d) for d in df["decoding"]])
    df = df.sort_values(["_steps", "setting", "_t"], kind="stable")
    wide = df.pivot_table(index=["setting", "decoding"], columns="benchmark", values="accuracy", sort=False)
    wide = wide[list(dict.fromkeys(df["benchmark"]))]
    return markdown(wide.map(lambda v: "" if pd.isna(v) else f"{v:.1%}")) + "\n"


def _recipe_diff(recipe: dict, strategy: str) -> str:
    keys = ("max_steps", "learning_rate", "head_learning_rate", "train_batch_size")
    if strategy != "baseline":
        keys += ("contrastive_loss_beta", "sim_samples", "unsim_samples")
    return ", ".join(f"{k}={recipe[k]}" for k in keys if k in recipe)


def rm_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "_No RM calibration recorded._\n"
    rows = []
    for (name, strategy, run_dir), g in df.groupby(["name", "strategy", "run_dir"], sort=False):
        recipe = g.iloc[0]["recipe"]
        auroc, acc, length = g["auroc"].to_numpy(), g["eval_accuracy"].to_numpy(), g["length_auroc"].to_numpy()
        rows.append(
            {
                "recipe": name,
                "rm": strategy,
                "data": Path(run_dir).name,
                "settings": _recipe_diff(recipe, strategy),
                "seeds": len(g),
                "AUROC mean [min, max]": f"{auroc.mean():.3f} [{auroc.min():.3f}, {auroc.max():.3f}]",
                "seed-0 AUROC [95% CI]": (
                    lambda r: f"{r['auroc']:.3f} [{r['auroc_ci'][0]:.3f}, {r['auroc_ci'][1]:.3f}]"
                )(g.sort_values("seed").iloc[0]),
                "length only": f"{length.mean():.3f}",
                "policy log-prob": f"{g['logprob_auroc'].mean():.3f}",
                "held-out pair acc mean [min, max]": f"{acc.mean():.3f} [{acc.min():.3f}, {acc.max():.3f}]",
                "target met": (
                    "yes"
                    if auroc.mean() >= 0.80 and auroc.mean() >= length.mean() + 0.15 and acc.mean() >= 0.75
                    else "no"
                )
                if strategy == "baseline"
                else "(baseline's target)",
                "train s / RM": f"{np.mean(g['train_s']):.0f}",
                "_order": (strategy != "baseline", recipe.get("max_steps", 0), recipe.get("learning_rate", 0.0), name),
            }
        )
    # rows sorted: the baseline's recipes first, then by training steps and learning rate
    table = pd.DataFrame(rows).sort_values("_order", kind="stable").drop(columns="_order")
    return markdown(table, index=False) + "\n"


VERIFY_INTRO = """Can an RM of this task *verify* the arithmetic? The policy's incorrect samples at T = 1.7 are
about half malformed (garbled characters, cut-off text), which a scorer can reject by their shape. Each
recipe below is scored on every sample of every `toy-id` question (clustered by question in the bootstrap),
on all generations and on the correct against the **well-formed** incorrect ones only (every line
`a op b = c`, then `#answer`). Target, as a mean over seeds: well-formed AUROC >= 0.75. The free
references are response length and the policy's own mean log-prob. Recorded by `scripts/calibrate_rm.py
--table reports/calibration/verify.jsonl`; the training pairs (`--data`) are the policy's own, those with a
well-formed rejected side, synthetic one-fact slips of reference solutions (`tasks/toymath/verify_data.py`),
or both; `dense` is the weight of the auxiliary per-token value loss (`--dense_loss_coef`).
"""
VERIFY_TARGET = 0.75


def _spread(values) -> str:
    v = np.asarray([np.nan if x is None else x for x in values], dtype=float)
    return f"{np.nanmean(v):.3f} [{np.nanmin(v):.3f}, {np.nanmax(v):.3f}]" if np.isfinite(v).any() else "undefined"


def verify_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "_No verification calibration recorded._\n"
    rows = []
    for (name, strategy, _run_dir), runs in df.groupby(["name", "strategy", "run_dir"], sort=False):
        # a recipe run again with the same seeds is one result per seed when the repeats agree exactly
        figures = ["eval_accuracy", "auroc", "auroc_well_formed"]
        g = runs.drop_duplicates(["seed", *figures])
        if g["seed"].duplicated().any():
            raise ValueError(
                f"{name}: repeated seeds disagree: "
                f"{g[g['seed'].duplicated(keep=False)][['seed', *figures]].to_dict('records')}"
            )
        recipe, data = g.iloc[0]["recipe"], g.iloc[0]["data"]
        first = g.sort_values("seed").iloc[0]
        wf = np.asarray([np.nan if x is None else x for x in g["auroc_well_formed"]], dtype=float)
        rows.append(
            {
                "recipe": name,
                "rm": strategy,
                "pairs": f"{data['source']} ({data['n_pairs']:,})",
                "steps": recipe.get("max_steps"),
                "lr": recipe.get("learning_rate"),
                "dense": recipe.get("dense_loss_coef", 0.0),
                "seeds": len(g) if len(runs) == len(g) else f"{len(g)} (each run {len(runs) // len(g)}×, identical)",
                "held-out pair acc": _spread(g["eval_accuracy"]),
                "AUROC, all": _spread(g["auroc"]),
                "AUROC, well-formed": _spread(g["auroc_well_formed"]),
                "seed-0 well-formed [95% CI]": (
                    f"{first['auroc_well_formed']:.3f} [{first['auroc_well_formed_ci'][0]:.3f}, "
                    f"{first['auroc_well_formed_ci'][1]:.3f}]"
                )
                if first["auroc_well_formed"] is not None
                else "undefined",
                "length, well-formed": f"{g['length_auroc_well_formed'].mean():.3f}",
                "log-prob, well-formed": f"{g['logprob_auroc_well_formed'].mean():.3f}",
                "well-formed errors": int(first["n_incorrect_well_formed"]),
                "target met": "yes" if np.nanmean(wf) >= VERIFY_TARGET else "no",
                "train s / RM": f"{np.mean(g['train_s']):.0f}",
            }
        )
    return markdown(pd.DataFrame(rows), index=False) + "\n"


RULES_INTRO = """Which per-token signal makes a filter that saves tokens without costing votes? Each rule's threshold
is chosen on the validation questions (30%: the most questions voted right, then the most tokens saved) and
reported on the test questions of every benchmark, once per RM seed; the table gives the mean over seeds with
its 95% t-interval. The oracle stops every incorrect sample at its first wrong token: the most any filter can
save. Target (a Q-based rule, on every benchmark): >= 60% of the oracle's saving at an accuracy change no
worse than -1 point. The oracle stops incorrect samples only: a rule that also stops correct samples the vote
does not need can save more (a share above 1). Recorded by `scripts/filter_rules.py` \
(`goalrm_core/study/filter_rules.py`) into
`filter-rules.jsonl`; each run's toy-id frontier (seed 0) is `filter-frontier-<name>.png`.
"""


def _interval(g: pd.DataFrame, key: str, scale: float = 1.0, digits: int = 1) -> str:
    v = g[key].to_numpy(dtype=float) * scale
    mean = np.nanmean(v)
    if len(v) < 2:
        return f"{mean:+.{digits}f}"
    half = stats.t.ppf(0.975, len(v) - 1) * np.nanstd(v, ddof=1) / np.sqrt(len(v))
    return f"{mean:+.{digits}f} [{mean - half:+.{digits}f}, {mean + half:+.{digits}f}]"


def rules_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "_No filtering-rule run recorded._\n"
    parts = []
    for (name, run_dir, rm), runs in df.groupby(["name", "run_dir", "rm"], sort=False):
        seeds = sorted(runs["rm_seed"].unique())
        rows = []
        for (bench, rule), g in runs.groupby(["benchmark", "rule"], sort=False):
            is_oracle = rule.startswith("oracle")
            share, change = g["share_of_oracle"].mean(), g["accuracy_change"].mean()
            rows.append(
                {
                    "benchmark": bench,
                    "rule": rule,
                    "Q-based": "yes" if g["q_based"].iloc[0] else "no",
                    "accuracy change, points": _interval(g, "accuracy_change", 100.0),
                    "tokens saved, %": _interval(g, "tokens_saved_pct"),
                    "share of the oracle": f"{share:.2f}",
                    "target met": "" if is_oracle else ("yes" if share >= 0.6 and change >= -0.01 else "no"),
                }
            )
        parts.append(
            f"**{name}** ({rm} RM, seeds {', '.join(map(str, seeds))}; `{run_dir}`)\n\n"
            + markdown(pd.DataFrame(rows), index=False)
        )
    return "\n\n".join(parts) + "\n"


CONFIDENT_INTRO = """The paper's regime in the toy (profile `confident`). The policy is taught a
few facts WRONG in every SFT solution (`mistaught_facts`, a fixed draw disjoint from the held-out facts; the
later steps chain from the taught result) and sampled at a normal temperature, so its errors are likely under
its own log-prob. The RMs learn from a second generator, not from the evaluated policy: reference solutions
against the same solution with one step's result changed and carried through (`verify_data.slip_pairs`), and
they are scored on the policy's own `toy-id` generations. Targets: sampled accuracy 40-80%, policy log-prob
AUROC <= 0.70; the baseline RM's AUROC >= log-prob + 0.10 and >= length + 0.15, as means over 3 seeds. Pair
accuracy within a question (held-out slip pairs) and AUROC across questions (the policy's generations) are
both recorded: the first can be good while the second is not. Policy rows: `scripts/calibrate_confident.py`;
RM rows: `scripts/calibrate_rm.py --profile confident --table reports/calibration/confident.jsonl` on a
policy row's run directory (`policy` column). AUROC CIs are 95% bootstrap intervals clustered by question.
"""


def _with_ci(figure: dict) -> str:
    if figure["auroc"] is None:
        return "undefined"
    return f"{figure['auroc']:.3f} [{figure['ci'][0]:.3f}, {figure['ci'][1]:.3f}]"


def confident_policy_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "_No confident-policy calibration recorded._\n"
    rows = []
    for r in df.itertuples():
        logprob = r.logprob_auroc["auroc"]
        rows.append(
            {
                "policy": r.name,
                "mis-taught facts": r.task["mistaught_facts"],
                # the table's rows are of two kinds, so pandas stores these counts as floats: shown as ints
                "SFT steps": int(r.policy_steps)
                if not isinstance(getattr(r, "policy_of", None), str)
                else f"{int(r.policy_steps)} (policy of {r.policy_of})",
                "size": f"h{int(r.policy_hidden_size)}×{int(r.policy_layers)}",
                "T": r.temperature,
                "samples": f"{int(r.n_questions)}×{int(r.samples)}",
                "accuracy": f"{r.accuracy:.1%}",
                "errors on mis-taught facts": f"{int(r.errors_on_mistaught)}/{int(r.n_errors)}",
                "well-formed errors": f"{r.share_errors_well_formed:.0%}",
                "length AUROC [CI]": _with_ci(r.length_auroc),
                "log-prob AUROC [CI]": _with_ci(r.logprob_auroc),
                "targets met": "yes"
                if 0.40 <= r.accuracy <= 0.80 and logprob is not None and logprob <= 0.70
                else "no",
            }
        )
    return markdown(pd.DataFrame(rows), index=False) + "\n"


# The stability target of a confident RM recipe: its toy-id AUROC's SD over >= 6 validation RM seeds.
STABLE_SD, STABLE_MIN_SEEDS = 0.03, 6


def sd_with_upper(values, level: float = 0.8) -> tuple[float, float]:
    """Sample SD (ddof 1) of ``values`` and its one-sided ``level`` upper confidence bound under normality,
    SD * sqrt((n - 1) / chi2_{1 - level}(n - 1)); NaN for both with fewer than 2 values."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if v.size < 2:
        return float("nan"), float("nan")
    sd = float(v.std(ddof=1))
    return sd, sd * float(np.sqrt((v.size - 1) / stats.chi2.ppf(1 - level, v.size - 1)))


def sd_lower(values, level: float = 0.8) -> float:
    """The one-sided ``level`` *lower* confidence bound of the SD, SD * sqrt((n - 1) / chi2_{level}(n - 1)):
    above the stability target, a recipe is unstable with that confidence already, before its sixth seed
    (the first rule of :func:`stop_reason`); NaN with fewer than 2 values."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if v.size < 2:
        return float("nan")
    return float(v.std(ddof=1)) * float(np.sqrt((v.size - 1) / stats.chi2.ppf(level, v.size - 1)))


def _margin(values, reference: float) -> str:
    """Mean of ``values`` - ``reference`` with its 95% t-interval over seeds (one seed: no interval)."""
    v = np.asarray(values, dtype=float) - reference
    if v.size < 2:
        return f"{v.mean():+.3f}"
    half = stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size)
    return f"{v.mean():+.3f} [{v.mean() - half:+.3f}, {v.mean() + half:+.3f}]"


def confident_rm_table(df: pd.DataFrame, benchmark_seeds: dict | None = None) -> str:
    if df.empty:
        return "_No confident-RM calibration recorded._\n"
    rows = []
    for (name, strategy, run_dir), g in df.groupby(["name", "strategy", "run_dir"], sort=False):
        recipe, data = g.iloc[0]["recipe"], g.iloc[0]["data"]
        first = g.sort_values("seed").iloc[0]
        auroc, length, logprob = (
            np.asarray(g[k], dtype=float).mean() for k in ("auroc", "length_auroc", "logprob_auroc")
        )
        met = auroc >= logprob + 0.10 and auroc >= length + 0.15
        extra = ", ".join(
            f"{k}={recipe[k]}"
            for k in ("dense_loss_coef", "preference_loss_coef", "head_learning_rate", "pretrain")
            if k in recipe and (k != "head_learning_rate" or recipe[k])
        )
        rows.append(
            {
                "recipe": name,
                "rm": strategy,
                "policy": Path(run_dir).name,
                "pairs": (
                    f"the run's slips ({data['n_pairs']:,})"
                    if data["source"] == "policy"
                    else f"{Path(data['path']).name} ({data['n_pairs']:,})"
                    if data["source"] == "file"
                    else f"{data['source']} ({data['n_pairs']:,})"
                ),
                "steps": recipe.get("max_steps"),
                "lr": recipe.get("learning_rate"),
                "other": extra,
                "scored on": f"{int(first['n_eval_rows']):,} samples",
                "seeds": len(g),
                "held-out pair acc": _spread(g["eval_accuracy"]),
                "AUROC": _spread(g["auroc"]),
                "seed-0 AUROC [95% CI]": f"{first['auroc']:.3f} "
                f"[{first['auroc_ci'][0]:.3f}, {first['auroc_ci'][1]:.3f}]",
                "length": f"{length:.3f}",
                "log-prob": f"{logprob:.3f}",
                "errors": int(first["n_incorrect"]),
                "AUROC SD (80% upper)": _sd_cell(g["auroc"], length),
                "over length [95% CI]": _margin(g["auroc"], length),
                "over log-prob [95% CI]": _margin(g["auroc"], logprob),
                "questions": (
                    "validation" if (benchmark_seeds or {}).get(Path(run_dir).name, 0) != 0 else "reported (seed 0)"
                ),
                "target met": ("yes" if met else "no")
                + ("" if len(g) >= 3 else " (1 seed)" if len(g) == 1 else f" ({len(g)} seeds)")
                if strategy == "baseline"
                else "(baseline's target)",
                "train s / RM": f"{np.mean(g['train_s']):.0f}",
            }
        )
    return markdown(pd.DataFrame(rows), index=False) + "\n"


#: the margin over length each arm's mean must clear (the design's verification target)
VERIFY_MARGIN = 0.15


def stop_reason(values, length: float | None = None) -> str | None:
    """Why a recipe stops before its sixth seed, or None: an arm's SD is above the target with 80%
    confidence already (``sd_lower``), or every seed of an arm (two at least) falls short of length +
    :data:`VERIFY_MARGIN`, so the arm does not verify on them. The calibration driver asks this after
    each pair of seeds; the table shows it."""
    v = [x for x in values if x is not None and np.isfinite(x)]
    lower = sd_lower(v)
    if len(v) >= 2 and lower > STABLE_SD:
        return f"unstable already (80% lower bound {lower:.3f} > {STABLE_SD})"
    if length is not None and len(v) >= 2 and max(v) < length + VERIFY_MARGIN:
        return f"not verifying (every seed below length + {VERIFY_MARGIN})"
    return None


def _sd_cell(values, length: float | None = None) -> str:
    sd, upper = sd_with_upper(list(values))
    if not np.isfinite(sd):
        return "(1 seed)"
    n = len(values)
    if n < STABLE_MIN_SEEDS:
        stable = stop_reason(list(values), length) or f"< {STABLE_MIN_SEEDS} seeds"
    else:
        stable = "stable" if sd <= STABLE_SD else "unstable"
    return f"{sd:.3f} ({upper:.3f}), {stable}"


def confident_section(df: pd.DataFrame) -> str:
    is_policy = df["kind"].eq("policy") if "kind" in df else pd.Series(False, index=df.index)
    # a policy row's benchmark seed (absent: 0, the reported draw) marks its run's RM rows validation or not
    benchmark_seeds = (
        {
            Path(r["run_dir"]).name: (0 if pd.isna(r.get("benchmark_seed", 0)) else int(r.get("benchmark_seed", 0)))
            for _, r in df[is_policy].iterrows()
        }
        if "run_dir" in df
        else {}
    )
    return (
        "\n## The confident design: the paper's regime\n\n"
        + CONFIDENT_INTRO
        + "\n**Policy** (`toy-id`, sampled)\n\n"
        + confident_policy_table(df[is_policy])
        + "\n**Reward models** (scored on the policy's own `toy-id` samples)\n\n"
        + confident_rm_table(df[~is_policy], benchmark_seeds)
        + (CONFIDENT_PROSE.read_text() if CONFIDENT_PROSE.exists() else "")
    )


STEP_INTRO = """Every sample's first wrong line is known exactly, so each verifier is scored against the truth with
ProcessBench's first-error F1 (`scripts/step_verifier_bench.py`, `goalrm_core.evaluation.step_verifier`): \
it predicts the
first line whose score falls below a threshold (chosen on half the questions, F1 reported on the other half), F1 is the
harmonic mean of the accuracy on erroneous solutions (the predicted line is the first error) and on correct ones.
Beside it, on the same half, two figures that need no threshold: the line AUROC (each line an example, positive
once the solution has gone wrong, scored by minus the line's reading) and the final AUROC (the last line's reading
against the solution's correctness). Per seed, then the mean over seeds with its 95% interval over RM seeds and
questions; a difference against the reference verifier comes with its two-sided verdict and the effect it would
have seen with 80% power (MDE). A process reward model (PRM) arm is read by its partial reward.
"""


#: the bench's figures (``step_bench.METRICS``) as the table names them; rows from before the AUROCs are F1 rows
STEP_METRICS = {
    "f1": "First-error F1",
    "line_auroc": "Line AUROC (a low reading flags an error so far)",
    "final_auroc": "Final AUROC (last line's reading against correctness)",
    "filter_share": "As a filter: tokens saved as a share of the oracle's saving "
    "(threshold chosen on the validation half: "
    "the most questions voted right, or, where the rows say filter_max_drop, the most tokens saved "
    "within that drop of unfiltered voting)",
    "filter_accuracy_change": "As a filter: majority-vote accuracy change at that threshold (a fraction)",
}
STEP_LABELS = {
    "f1": "F1",
    "line_auroc": "AUROC",
    "final_auroc": "AUROC",
    "filter_share": "share",
    "filter_accuracy_change": "change",
}


def step_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "_No step-verifier bench recorded._\n"
    df = df.assign(metric=df["metric"].fillna("f1") if "metric" in df else "f1")
    # one bench run appends its seed rows, then its summaries: a seed row after a summary starts the next run
    df = df.assign(_run=((df["kind"] == "seed") & (df["kind"].shift() == "summary")).cumsum())
    parts = []
    for (name, _), g in df.groupby(["name", "_run"], sort=False):
        seeds = g[g["kind"] == "seed"]
        first = g.iloc[0]
        arms = sorted({v for v in seeds["verifier"] if "PRM" in v})
        with_arms = f"; with {', '.join(arms)}" if arms else ""
        parts.append(
            f"**{name}** (`{Path(first['run_dir']).name}`, {first['bench']}, "
            f"question split seed {first['split_seed']}{with_arms})"
        )
        for metric, title in STEP_METRICS.items():
            summary = g[(g["kind"] == "summary") & (g["metric"] == metric)]
            if summary.empty:
                continue
            label = STEP_LABELS[metric]
            rows = []
            for _, r in summary.iterrows():
                per = seeds[seeds["verifier"] == r["verifier"]]
                sign = "+" if " − " in r["verifier"] else ""  # a difference is signed, a figure is not
                figure = f"{r['mean']:{sign}.3f}" if pd.notna(r.get("mean")) else "undefined"
                ci = (
                    f" [{r['ci_low']:{sign}.3f}, {r['ci_high']:{sign}.3f}]"
                    if pd.notna(r.get("ci_low")) and pd.notna(r.get("ci_high"))
                    else ""
                )
                row = {
                    "verifier": r["verifier"],
                    "seeds": ", ".join(str(s) for s in r["seeds"]),
                    f"{label} per seed": ", ".join(f"{v:.3f}" for v in per[metric]) if len(per) else "(difference)",
                }
                if metric == "f1":
                    row["erroneous / correct acc. per seed"] = (
                        ", ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(per["acc_erroneous"], per["acc_correct"]))
                        if len(per)
                        else ""
                    )
                row[f"{label} [95% CI, seeds and questions]"] = figure + ci
                row["verdict (MDE)"] = (
                    (f"{r['verdict']} ({r['mde']:.3f})" if pd.notna(r.get("mde")) else str(r["verdict"]))
                    if "verdict" in r and pd.notna(r.get("verdict"))
                    else ""
                )
                rows.append(row)
            parts.append(f"{title}\n\n" + markdown(pd.DataFrame(rows), index=False))
    return "\n\n".join(parts) + "\n"


ROLLOUT_INTRO = """A Math-Shepherd-style process label estimates each step from rollouts instead of knowing it: \
from each
line end of a rejected solution, k continuations are sampled from the policy, and the prefix counts as on track
if any of them reaches the right answer; the estimated first error is the first line that is not
(`scripts/rollout_labels.py`, `goalrm_core.tasks.toymath.rollout_labels`). On a fixed subset of the training
pairs, against the exact first wrong line the task knows: the share estimated on the same line, earlier (every
rollout from a correct prefix fails, e.g. the next fact is one the policy was taught wrong), later (the policy
recovers from a wrong line) or not at all. The two pair files (exact and estimated labels, the same pairs) train
the two PRM arms, so label noise is their only difference.
"""


def rollout_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "_No rollout labels recorded._\n"
    rows = [
        {
            "pairs": f"{r['name']}: {int(r['n_pairs']):,} of {int(r['n_available']):,} "
            f"(subset seed {r['subset_seed']})",
            "k": int(r["k"]),
            "T": r["temperature"],
            "same line": f"{r['same_line']:.1%}",
            "earlier": f"{r['earlier']:.1%}",
            "later": f"{r['later']:.1%}",
            "none": f"{r['none']:.1%}",
            "rollouts": f"{int(r['n_rollouts']):,}",
            "seconds (per pair)": f"{r['seconds']:.0f} ({r['seconds_per_pair']:.2f}; "
            f"load {r['load_average_1min']:.1f})",
            "files": f"`{r['exact_file']}`, `{r['rollout_file']}`",
        }
        for _, r in df.iterrows()
    ]
    return markdown(pd.DataFrame(rows), index=False) + "\n"


# Findings written by hand about the recorded rows (the rows themselves are never edited).
CONFIDENT_PROSE = DIR / "confident-findings.md"


def render() -> str:
    for name in ("rm.jsonl", "verify.jsonl", "confident.jsonl"):
        conflict = recipe_conflict(
            _read(DIR / name), DIR / name
        )  # a recipe's seeds are averaged: they must be one recipe's
        if conflict:
            raise ValueError(conflict)
    tables = {name: _read(DIR / name, check=True) for name in REQUIRED}  # every field each table reads, in every row
    policy, rm, verify = tables["policy.jsonl"], tables["rm.jsonl"], tables["verify.jsonl"]
    return (
        INTRO
        + "\n## Policy: accuracy per benchmark\n\n"
        + policy_table(policy)
        + "\n## Reward model: toy-id AUROC on the headline set\n\n"
        + rm_table(rm)
        + "\nTraining times are wall seconds per RM with two trainings side by side on 2 cores, while other work "
        "shared the machine; the demo report's own timings are in its status.json.\n"
        + "\n## Reward models that verify: well-formed errors only\n\n"
        + VERIFY_INTRO
        + "\n"
        + verify_table(verify)
        + "\n## Filtering rules: which signal saves tokens\n\n"
        + RULES_INTRO
        + "\n"
        + rules_table(tables["filter-rules.jsonl"])
        + confident_section(tables["confident.jsonl"])
        + "\n## Step verifiers against exact labels\n\n"
        + STEP_INTRO
        + "\n"
        + step_table(tables["step-verifier.jsonl"])
        + "\n## Rollout-estimated step labels\n\n"
        + ROLLOUT_INTRO
        + "\n"
        + rollout_table(tables["rollout-labels.jsonl"])
    )


def main() -> int:
    out = DIR / "README.md"
    tmp = out.with_suffix(".md.tmp")
    try:
        text = render()
    except ValueError as e:
        print(f"calibration_table.py: error: {e}", file=sys.stderr)
        return 2
    old = out.read_text() if out.exists() else ""
    if smoke_margin.BEGIN in old and smoke_margin.END in old:  # the smoke profile's section is smoke_margin's to write
        kept = smoke_margin.BEGIN + old.split(smoke_margin.BEGIN, 1)[1].split(smoke_margin.END, 1)[0] + smoke_margin.END
        text = smoke_margin.replace_section(text, kept + "\n")
    tmp.write_text(text)
    tmp.replace(out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
