"""The index's result sections and the reader formatting, from a metrics tree alone."""

import re

import pandas as pd

from goalrm_core.evaluation.stats import across_seeds
from goalrm_core.report import frontpage
from goalrm_core.report.index_page import gate_html, render_index
from goalrm_core.study import formatting as fmt
from goalrm_core.study import plots


def metrics_tree(delta_low: float, delta_high: float) -> dict:
    def scorer(a):
        return {b: {"auroc": a, "auroc_ci_low": a - 0.05, "auroc_ci_high": a + 0.05} for b in ("toy-id", "toy-zero")}

    return {
        "data": {"preference": {"n_train": 6783}, "task": {"name": "digit-chain ToyMath"}},
        "training": {rm: {"eval_accuracy": 0.8, "n_seeds": 3, "steps": 400} for rm in RMS},
        "evaluation": {
            "headline": "sample0",
            "baseline": scorer(0.80),
            "goal-conditioned": scorer(0.84),
            "length only": scorer(0.55),
            "policy mean logprob": scorer(0.99),
            "delta_auroc": {
                b: {"delta": (delta_low + delta_high) / 2, "ci_low": delta_low, "ci_high": delta_high, "p_value": 0.01}
                for b in ("toy-id", "toy-zero")
            },
        },
    }


def test_summary_states_the_result_whichever_way_it_falls():
    better = frontpage.summary(metrics_tree(0.01, 0.07))
    assert "6,783 preference pairs" in better and "digit-chain ToyMath" in better and "3 seeds each" in better
    assert better.count(". ") + 1 <= 5  # 3-5 sentences
    assert "better on toy-id, toy-zero" in better and "0.84 [0.79, 0.89]" in better
    assert "ceiling" in better  # the log-prob beats both RMs here, and the page says so
    null = frontpage.summary(metrics_tree(-0.03, 0.05))
    assert "no detectable difference" in null and "better on" not in null
    worse = frontpage.summary(metrics_tree(-0.09, -0.01))
    assert "worse on toy-id, toy-zero" in worse


def test_result_sections_embed_figures_and_tables():
    page = frontpage.result_sections(metrics_tree(0.01, 0.07))
    assert page.count("data:image/png;base64,") == 1  # no filtering metrics: no savings figure
    assert "+0.04 [+0.01, +0.07]" in page and "0.010" in page
    assert frontpage.result_sections({}) == ""  # nothing recorded yet: nothing drawn


def test_reader_table_merges_intervals_and_words_columns():
    df = pd.DataFrame(
        {
            "benchmark": ["toy-id"],
            "mean": [0.031],
            "ci_low": [-0.012],
            "ci_high": [0.074],
            "p_value_two_sided": [0.0004],
            "tokens_saved_pct": [41.25],
            "sample_accuracy": [0.679],
        }
    )
    row = fmt.table(df).iloc[0].to_dict()
    assert row == {
        "benchmark": "toy-id",
        "Δ AUROC [95% CI]": "+0.03 [-0.01, +0.07]",
        "p-value (two-sided)": "< 0.001",
        "tokens saved": "41.2%",
        "sampled accuracy": "67.9%",
    }
    assert fmt.ci(0.5, None, None) == "0.50" and fmt.ci(None, 0.1, 0.2) == "undefined"
    assert fmt.ci(float("nan"), 0.1, 0.2, reason="one class") == "undefined (one class)"
    assert fmt.signed_ci(-0.001, -0.004, 0.002) == "0.00 [0.00, 0.00]"  # never -0.00
    assert fmt.pct(-0.0001) == "0.0%" and fmt.num(-0.0) == "0.00"
    nan_row = (
        fmt.table(
            pd.DataFrame(
                {
                    "mean": [float("nan")],
                    "ci_low": [None],
                    "ci_high": [None],
                    "p_value": [None],
                    "p_value_reason": ["no question changed"],
                }
            )
        )
        .iloc[0]
        .to_dict()
    )
    assert nan_row == {"Δ AUROC [95% CI]": "undefined", "p-value": "undefined (no question changed)"}


