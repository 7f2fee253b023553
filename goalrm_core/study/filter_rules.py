"""Which per-token signal makes a filter that saves tokens without costing votes?

The paper's filter drops a sampled solution at the first token whose Q-value falls below a threshold.
Each rule here is a *signal*, one number per response token (NaN where the rule does not look), fed to
the same filter (``metrics.q_filtered_majority_vote``: drop at the first value below the threshold):

- ``Q``: the Q-value at every token (the paper's rule);
- ``Q at line ends``: Q only where a step ends (the newline, and the EOS after the answer);
- ``Q − token-type baseline``: Q minus the mean Q of that token type on the validation questions'
  correct solutions (token type dominates Q: a digit reads lower than a newline);
- ``Q fall since last line end``: at each line end, Q minus Q at the previous line end;
- ``partial reward``: the value head at every token (a rule, but not a Q-based one);
- ``policy log-prob``: the policy's log-probability of each sampled token (free: no RM runs).

Every rule's threshold is chosen on validation questions (the most questions voted right, then the most
tokens saved) and reported once on the test questions, beside plain majority voting and the *oracle*:
every incorrect solution stopped at its first wrong token, the most any filter can save.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from goalrm_core.data.questions import group_by_question, split_by_question
from goalrm_core.evaluation import metrics, tables
from goalrm_core.evaluation.voting import SKIP_FIRST
from goalrm_core.flags import check_choice
from goalrm_core.study.evaluation import token_types

LINE_ENDS = ("newline", "EOS")
RULES = (
    "Q",
    "Q at line ends",
    "Q − token-type baseline",
    "Q fall since last line end",
    "partial reward",
    "policy log-prob",
)
Q_RULES = RULES[:4]
#: Candidate thresholds per rule: these quantiles of the rule's values on the validation questions,
#: dense at the low end (an error is a rare token: 1 in 100 or fewer).
QUANTILES = np.r_[0.0, np.geomspace(1e-4, 0.3, 40)]


def _line_end_mask(row: dict) -> np.ndarray:
    return np.isin(np.asarray(token_types(row), dtype=object), LINE_ENDS)


def type_baseline(rows: Sequence[dict]) -> dict[str, float]:
    """Mean Q per token type over the correct solutions of ``rows`` (fit on validation questions)."""
    sums: dict[str, list[float]] = {}
    for r in rows:
        if r["is_correct"]:
            for kind, q in zip(token_types(r), r["cosine_sim"]):
                sums.setdefault(kind, []).append(float(q))
    return {kind: float(np.mean(v)) for kind, v in sums.items()}


def signal(rule: str, row: dict, baseline: dict[str, float] | None = None) -> np.ndarray:
    """One rule's per-token signal for one scored generation (NaN where the rule does not look)."""
    check_choice("rule", rule, RULES)
    if rule == "partial reward":
        return np.asarray(row["partial_rewards"], dtype=float)
    if rule == "policy log-prob":
        return np.asarray(row["policy_token_logprobs"], dtype=float)
    q = np.asarray(row["cosine_sim"], dtype=float)
    if rule == "Q":
        return q
    if rule == "Q at line ends":
        return np.where(_line_end_mask(row), q, np.nan)
    if rule == "Q − token-type baseline":
        if baseline is None:
            raise ValueError("the token-type baseline rule needs a baseline fitted on validation questions")
        return q - np.asarray([baseline.get(kind, 0.0) for kind in token_types(row)])
    ends = np.flatnonzero(_line_end_mask(row))  # "Q fall since last line end"
    out = np.full(q.shape, np.nan)
    out[ends[1:]] = q[ends[1:]] - q[ends[:-1]]
    return out


def with_signal(rows: Sequence[dict], values: Callable[[dict], np.ndarray]) -> list[list[dict]]:
    """Questions of generations whose ``cosine_sim`` is the rule's signal (what the filter reads): one value
    per response token, so a row scored without a goal state (a step-verifier arm's) is read the same way."""

    def one(r: dict) -> dict:
        v = np.asarray(values(r))
        return {**r, "cosine_sim": v.tolist(), "num_actions": len(v)}

    return list(group_by_question(one(r) for r in rows).values())


def oracle_signal(row: dict) -> np.ndarray:
    """+1 before the first error, -1 from it on: at threshold 0 the filter stops every incorrect
    solution exactly at its first wrong token, and no correct one."""
    q = np.ones(int(row["num_actions"]))
    err = tables.first_error_token(row)
    if err is not None and not row["is_correct"]:
        q[err:] = -1.0
    return q


def candidate_thresholds(questions: list[list[dict]]) -> np.ndarray:
    """The thresholds a rule is tried at: -inf (drop nothing) and the :data:`QUANTILES` of its signal."""
    values = np.concatenate([np.asarray(g["cosine_sim"], dtype=float) for q in questions for g in q])
    values = values[np.isfinite(values)]
    if values.size == 0:
        return np.asarray([-math.inf])
    return np.unique(np.r_[-math.inf, np.quantile(values, QUANTILES)])


