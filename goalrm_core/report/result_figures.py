"""The result sections of a report's ``index.html`` that are figures and tables: Q along the incorrect
solutions around the first error (a line per seed), and the seed-0 detail: AUROC per benchmark for
every scorer, goal-conditioned − baseline with Holm over its benchmarks, what Q saves (Q-filtered
voting, online pruning), the decoding comparison at matched budgets, and steering. Figures are
embedded PNGs; a section is empty when the metrics it needs are absent.
"""

from __future__ import annotations

from collections.abc import Mapping

from goalrm_core.evaluation import verdicts
from goalrm_core.evaluation.auroc import delta_of
from goalrm_core.evaluation.tables import REFERENCE_SCORERS
from goalrm_core.report.metrics_view import Metrics, detail_seed, entries, mapping, section, value
from goalrm_core.report.page_parts import html_table, png
from goalrm_core.report.templating import part
from goalrm_core.study import formatting as fmt
from goalrm_core.study import plots
from goalrm_core.study.rms import HEADLINE_SETS, ID_BENCH, RMS

BUDGET_TOLERANCE = 0.10  # token budgets further apart than this are named as a mismatch


def auroc_figure(metrics: Mapping) -> str:
    """Every scorer's AUROC on every benchmark as bars with their intervals (an undefined bound drawn at
    the value); the scorers whose AUROC is undefined are named below the figure instead."""
    import pandas as pd

    m = Metrics(metrics)
    rows, missing = [], []
    for scorer in [*RMS, *REFERENCE_SCORERS]:
        for bench in m.benchmarks:
            a = m.auroc(scorer, bench)
            if not fmt.is_undefined(a.value):
                rows.append(
                    {
                        "scorer": scorer,
                        "benchmark": bench,
                        "auroc": a.value,
                        "ci_low": a.value if fmt.is_undefined(a.low) else a.low,
                        "ci_high": a.value if fmt.is_undefined(a.high) else a.high,
                    }
                )
            elif mapping(m.evaluation, scorer, bench) is not None:
                missing.append(f"{scorer} on {bench}" + (f" ({a.reason})" if a.reason else ""))
    undefined = part("auroc_undefined", missing="; ".join(missing)) if missing else ""
    if not rows:
        return undefined
    frame = pd.DataFrame(rows)
    which = HEADLINE_SETS.get(m.evaluation.get("headline"), "headline generations")
    return (
        part("auroc_caption", which=which, seed=detail_seed(metrics))
        + png(plots.auroc_bars(frame, title="AUROC per benchmark (95% CI)"))
        + undefined
    )


def delta_table(metrics: Mapping) -> str:
    import pandas as pd

    m = Metrics(metrics)
    deltas = entries(m.evaluation, "delta_auroc")
    order = fmt.order_benchmarks(deltas)
    if not order:
        return ""
    from goalrm_core.evaluation.stats import holm

    raw = [deltas[b].get("p_value") for b in order]
    adjusted = holm([float("nan") if fmt.is_undefined(p) else float(p) for p in raw])
    k = sum(not fmt.is_undefined(p) for p in raw)
    rows = [
        {
            "benchmark": b,
            "baseline": m.auroc("baseline", b).text(),
            "goal-conditioned": m.auroc("goal-conditioned", b).text(),
            "Δ AUROC [95% CI]": fmt.signed_ci(
                delta_of(d), d.get("ci_low"), d.get("ci_high"), reason=fmt.reason_of(d, "delta")
            ),
            "p-value": fmt.p_value(p, reason=fmt.reason_of(d, "p_value")),
            f"p-value, Holm over {k}": fmt.p_value(p_holm),
        }
        for b, p, p_holm in zip(order, raw, adjusted)
        for d in [deltas[b]]
    ]
    low = [(b, p, q) for b, p, q in zip(order, raw, adjusted) if not fmt.is_undefined(p) and p < 0.05]
    if low:
        note = (
            "Uncorrected p below 0.05 on "
            + ", ".join(f"{b} (p = {fmt.p_value(p)}, Holm {fmt.p_value(q)})" for b, p, q in low)
            + f": one of {k} comparisons on one seed, so "
            + (
                "it does not survive the correction."
                if all(q >= 0.05 for _, _, q in low)
                else "read the Holm-corrected value."
            )
        )
    else:
        note = f"No uncorrected p below 0.05 among the {k} comparisons."
    return part("delta_caption", seed=detail_seed(metrics), k=k, note=note) + html_table(pd.DataFrame(rows))