def test_benchmarks_in_one_report_order():
    page = frontpage.result_sections(
        metrics_tree(0.01, 0.07)
        | {
            "decoding": {
                "methods": {
                    b: {"greedy": {"accuracy": 1.0, "tokens": 20.0, "n": 1}}
                    for b in ("toy-unseen", "toy-times", "toy-zero", "toy-id")
                }
            }
        }
    )
    table = page[page.index("Decoding at matched budgets") :]
    assert [table.index(f"<th>{b}</th>") for b in ("toy-id", "toy-zero", "toy-times", "toy-unseen")] == sorted(
        table.index(f"<th>{b}</th>") for b in ("toy-id", "toy-zero", "toy-times", "toy-unseen")
    )


# ------------------------------------------------------------------------------ schema 2


RMS = ("baseline", "goal-conditioned")


def schema2_tree() -> dict:
    """A schema-2 metrics tree from hand-chosen per-seed values (5 seeds): what each sentence must say
    is fixed by construction (which side of the null each interval lies, k of n)."""
    tree = metrics_tree(0.01, 0.07)
    tree["training"] = {rm: {"eval_accuracy": 0.8, "n_seeds": 5, "steps": 400} for rm in RMS}
    for b in ("toy-times", "toy-unseen"):
        for scorer in ("baseline", "goal-conditioned", "length only", "policy mean logprob"):
            tree["evaluation"][scorer][b] = dict(tree["evaluation"][scorer]["toy-id"])
        tree["evaluation"]["delta_auroc"][b] = dict(tree["evaluation"]["delta_auroc"]["toy-id"])
    exploratory = {
        "toy-zero": across_seeds([0.05, 0.06, 0.04, 0.05, 0.07]),  # holds
        "toy-times": across_seeds([0.02, -0.03, 0.01, -0.01, 0.02]),  # no detectable difference
        "toy-unseen": across_seeds([0.02, None, None, None, None]),
    }  # cannot be judged
    for d, p in zip(exploratory.values(), (0.003, 0.9, float("nan"))):
        d["p_holm"] = p
    tree["schema_version"] = 2
    tree["evaluation"]["primary"] = {
        "benchmark": "toy-id",
        "rm_seeds": [0, 1, 2, 3, 4],
        "n_seeds": 5,
        "headline": "sample0",
        "gate": {
            "state": "passed",
            "reason": None,
            "margin_over_length": {rm: across_seeds([0.2, 0.25, 0.22, 0.3, 0.27]) for rm in RMS},
        },
        "delta_auroc": across_seeds([0.01, -0.02, 0.03, 0.02, -0.01]),
        "first_error_did": {
            "baseline": across_seeds([0.1, 0.12, 0.08, 0.15, 0.11], expect="less"),  # Q rises
            "goal-conditioned": across_seeds([-0.2, -0.25, -0.3, 0.3, -0.22], expect="less"),
        },
        "filter": {
            rm: {
                "threshold": 0.0,
                "tokens_saved_pct": across_seeds([9.0, 10.0, 11.0, 9.5, 10.5]),
                "accuracy_change": across_seeds([-0.1, -0.12, -0.09, -0.11, -0.1], expect="less"),
            }
            for rm in RMS
        },
    }
    tree["evaluation"]["exploratory"] = {
        "delta_auroc": exploratory,
        "note": "leads, not findings; Holm over 3 benchmarks",
    }
    tree["decoding"] = {
        "threads": 2,
        "methods": {
            "toy-id": {
                "greedy": {"accuracy": 1.0, "tokens": 25.0, "n": 1},
                "majority_vote": {"accuracy": 1.0, "tokens": 207.0, "n": 8},
                "q_guided_beam_search": {"accuracy": 1.0, "tokens": 171.0, "n": 1},
            }
        },
        "steering": {
            "accuracy": 0.06,
            "accuracy_unguided": 0.16,
            "attribute_rate": 0.41,
            "attribute_rate_unguided": 0.09,
            "attribute_rate_correctness_goal": 0.12,
            "accuracy_correctness_goal": 0.84,
            "goal_separation_auroc": 1.0,
            "n_questions": 32,
        },
        "primary": {
            "pruning": {
                "benchmark": "toy-id",
                "rm_seeds": [0, 1, 2, 3, 4],
                "threshold": [-1.0, -0.5, -1.0, -1.0, -0.5],
                "pruning_off": 3,
                "tokens_ratio": across_seeds([1.0, 0.8, 1.0, 1.0, 0.75], null=1, expect="less"),
                "accuracy_change": across_seeds([0.0, -0.03, 0.0, 0.0, -0.02], expect="less"),
            }
        },
    }
    tree["timings"] = {
        "decoding": {
            "pruning_across_seeds": {"wall_ratio": across_seeds([2.0, 1.8, 2.1, 1.9, 2.2], null=1, expect="less")}
        }
    }
    return tree