def votes_at(test: list[list[dict]], thresholds: Sequence[float], skip_first: int) -> list[metrics.FilterResult]:
    """The filter's vote on ``test`` at each threshold (-inf, a rule that drops nothing: a threshold below any
    value)."""
    return metrics.q_filtered_majority_votes(
        test, [t if math.isfinite(t) else -1e300 for t in thresholds], skip_first=skip_first
    )


def _report(
    test: list[list[dict]], threshold: float, res: metrics.FilterResult, skip_first: int, seed: int, n_boot: int
) -> dict:
    """The outcome of ``threshold`` on ``test``, given its vote ``res`` there, with bootstrap intervals."""
    if not math.isfinite(threshold):  # the rule chose to drop nothing
        low = high = 0.0
    else:
        low, high = metrics.tokens_saved_interval(
            test, threshold=threshold, skip_first=skip_first, n_boot=n_boot, seed=seed
        )
    diff = res.question_correct.astype(float) - res.question_correct_unfiltered.astype(float)
    picks = np.random.default_rng(seed).integers(0, diff.size, size=(n_boot, diff.size))
    d_low, d_high = np.quantile(diff[picks].mean(axis=1), [0.025, 0.975])
    return {
        "threshold": threshold,
        "accuracy": res.accuracy,
        "accuracy_unfiltered": res.accuracy_unfiltered,
        "accuracy_change": float(diff.mean()),
        "accuracy_change_ci_low": float(d_low),
        "accuracy_change_ci_high": float(d_high),
        "tokens_saved_pct": res.tokens_saved_pct,
        "tokens_saved_ci_low": low,
        "tokens_saved_ci_high": high,
        "generations_filtered_pct": res.generations_filtered_pct,
        "n_questions": res.n_questions,
    }