def first_error_section(metrics: Mapping) -> str:
    """Q along the incorrect solutions around their first error, a line per RM seed
    (``evaluation.first_error_profile``, notebook 04); where the run did not record it, what is
    missing and each seed's Δ Q instead."""
    profile = mapping(metrics, "evaluation", "first_error_profile")
    primary = Metrics(metrics).primary
    deltas = {rm: s.get("per_seed") for rm, s in entries(primary, "first_error_did").items()}
    seeds = primary.get("rm_seeds") if isinstance(primary.get("rm_seeds"), list) else []

    def seed(s) -> str:
        return f"seed {fmt.undefined() if fmt.count(s) is None else fmt.count(s)}"

    per_seed = "; ".join(
        f"{rm}: "
        + ", ".join(f"{seed(s)} {fmt.num(v, 2, signed=True)}" for s, v in zip(seeds or range(len(vals)), vals))
        for rm, vals in deltas.items()
        if isinstance(vals, list)
    )
    if profile is not None and not plots.first_error_profile_frame(profile).empty:
        bench, window = profile.get("benchmark", ID_BENCH), profile.get("window", "")
        title = f"Q around the first error (0 = first wrong token), {bench}, every RM seed"
        return part("first_error_caption", bench=str(bench), window=window, per_seed=per_seed) + png(
            plots.first_error_profiles(profile, title=title)
        )
    if not deltas:
        return ""
    return part("first_error_missing", per_seed=per_seed)


def savings_text(metrics: Mapping) -> str:
    """The savings in numbers, the detail seed's goal-conditioned RM
    (:func:`~goalrm_core.report.metrics_view.detail_seed`), one row per benchmark in two tables:
    Q-filtered voting (tokens saved, majority-vote accuracy before and after with Wilson intervals
    over the questions) and online pruning (its threshold, "no pruning" where tuning chose it, tokens
    saved, accuracy, wall time); then where pruning was off and what it cost in wall time."""
    import pandas as pd

    m = Metrics(metrics)
    filtered, pruned, off, slower = [], [], [], []
    for bench in m.benchmarks:
        f = mapping(m.evaluation, "goal-conditioned", bench, "filter")
        if f is not None:
            n_votes = value(metrics, "data", "benchmarks", bench, "n_questions")
            filtered.append(
                {
                    "benchmark": bench,
                    "Q threshold": fmt.num(f.get("threshold")),
                    "tokens saved": fmt.pct(f.get("tokens_saved_pct"), already_percent=True),
                    "accuracy, all samples [95% CI]": fmt.rate_ci(f.get("accuracy_unfiltered"), n_votes),
                    "accuracy, filtered [95% CI]": fmt.rate_ci(f.get("accuracy"), n_votes),
                }
            )
        p = mapping(m.decoding, "pruning", bench)
        if p is not None:
            n_decoded = p.get("n_questions") or m.parameter("decode_questions")
            threshold = p.get("threshold")
            is_off = not fmt.is_undefined(threshold) and threshold <= -1
            if is_off:
                off.append(bench)
            row = {
                "benchmark": bench,
                "Q threshold": "no pruning (≤ −1)" if is_off else fmt.num(threshold),
                "tokens saved": fmt.pct(p.get("tokens_saved_pct"), already_percent=True),
                "accuracy, unpruned [95% CI]": fmt.rate_ci(p.get("accuracy_unpruned"), n_decoded),
                "accuracy, pruned [95% CI]": fmt.rate_ci(p.get("accuracy"), n_decoded),
            }
            wall = section(metrics, "timings", "decoding", "pruning", bench)
            if not fmt.is_undefined(wall.get("wall_s"), wall.get("wall_s_unpruned")):
                before, after = f"{wall['wall_s_unpruned']:.2f} s", f"{wall['wall_s']:.2f} s"
                row.update({"wall time, unpruned": before, "wall time, pruned": after})
                if not is_off and wall["wall_s"] > wall["wall_s_unpruned"]:
                    slower.append(f"{bench} {after} against {before}")
            pruned.append(row)
    if not filtered and not pruned:
        return ""
    said = []
    if off:
        said.append(
            f"Tuning on validation questions chose no pruning on {len(off)} of {len(pruned)} benchmarks "
            f"({', '.join(off)}): there no sample is stopped and no RM runs, so the pruned and unpruned runs generate "
            "the same tokens and any wall-time difference is timing noise."
        )
    if slower:
        said.append(
            "Where pruning ran, it took longer than sampling without it (the RM, a second model of the policy's size, "
            "reads every sampled token, and a batch runs until its longest sample stops): " + "; ".join(slower) + "."
        )
    elif len(pruned) > len(off):
        said.append("Where pruning ran, it was not slower than sampling without it.")
    out = part("savings_head", seed=detail_seed(metrics))
    if filtered:
        out += part("savings_filtered") + html_table(pd.DataFrame(filtered))
    if pruned:
        out += part("savings_pruned", said=" ".join(said)) + html_table(pd.DataFrame(pruned))
    return out