def _items(page: str) -> list[str]:
    return re.findall(r"<li>(.*?)</li>", page, flags=re.S)


def test_schema2_states_every_primary_finding_across_seeds():
    page = frontpage.result_sections(schema2_tree())
    findings = _items(frontpage.primary_findings(schema2_tree()))
    gate, delta, q_base, q_goal, f_base, f_goal, pruning = findings
    assert "Length gate on toy-id" in gate and "above 0 in 5 of 5 seeds" in gate and "Gate passed" in gate
    assert "Reward comparison on toy-id (primary)" in delta and "positive in 3 of 5 seeds" in delta
    assert "a difference is not shown (an effect of" in delta and "would have been seen with 80% power" in delta
    assert "ranks better" not in delta
    assert delta.endswith(
        "the other 3 benchmarks are 3 exploratory comparisons, Holm-corrected (below)."
    )  # k comparisons
    # the Q result whichever way it falls
    assert "Q of the baseline RM" in q_base and "falls in 0 of 5 seeds" in q_base and "Q rises" in q_base
    assert (
        "reversed: Q rises" in q_base and "not shown" not in q_base
    )  # wholly the other way: reversed, never "not shown"
    assert (
        "falls in 4 of 5 seeds" in q_goal and "not shown that Q falls" in q_goal
    )  # one seed against: the interval spans 0
    assert re.search(r"Δ -?\d\.\d\d \[-?\d\.\d\d, [-+]?\d\.\d\d\]", q_goal)
    assert "threshold 0.00 (baseline Q, toy-id)" in f_base and "more than 0 in 5 of 5 seeds (a saving)" in f_base
    assert "lower in 5 of 5 seeds: the filter costs accuracy" in f_base and " %" in f_base and "points" in f_base
    assert "goal-conditioned Q" in f_goal
    assert (
        "Online pruning" in pruning
        and "below 1 in 2 of 5 seeds" in pruning
        and "a saving is not shown (an effect of" in pruning
    )
    assert "wall time relative to no pruning" in pruning and "below 1 in 0 of 5 seeds" in pruning
    assert "(2 threads)" in pruning and "reversed: pruning is slower" in pruning
    assert "3 of 5 seeds chose pruning off" in pruning
    # exploratory: labelled, k comparisons, Holm; a conclusion only where it holds
    ex = page[page.index("<h2>Exploratory benchmarks</h2>") : page.index("<h2>Reward models")]
    assert (
        "Exploratory, not primary" in ex
        and "3 comparisons with Holm-corrected p-values" in ex
        and "leads, not findings" in ex
    )
    assert (
        "Holm p = 0.003" in ex and "interval above 0 (a lead)" in ex and "cannot be judged: 1 of 5 seeds defined" in ex
    )
    assert ex.index("toy-zero") < ex.index("toy-times") < ex.index("toy-unseen")  # one benchmark order
    # seed-0 tables stay, labelled as detail; a budget mismatch is named
    assert page.count("seed 0 (detail)") >= 4 and "Steering — seed 0 (detail)" in page
    assert (
        "Budget mismatch on toy-id: Q-guided beam search generates 171 tokens per question, majority vote 207" in page
    )
    summary = frontpage.summary(schema2_tree())
    assert "primary findings" in summary and "better on" not in summary  # the seed-0 Δ is no verdict here


