"""``goalrm metrics``: the official ``metrics.py`` printout of scored generations: AUROC with CIs,
partial AUROC and Q-filtered majority voting (:mod:`goalrm_core.evaluation.tables`). With
``--official``, exactly the official printout, computed as the official code computes it
(:mod:`goalrm_core.evaluation.official_metrics`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from goalrm_core.choices import OFFICIAL_DATASET_LEN
from goalrm_core.evaluation.auroc import DEFAULT_PERCENTILES
from goalrm_core.evaluation.voting import SKIP_FIRST
from goalrm_core.flags import Range, finite_float, non_negative_int, path_part, positive_int


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="goalrm metrics", description="Print the metrics of scored generations.")
    p.add_argument(
        "--model_name",
        required=True,
        type=path_part,
        help="Label of the RM (also a sub-folder of --eval_results_dir if it exists).",
    )
    p.add_argument(
        "--eval_results_dir",
        required=True,
        help="--save_dir of goalrm eval-rm: <dir>/<model_name>/<bench>/{greedy,all}/*.jsonl (as the official "
        "metrics.py reads).",
    )
    p.add_argument(
        "--filter_threshold", type=finite_float, default=0.0, help="Q-value threshold of the filtered majority vote."
    )
    p.add_argument("--benchmarks", nargs="+", required=True, type=path_part, help="Benchmarks to report.")
    p.add_argument(
        "--percentiles",
        nargs="*",
        type=Range(float, "[0, 1]"),
        default=list(DEFAULT_PERCENTILES),
        help="Response percentiles of the partial AUROC (fractions of the response).",
    )
    p.add_argument("--vanilla", action="store_true", help="Baseline RM: no Q-values, so no filtering.")
    p.add_argument("--n_boot", type=positive_int, default=1000, help="Bootstrap resamples for the CIs.")
    p.add_argument("--skip_first", type=non_negative_int, default=SKIP_FIRST, help="Response tokens never filtered.")
    p.add_argument(
        "--official",
        action="store_true",
        help="Print what the official metrics.py prints, computed as it does: voting for gsm8k and math only, over the "
        "greedy output plus the samples, questions grouped by position; no CIs.",
    )
    p.add_argument(
        "--dataset_len",
        type=non_negative_int,
        default=0,
        help="With --official: the number of questions of gsm8k and math (0 = the official code's: "
        + ", ".join(f"{k} {v}" for k, v in OFFICIAL_DATASET_LEN.items())
        + ").",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # the tables (pandas, scipy, scikit-learn) load once the flags parse
    from goalrm_core.data.questions import group_by_question
    from goalrm_core.evaluation import metrics
    from goalrm_core.evaluation.official_metrics import official_printout
    from goalrm_core.evaluation.tables import (
        check_scored_folder,
        fmt_ci,
        fmt_p,
        labels,
        partial_auroc_table,
        read_scored,
        scored_files,
    )

    root = Path(args.eval_results_dir)
    if (root / args.model_name).is_dir():
        root = root / args.model_name
    # read (and so validate) every benchmark's files before printing anything: a bad name or file
    # fails at once, not after the earlier benchmarks' results have scrolled by
    made = check_scored_folder(root)
    if args.official:
        for line in official_printout(
            root,
            args.model_name,
            args.benchmarks,
            made,
            args.filter_threshold,
            args.percentiles,
            args.vanilla,
            args.dataset_len,
            args.skip_first,
        ):
            print(line)
        return 0
    scored = {bench: read_scored(root, bench, "greedy", made) for bench in args.benchmarks}
    sampled = {
        bench: read_scored(root, bench, "all", made)
        for bench in args.benchmarks
        if not args.vanilla and scored_files(root, bench, "all")
    }
    for bench in args.benchmarks:
        greedy = scored[bench]
        res = metrics.bootstrap_auroc([r["reward"] for r in greedy], labels(greedy), n_boot=args.n_boot)
        print(
            f"[{args.model_name}] {bench}: greedy n={res.n} AUROC {fmt_ci(res.auroc, res.ci_low, res.ci_high)}"
            + (f" ({res.undefined_reason})" if res.undefined_reason else "")
        )
        partial = partial_auroc_table(greedy, args.percentiles, n_boot=min(args.n_boot, 500))
        for _, row in partial.iterrows():
            print(
                f"  partial AUROC {row['signal']:<14} @{row['percentile']:.1f}: "
                f"{fmt_ci(row['auroc'], row['ci_low'], row['ci_high'])}"
            )
        if bench in sampled:
            rows = sampled[bench]
            questions = list(group_by_question(rows).values())
            o = metrics.official_filter_figures(questions, args.filter_threshold, args.skip_first)
            print(
                f"  filtered voting @{args.filter_threshold:g} (the official figures): accuracy {o.accuracy:.4f}; "
                f"generations filtered {o.generations_filtered_mean:.3f} per question ({o.generations_filtered_total} "
                f"in all); tokens saved {o.tokens_saved_mean:.1f} per question ({o.tokens_saved_total} of "
                f"{o.tokens_total}); proportion correct {o.proportion_correct_filtered_mean:.4f} filtered vs "
                f"{o.proportion_correct_mean:.4f}; ttest_ind p={fmt_p(o.p_value)}"
            )
            f = metrics.q_filtered_majority_vote(questions, args.filter_threshold, args.skip_first)
            print(
                f"  filtered voting @{args.filter_threshold:g} (goalrm: answerless votes ignored, Wilson CIs, paired "
                f"t-test): accuracy {fmt_ci(f.accuracy, f.accuracy_ci_low, f.accuracy_ci_high)} (unfiltered "
                f"{f.accuracy_unfiltered:.3f}), generations filtered {f.generations_filtered_pct:.1f}%, tokens saved "
                f"{f.tokens_saved_pct:.1f}%, paired p={fmt_p(f.p_value, f.p_value_reason)}"
            )
    return 0