NULL_SAVING = 0.01  # a method whose every benchmark saves less than this share of tokens is not drawn


def savings_figure(metrics: Mapping) -> str:
    import pandas as pd

    m = Metrics(metrics)
    rows = []
    for bench in m.benchmarks:
        f = section(m.evaluation, "goal-conditioned", bench, "filter")
        if not fmt.is_undefined(f.get("accuracy"), f.get("accuracy_unfiltered"), f.get("tokens_saved_pct")):
            rows.append(
                {
                    "method": "Q-filtered voting",
                    "benchmark": bench,
                    "tokens": 1.0,
                    "accuracy": f["accuracy_unfiltered"],
                    "end": False,
                }
            )
            rows.append(
                {
                    "method": "Q-filtered voting",
                    "benchmark": bench,
                    "tokens": 1 - f["tokens_saved_pct"] / 100,
                    "accuracy": f["accuracy"],
                    "end": True,
                }
            )
        p = section(m.decoding, "pruning", bench)
        if (
            not fmt.is_undefined(
                p.get("tokens_generated"),
                p.get("tokens_generated_unpruned"),
                p.get("accuracy"),
                p.get("accuracy_unpruned"),
            )
            and p["tokens_generated_unpruned"]
        ):
            rows.append(
                {
                    "method": "online pruning",
                    "benchmark": bench,
                    "tokens": 1.0,
                    "accuracy": p["accuracy_unpruned"],
                    "end": False,
                }
            )
            rows.append(
                {
                    "method": "online pruning",
                    "benchmark": bench,
                    "tokens": p["tokens_generated"] / p["tokens_generated_unpruned"],
                    "accuracy": p["accuracy"],
                    "end": True,
                }
            )
    if not rows:
        return ""
    frame = pd.DataFrame(rows)
    # a method that saved (almost) nothing anywhere is a sentence, not a panel of dots stacked at x = 1
    null = [
        method
        for method, g in frame.groupby("method", sort=False)
        if (g.loc[g["end"], "tokens"] >= 1 - NULL_SAVING).all()
    ]
    said = "".join(
        part("savings_null", method=method[0].upper() + method[1:], share=f"{100 * NULL_SAVING:.0f}") for method in null
    )
    frame = frame[~frame["method"].isin(null)]
    if frame.empty:
        return said + savings_text(metrics)
    return (
        part("savings_caption", seed=detail_seed(metrics))
        + png(plots.savings_panels(frame))
        + said
        + savings_text(metrics)
    )


# decoding methods as notebook 05 names them (metrics.json keeps them as snake_case keys)
METHOD_NAMES = {
    "greedy": "greedy",
    "majority_vote": "majority vote",
    "q_guided_beam_search": "Q-guided beam search",
    "best_of_n_baseline_reward": "best-of-N baseline reward",
    "best_of_n_goal_conditioned_reward": "best-of-N goal-conditioned reward",
    "best_of_n_final_q": "best-of-N final Q",
}


def method_name(key: str) -> str:
    """A decoding method's name for a reader: :data:`METHOD_NAMES`, else the key with spaces."""
    return METHOD_NAMES.get(key, key.replace("_", " "))


def budget_mismatches(methods: Mapping[str, Mapping]) -> list[str]:
    """One sentence per benchmark whose matched-budget methods (all but greedy) generate token counts
    more than 10% apart; greedy is the one-sample reference, outside the budget."""
    out = []
    for bench in fmt.order_benchmarks(methods):
        tokens = {
            name: r["tokens"]
            for name, r in (methods[bench] or {}).items()
            if name != "greedy" and not fmt.is_undefined(value(r, "tokens"))
        }
        if len(tokens) < 2:
            continue
        low, high = min(tokens, key=tokens.get), max(tokens, key=tokens.get)
        if tokens[low] > 0 and tokens[high] > (1 + BUDGET_TOLERANCE) * tokens[low]:
            out.append(
                f"Budget mismatch on {bench}: {method_name(low)} generates {tokens[low]:.0f} tokens per question, "
                f"{method_name(high)} {tokens[high]:.0f} ({100 * (tokens[high] / tokens[low] - 1):.0f}% more), "
                "so the budgets there are not matched within 10%."
            )
    return out