def test_schema2_conclusions_only_where_they_hold():
    tree = schema2_tree()
    primary = tree["evaluation"]["primary"]
    primary["delta_auroc"] = across_seeds([0.03, 0.04, 0.05, 0.03, 0.04])
    primary["first_error_did"]["goal-conditioned"] = across_seeds([-0.2, -0.25, -0.3, -0.18, -0.22], expect="less")
    primary["filter"]["baseline"]["accuracy_change"] = across_seeds([0.0, 0.01, -0.01, 0.0, 0.0], expect="less")
    primary["gate"] = {
        "state": "undefined",
        "reason": "baseline: 1 of 5 seeds defined: no spread over seeds to judge by",
        "margin_over_length": {
            "baseline": across_seeds([0.2, None, None, None, None]),
            "goal-conditioned": across_seeds([0.2, 0.25, 0.22, 0.3, 0.27]),
        },
    }
    gate, delta, _, q_goal, f_base, *_ = _items(frontpage.primary_findings(tree))
    assert "positive in 5 of 5 seeds" in delta and "the goal-conditioned RM ranks better" in delta
    assert "falls in 5 of 5 seeds" in q_goal and q_goal.endswith("Q falls at the first error.")
    assert "a cost is not shown (an effect of" in f_base
    assert "Gate cannot be judged: baseline: 1 of 5 seeds defined" in gate and "(4 undefined)" in gate
    notice = gate_html(primary["gate"], benchmark="toy-id", n_seeds=5)
    assert "cannot be judged" in notice and "#2e7d32" not in notice and "#c62828" not in notice
    failed = dict(
        primary["gate"],
        state="failed",
        reason=None,
        margin_over_length={
            "baseline": across_seeds([-0.01, 0.02, -0.03, 0.0, 0.01]),
            "goal-conditioned": across_seeds([0.2, 0.25, 0.22, 0.3, 0.27]),
        },
    )
    assert "#c62828" in gate_html(failed) and "Not shown for baseline." in gate_html(failed)


def test_schema2_index_page_is_self_contained(tmp_path):
    page = render_index("demo", "now", [], schema2_tree(), tmp_path)
    assert "could not be drawn" not in page and "Both reward models beat the length-only scorer" in page
    assert "over 5 RM seeds" in page and "above 0 in 5 of 5 seeds" in page
    assert "http://" not in page and "https://" not in page and "data:image/png;base64," in page
    assert not re.search(r"\bnan\b", page, flags=re.I)


def test_an_older_file_with_the_seed0_delta_under_mean_renders_the_same():
    """metrics.json files written before ``delta`` name the seed-0 paired difference ``mean``: the
    front page reads either, and shows the difference."""
    import copy

    new = metrics_tree(0.01, 0.07)
    old = copy.deepcopy(new)
    for d in old["evaluation"]["delta_auroc"].values():
        d["mean"] = d.pop("delta")
    assert frontpage.summary(old) == frontpage.summary(new)
    assert frontpage.delta_table(old) == frontpage.delta_table(new)
    assert "+0.04 [+0.01, +0.07]" in frontpage.delta_table(new)


def test_the_gates_second_condition_says_what_the_rms_detect():
    tree = schema2_tree()
    primary = tree["evaluation"]["primary"]
    # an RM that only spots malformed output: far above length on all errors, near it on well-formed ones
    primary["gate"]["well_formed"] = {
        "state": "failed",
        "reason": None,
        "required_margin": 0.15,
        "malformed_share": 0.8,
        "margin_over_length": {rm: across_seeds([0.02, 0.01, 0.03, 0.0, 0.02], null=0.15) for rm in RMS},
    }
    findings = _items(frontpage.primary_findings(tree))
    gate = findings[0]
    assert "Gate passed" in gate and "well-formed incorrect solutions only" in gate
    assert "above 0.15 in 0 of 5 seeds" in gate and "Does not hold" in gate and "mostly malformed output" in gate
    notice = gate_html(primary["gate"], benchmark="toy-id", n_seeds=5)
    assert notice.count('class="gate ') == 2 and "gate-well-formed gate-failed" in notice
    assert "#2e7d32" in notice and "#c62828" in notice  # the first condition green, the second red
    assert "Read every later claim as &#x27;detects malformed output&#x27;" in notice
    # where every error is well-formed the two conditions read the same generations: nothing about malformed output
    primary["gate"]["well_formed"]["malformed_share"] = 0.0
    for text in (
        _items(frontpage.primary_findings(tree))[0],
        gate_html(primary["gate"], benchmark="toy-id", n_seeds=5),
        frontpage.answer(tree),
    ):
        assert "mostly malformed" not in text and "spot malformed" not in text
    assert "says nothing about malformed output" in _items(frontpage.primary_findings(tree))[0]
    primary["gate"]["well_formed"]["state"] = "passed"
    primary["gate"]["well_formed"]["margin_over_length"] = {
        rm: across_seeds([0.3, 0.25, 0.28, 0.3, 0.27], null=0.15) for rm in RMS
    }
    assert (
        "Holds: both reward models beat length there by more than 0.15; they verify."
        in _items(frontpage.primary_findings(tree))[0]
    )