def rule_table(
    rows: Sequence[dict],
    rules: Sequence[str] = RULES,
    skip_first: int = SKIP_FIRST,
    val_fraction: float = 0.3,
    seed: int = 0,
    n_boot: int = 1000,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each rule's threshold chosen on validation questions and its outcome on the test questions
    (accuracy change with a paired bootstrap CI, tokens saved with a CI, the share of the oracle's
    saving), beside the oracle; and every candidate threshold's outcome on the test questions (the
    frontier). ``rows``: every scored sample of one benchmark (all samples per question)."""
    test_rows, val_rows = split_by_question(list(rows), val_fraction, seed)
    if not test_rows or not val_rows:
        raise ValueError("the rule comparison needs both validation and test questions")
    oracle_test = with_signal(test_rows, oracle_signal)
    oracle = _report(oracle_test, 0.0, votes_at(oracle_test, [0.0], 0)[0], 0, seed, n_boot)
    baseline = type_baseline(val_rows)
    chosen, frontier = [], []
    for rule in rules:
        if rule == "policy log-prob" and "policy_token_logprobs" not in rows[0]:
            continue
        val = with_signal(val_rows, lambda r, rule=rule: signal(rule, r, baseline))
        test = with_signal(test_rows, lambda r, rule=rule: signal(rule, r, baseline))
        candidates = candidate_thresholds(val)
        threshold, _ = metrics.choose_filter_threshold(val, candidates=candidates, skip_first=skip_first)
        votes = votes_at(
            test, candidates, skip_first
        )  # every candidate's test outcome: the frontier, and the chosen one's report
        out = _report(test, threshold, votes[int(np.flatnonzero(candidates == threshold)[0])], skip_first, seed, n_boot)
        chosen.append(
            {
                "rule": rule,
                "q_based": rule in Q_RULES,
                **out,
                "share_of_oracle": out["tokens_saved_pct"] / oracle["tokens_saved_pct"]
                if oracle["tokens_saved_pct"]
                else math.nan,
            }
        )
        for t, res in zip(candidates, votes):
            frontier.append(
                {
                    "rule": rule,
                    "threshold": t,
                    "accuracy": res.accuracy,
                    "tokens_saved_pct": res.tokens_saved_pct,
                    "chosen": t == threshold,
                }
            )
    chosen.append({"rule": "oracle (first error)", "q_based": False, **oracle, "share_of_oracle": 1.0})
    return pd.DataFrame(chosen), pd.DataFrame(frontier)


def policy_token_ids(tokenizer, prompt: str, solution: str) -> tuple[list[int], int]:
    """(the ids of prompt + solution + EOS as the policy generated them, how many of them are the solution's and
    its EOS): prompt and solution tokenised apart, no special token added."""
    p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    r = tokenizer(solution, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return p + r, len(r)


@torch.no_grad()
def policy_token_logprobs(
    model, tokenizer, prompts: Sequence[str], solutions: Sequence[str], batch_size: int = 64
) -> list[list[float]]:
    """The policy's log-probability (temperature 1) of each token of each solution and of the EOS
    that ends it, as the policy generated them. The list lines up with the RM's per-token values
    under the ``split``/``eos`` reading (the solution, then ``" "`` and EOS): the ``" "`` the RM reads
    before its EOS is no token of the policy's, and gets NaN (no rule looks there)."""
    out = []
    for start in range(0, len(prompts), batch_size):
        ids, n_resp = [], []
        for prompt, solution in zip(prompts[start : start + batch_size], solutions[start : start + batch_size]):
            text, n = policy_token_ids(tokenizer, prompt, solution)
            ids.append(text)
            n_resp.append(n)
        width = max(len(x) for x in ids)
        batch = torch.full((len(ids), width), tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(batch)
        for i, x in enumerate(ids):
            batch[i, width - len(x) :] = torch.tensor(x)
            mask[i, width - len(x) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        logits = model(input_ids=batch, attention_mask=mask, position_ids=positions).logits.float()
        logp = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, batch[:, 1:, None]).squeeze(-1)
        for i, n in enumerate(n_resp):
            values = logp[i, width - 1 - n :].tolist()
            out.append(values[:-1] + [math.nan] + values[-1:])
    return out


def with_policy_logprobs(run_dir, rows: Sequence[dict], batch_size: int = 64) -> list[dict]:
    """``rows`` with ``policy_token_logprobs``: the run's policy log-prob of every response token."""
    from goalrm_core.model.templates import apply_template
    from goalrm_core.tasks.toymath.pipeline import TEMPLATE, load_policy

    model, tokenizer = load_policy(run_dir)
    logps = policy_token_logprobs(
        model,
        tokenizer,
        [apply_template(TEMPLATE, r["question"]) for r in rows],
        [r["generated_solution"] for r in rows],
        batch_size,
    )
    return [{**r, "policy_token_logprobs": lp} for r, lp in zip(rows, logps)]


def rules_over_seeds(
    run_dir,
    rm: str,
    rm_seeds: Sequence[int],
    benches: Sequence[str],
    skip_first: int = SKIP_FIRST,
    val_fraction: float = 0.3,
    seed: int = 0,
    n_boot: int = 1000,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`rule_table` for every benchmark and RM seed (the samples each seed's RM scored, the
    same validation/test split of questions for all): one row per (benchmark, seed, rule), and the
    frontier of every candidate threshold."""
    from goalrm_core.data.rundir import RunDir

    run = RunDir(run_dir)
    rows_out, frontiers = [], []
    for bench in benches:
        logps = None
        for rm_seed in rm_seeds:
            rows = tables.read_scored(run.eval(rm, rm_seed), bench, "all")
            if logps is None:  # the same generations for every seed: one policy pass per benchmark
                logps = [r["policy_token_logprobs"] for r in with_policy_logprobs(run_dir, rows)]
            rows = [{**r, "policy_token_logprobs": lp} for r, lp in zip(rows, logps)]
            chosen, frontier = rule_table(
                rows, skip_first=skip_first, val_fraction=val_fraction, seed=seed, n_boot=n_boot
            )
            rows_out.append(chosen.assign(benchmark=bench, rm_seed=rm_seed))
            frontiers.append(frontier.assign(benchmark=bench, rm_seed=rm_seed))
    return pd.concat(rows_out, ignore_index=True), pd.concat(frontiers, ignore_index=True)


#: The target of a Q-based rule, on every benchmark: this share of the oracle's saving ...
TARGET_SHARE = 0.6
#: ... at an accuracy change no worse than this (points of majority-vote accuracy, as a fraction)
TARGET_ACCURACY_COST = 0.01


def pooled(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Per benchmark and rule: the mean over RM seeds of the test-question outcome (accuracy change,
    tokens saved, share of the oracle) with a 95% t-interval, and whether the rule meets the target
    (mean share >= TARGET_SHARE and mean accuracy change >= -TARGET_ACCURACY_COST)."""
    out = []
    for (bench, rule), g in per_seed.groupby(["benchmark", "rule"], sort=False):
        row = {"benchmark": bench, "rule": rule, "q_based": bool(g["q_based"].iloc[0]), "n_seeds": len(g)}
        for key in ("accuracy_change", "tokens_saved_pct", "share_of_oracle"):
            mean, low, high = metrics.mean_ci(g[key].to_numpy(dtype=float))
            row.update({key: mean, f"{key}_ci_low": low, f"{key}_ci_high": high})
        row["meets_target"] = (
            bool(row["share_of_oracle"] >= TARGET_SHARE and row["accuracy_change"] >= -TARGET_ACCURACY_COST)
            if rule != "oracle (first error)"
            else None
        )
        out.append(row)
    return pd.DataFrame(out)


def rules_metrics(pooled_rules: pd.DataFrame) -> dict:
    """The ``filter_rules`` section of metrics.json: ``{bench: {rule: pooled outcome}}``."""
    out: dict = {}
    for rec in pooled_rules.to_dict("records"):
        out.setdefault(rec.pop("benchmark"), {})[rec.pop("rule")] = rec
    return out