def _decode_questions(metrics: Mapping, row: Mapping) -> int | None:
    """The questions a decoding accuracy is over: the row's own count, else the profile's ``decode_questions``."""
    return fmt.count(row.get("n_questions")) or fmt.count(Metrics(metrics).parameter("decode_questions"))


def decoding_reading(metrics: Mapping, methods: Mapping[str, Mapping]) -> str:
    """What the decoding table shows, from its numbers: Q-guided beam search against greedy decoding
    and against the best other method at its budget, each with whether their Wilson intervals overlap."""
    beam_key, greedy_key = "q_guided_beam_search", "greedy"
    said, level = [], 0
    benches = [b for b in fmt.order_benchmarks(methods) if mapping(methods[b], beam_key) is not None]
    for bench in benches:
        beam, greedy = methods[bench][beam_key], methods[bench].get(greedy_key)
        if not fmt.is_undefined(value(greedy, "accuracy"), beam.get("accuracy")):
            level += greedy["accuracy"] >= beam["accuracy"]

    def tokens(method: str, rows) -> list:
        return [t for t in (value(r, method, "tokens") for r in rows) if not fmt.is_undefined(t)]

    greedy_tokens, beam_tokens = tokens(greedy_key, methods.values()), tokens(beam_key, (methods[b] for b in benches))
    if benches and greedy_tokens and beam_tokens:
        said.append(
            f"Greedy decoding ({min(greedy_tokens):.0f}–{max(greedy_tokens):.0f} tokens per question) is level with or "
            f"above Q-guided beam search ({min(beam_tokens):.0f}–{max(beam_tokens):.0f} tokens) on {level} of "
            f"{len(benches)} benchmarks."
        )
    n = max((_decode_questions(metrics, r) or 0 for m in methods.values() for r in entries(m).values()), default=0)
    if n:
        said.append(
            f"Each accuracy is over {n} questions (one question is {100 / n:.1f} points), so its 95% interval is "
            "wide: a difference between two methods whose intervals overlap is not shown by this run."
        )
    return " ".join(said)


def decoding_table(metrics: Mapping) -> str:
    import pandas as pd

    methods = entries(metrics, "decoding", "methods")
    if not methods:
        return ""
    benches = fmt.order_benchmarks(methods)
    names = list(dict.fromkeys(m for b in benches for m in methods[b]))

    def cell(r: Mapping | None) -> str:
        if r is None:
            return "not run"
        return fmt.accuracy_cell(r.get("accuracy"), _decode_questions(metrics, r), r.get("tokens"), r.get("n"))

    rows = [{"method": method_name(name), **{b: cell(mapping(methods[b], name)) for b in benches}} for name in names]
    mismatch = budget_mismatches(methods)
    return (
        part("decoding_caption", seed=detail_seed(metrics), reading=decoding_reading(metrics, methods))
        + html_table(pd.DataFrame(rows))
        + (part("paragraph", text=" ".join(mismatch)) if mismatch else "")
    )


def steering_section(metrics: Mapping) -> str:
    """Steering toward a style goal, seed 0: one run, so detail, not a conclusion."""
    s = section(metrics, "decoding", "steering")
    if not s:
        return ""
    n = fmt.count(s.get("n_questions"))
    text = (
        f"Q-guided decoding of the steering policy toward a style goal, seed-{detail_seed(metrics)} RM"
        + (f", {n} questions" if n else "")
        + " (95% Wilson intervals): the style appears in "
        f"{fmt.rate_ci(s.get('attribute_rate'), n)} of steered solutions against "
        f"{fmt.rate_ci(s.get('attribute_rate_unguided'), n)} unguided"
    )
    if "attribute_rate_correctness_goal" in s:
        text += (
            f" and {fmt.rate_ci(s.get('attribute_rate_correctness_goal'), n)} when the same search steers toward "
            "the correctness goal"
        )
    text += (
        f"; accuracy {fmt.rate_ci(s.get('accuracy'), n)} steered, {fmt.rate_ci(s.get('accuracy_unguided'), n)} unguided"
    )
    if "accuracy_correctness_goal" in s:
        text += f", {fmt.rate_ci(s.get('accuracy_correctness_goal'), n)} toward the correctness goal"
    text += "."
    if "goal_separation_auroc" in s:
        text += (
            " The style goal's cosine separates styled from plain solutions with AUROC "
            f"{fmt.num(s.get('goal_separation_auroc'))}."
        )
    cost = verdicts.steering_cost(s.get("accuracy"), s.get("accuracy_unguided"))
    text += (f" {cost}" if cost else "") + " One seed and one run: a description, not a finding."
    return part("paragraph", text=text)