# ------------------------------------------------- the whole story: savings, decoding, first error, companion


def story_tree() -> dict:
    tree = metrics_tree(0.01, 0.07)
    for bench, saved in (("toy-id", 10.0), ("toy-zero", 12.0)):
        tree["evaluation"]["goal-conditioned"][bench]["filter"] = {
            "accuracy": 0.90,
            "accuracy_unfiltered": 0.95,
            "tokens_saved_pct": saved,
            "threshold": 0.0,
        }
    tree["data"]["benchmarks"] = {b: {"n_questions": 300} for b in ("toy-id", "toy-zero")}
    tree["decoding"] = {
        "pruning": {
            "toy-id": {
                "threshold": -1.0,
                "tokens_generated": 100.0,
                "tokens_generated_unpruned": 100.0,
                "accuracy": 0.9,
                "accuracy_unpruned": 0.9,
                "tokens_saved_pct": 0.0,
                "samples_stopped_pct": 0.0,
            },
            "toy-zero": {
                "threshold": -0.5,
                "tokens_generated": 70.0,
                "tokens_generated_unpruned": 100.0,
                "accuracy": 0.5,
                "accuracy_unpruned": 0.6,
                "tokens_saved_pct": 30.0,
                "samples_stopped_pct": 20.0,
            },
        },
        "methods": {
            b: {
                "greedy": {"accuracy": 0.75, "tokens": 30.0, "n": 1, "n_questions": 32},
                "q_guided_beam_search": {"accuracy": 0.5, "tokens": 200.0, "n": 1, "n_questions": 32},
            }
            for b in ("toy-id", "toy-zero")
        },
    }
    tree["timings"] = {
        "decoding": {
            "pruning": {
                "toy-id": {"wall_s": 1.3, "wall_s_unpruned": 0.6},
                "toy-zero": {"wall_s": 2.0, "wall_s_unpruned": 1.0},
            }
        }
    }
    return tree


def test_savings_say_where_pruning_was_off_and_what_it_cost_in_wall_time():
    page = frontpage.result_sections(story_tree())
    assert "chose no pruning on 1 of 2 benchmarks (toy-id)" in page
    assert "toy-zero 2.00 s against 1.00 s" in page  # pruning ran there and was slower
    assert "no pruning (≤ −1)" in page and "95.0% [" in page  # accuracy with its interval over 300 questions


def test_decoding_has_intervals_and_says_what_it_shows():
    page = frontpage.result_sections(story_tree())
    assert "75.0% [57.9, 86.7] (30 tok, N=1)" in page
    assert (
        "Greedy decoding (30–30 tokens per question) is level with or above "
        "Q-guided beam search (200–200 tokens) on 2 of 2" in page
    )
    assert "over 32 questions" in page


def test_first_error_figure_per_seed_or_what_is_missing():
    tree = story_tree()
    tree["evaluation"]["primary"] = {
        "rm_seeds": [0, 1],
        "first_error_did": {rm: {**across_seeds([-0.2, -0.3], expect="less"), "per_seed": [-0.2, -0.3]} for rm in RMS},
    }
    missing = frontpage.first_error_section(tree)
    assert "Not drawn" in missing and "seed 1 -0.30" in missing
    tree["evaluation"]["first_error_profile"] = {
        "benchmark": "toy-id",
        "window": 1,
        **{
            rm: {str(s): {"offsets": [-1, 0, 1], "mean_q": [0.5, 0.2, None], "n": [3, 3, 0]} for s in (0, 1)}
            for rm in RMS
        },
    }
    drawn = frontpage.first_error_section(tree)
    assert "data:image/png;base64," in drawn and "Not drawn" not in drawn
    assert len(plots.first_error_profile_frame(tree["evaluation"]["first_error_profile"])) == 2 * 2 * 2  # None left out


def test_companion_reports_link_each_other_only_where_both_exist(tmp_path):
    demo, confident = tmp_path / "demo", tmp_path / "confident"
    demo.mkdir()
    assert "confident/index.html" not in render_index("demo", "now", [], {}, demo)
    confident.mkdir()
    (confident / "index.html").write_text("<html></html>")
    assert 'href="../confident/index.html"' in render_index("demo", "now", [], {}, demo)
    (demo / "index.html").write_text("<html></html>")
    assert 'href="../demo/index.html"' in render_index("confident", "now", [], {}, confident)


def test_reader_table_says_yes_no_merges_named_intervals_and_drops_empty_reasons():
    frame = pd.DataFrame(
        {
            "rule": ["Q", "log-prob"],
            "meets_target": [True, False],
            "pearson_r": [0.3, None],
            "pearson_ci_low": [0.1, None],
            "pearson_ci_high": [0.5, None],
            "undefined_reason": [None, None],
            "factor": ["prefix_wrong", "token_type"],
        }
    )
    shown = fmt.table(frame)
    assert list(shown.columns) == ["rule", "meets the target", "Pearson r [95% CI]", "factor"]
    assert shown["meets the target"].tolist() == ["yes", "no"]
    assert shown["Pearson r [95% CI]"].tolist() == ["0.30 [0.10, 0.50]", "undefined"]
    assert shown["factor"].tolist() == ["prefix already wrong", "token type"]
    why = fmt.table(frame.assign(undefined_reason=[None, "one class only"]))
    assert why["Pearson r [95% CI]"].tolist() == ["0.30 [0.10, 0.50]", "undefined (one class only)"]
    assert "why undefined" not in why  # the reason went into the cells it explains


def test_a_saving_that_saved_nothing_is_a_sentence_not_a_figure():
    tree = story_tree()
    page = frontpage.result_sections(tree)
    assert "data:image/png;base64," in page.split("Tokens saved by Q")[1].split("</details>")[0]  # toy-zero saved 30%
    for bench in ("toy-id", "toy-zero"):
        tree["evaluation"]["goal-conditioned"][bench]["filter"]["tokens_saved_pct"] = 0.2
        tree["decoding"]["pruning"][bench] |= {"tokens_generated": 100.0, "tokens_generated_unpruned": 100.0}
    section = frontpage.result_sections(tree).split("Tokens saved by Q")[1].split("</details>")[0]
    assert "data:image/png;base64," not in section
    assert "Q-filtered voting saved under 1% of the tokens on every benchmark, so it is not drawn" in section
    assert "Online pruning saved under 1% of the tokens" in section


def test_the_detail_folds_under_the_story_and_names_the_profiles_first_seed():
    tree = story_tree()
    tree["provenance"] = {"profile": {"parameters": {"rm_seeds": [10, 11]}}}
    page = frontpage.result_sections(tree)
    assert "seed 10 (detail)" in page and "seed 0 (detail)" not in page
    assert '<details class="section"><summary><h2>Tokens saved by Q — seed 10 (detail)</h2></summary>' in page
    assert "<h2>Summary</h2>" in page  # the story stays open


def test_steering_says_what_the_style_cost_in_correctness():
    tree = story_tree()
    tree["decoding"]["steering"] = {
        "n_questions": 32,
        "attribute_rate": 0.31,
        "attribute_rate_unguided": 0.12,
        "accuracy": 0.094,
        "accuracy_unguided": 0.25,
    }
    page = frontpage.result_sections(tree)
    assert "Steering costs correctness: 9.4% of the steered solutions are correct, against 25.0% unguided" in page
    assert "is not a success" in page
    tree["decoding"]["steering"]["accuracy"] = 0.3  # above unguided, yet most steered answers are wrong
    page = frontpage.result_sections(tree)
    assert "Steering costs no correctness (30.0% of the steered solutions are correct, against 25.0% unguided)" in page
    assert "is not a success" in page
    tree["decoding"]["steering"]["accuracy"] = 0.6
    assert "Steering costs" not in frontpage.result_sections(tree)
