"""eval-rm writes ``all/`` as the official eval_rm.py does (the greedy rows, then the samples pass by pass), so the
official metrics.py's voting, transcribed here by reading it, gives on a goalrm folder the figures it gives on the
same generations laid out as the official code's (one pass per file), and ``goalrm metrics --official`` prints them;
goalrm's own readers still see the samples alone, in their input order."""

import copy
import glob
import json

import numpy as np
import pytest
import torch
from scipy import stats
from transformers import AutoModel

from goalrm_core.cli.eval_rm import main as eval_rm_main
from goalrm_core.cli.metrics import main as metrics_main
from goalrm_core.data.io import read_jsonl, write_jsonl
from goalrm_core.data.rundir import GREEDY_IN_ALL
from goalrm_core.evaluation.tables import read_scored
from goalrm_core.model.reward_model import RewardModel, save_reward_model

QUESTIONS = ["1 +2", "4 *5 -1", "9 -3", "2 +2 +2"]
PASSES = 3


def official_voting(pattern, dataset_len, threshold, skip=5):
    """The official metrics.py's ``get_accuracy``, as read: every row of the files matching ``pattern`` (a glob),
    row i belonging to question i mod ``dataset_len``; a row is dropped at its first Q-value (past the first
    ``skip``) below ``threshold``, counting the tokens from there as saved; the vote is correct answers against
    the most common wrong answer, over the kept rows unless every row was dropped."""
    rows = [json.loads(line) for path in glob.glob(pattern) for line in open(path)]
    per_pass = len(rows) // dataset_len
    voted, filtered, saved, tokens, prop_kept, prop_all = 0, [], [0] * dataset_len, [0] * dataset_len, [], []
    for q in range(dataset_len):
        n_dropped, kept_right, right, kept_wrong, wrong = 0, 0, 0, {}, {}
        for i in range(q, len(rows), dataset_len):
            assert i == 0 or rows[i]["question"] != rows[i - 1]["question"]  # the official assert
            row = rows[i]
            q_values = np.array(row["cosine_sim"])
            q_values = q_values[skip:]
            tokens[q] += len(q_values)
            below = np.nonzero(q_values < threshold)[0]
            if below.size:
                saved[q] += len(q_values) - below[0]
                n_dropped += 1
            elif row["is_correct"]:
                kept_right += 1
            else:
                kept_wrong[row["predicted_answer"]] = kept_wrong.get(row["predicted_answer"], 0) + 1
            if row["is_correct"]:
                right += 1
            else:
                wrong[row["predicted_answer"]] = wrong.get(row["predicted_answer"], 0) + 1
        filtered.append(n_dropped)
        prop_all.append(right / (right + sum(wrong.values())))
        if n_dropped == per_pass:  # every row dropped: vote over all of them, nothing counted as saved
            saved[q], filtered[q] = 0, 0
            prop_kept.append(right / (right + sum(wrong.values())) if wrong else 1)
            voted += (right >= max(wrong.values())) if wrong else 1
        else:
            prop_kept.append(kept_right / (kept_right + sum(kept_wrong.values())) if kept_wrong else 1)
            voted += (kept_right >= max(kept_wrong.values())) if kept_wrong else 1
    return [
        f"gsm8k accuracy: {voted / dataset_len}",
        f"Average number of generations filtered: {np.mean(filtered)}",
        f"Total number of generations filtered: {np.sum(filtered)}",
        f"Average number of tokens saved: {np.mean(saved)}",
        f"Total number of tokens saved: {np.sum(saved)}",
        f"Average number of tokens: {np.mean(tokens)}",
        f"Total number of tokens: {np.sum(tokens)}",
        f"Average proportion correct filtered: {np.mean(prop_kept)}",
        f"Average proportion correct: {np.mean(prop_all)}",
        f"Ttest p value: {stats.ttest_ind(prop_kept, prop_all)}",
    ]


def generation(q, k):
    """Question q's generation of pass k (k = -1: greedy), some right and some with one of two wrong answers."""
    answer = [3, 19, 6, 6][q] if (q + k) % 3 else [4, 20][(q * k) % 2]
    steps = "\n".join(f"{a}+{b}={a + b}" for a, b in ((q, k + 1), (k + 2, q + 1), (q + k + 3, 1)))
    return {
        "question": QUESTIONS[q],
        "generated_solution": f"{steps}\n#{answer}",
        "predicted_answer": answer,
        "is_correct": answer == [3, 19, 6, 6][q],
    }


@pytest.fixture(scope="module")
def scored(tmp_path_factory, tiny_config, tokenizer):
    """The same generations scored from goalrm's layout (greedy.jsonl, samples.jsonl question by question) and from
    the official one (output-greedy.jsonl, output-rs<k>.jsonl: one pass per file)."""
    root = tmp_path_factory.mktemp("official_all")
    torch.manual_seed(0)
    rm = save_reward_model(
        RewardModel(AutoModel.from_config(copy.deepcopy(tiny_config)), "linear").eval(), root / "rm", tokenizer
    )
    np.save(root / "goal.npy", np.random.default_rng(0).normal(size=(1, tiny_config.hidden_size)).astype(np.float32))
    greedy = [generation(q, -1) for q in range(len(QUESTIONS))]
    write_jsonl(root / "ours" / "gsm8k" / "greedy.jsonl", greedy)
    write_jsonl(
        root / "ours" / "gsm8k" / "samples.jsonl",
        [{**generation(q, k), "sample_index": k} for q in range(len(QUESTIONS)) for k in range(PASSES)],
    )
    write_jsonl(root / "theirs" / "gsm8k" / "output-greedy.jsonl", greedy)
    for k in range(PASSES):
        write_jsonl(
            root / "theirs" / "gsm8k" / f"output-rs{k}.jsonl", [generation(q, k) for q in range(len(QUESTIONS))]
        )
    for layout in ("ours", "theirs"):
        assert (
            eval_rm_main(
                [
                    "--completions_data_path",
                    str(root / layout),
                    "--reward_model_path",
                    str(rm),
                    "--goal_state_path",
                    str(root / "goal.npy"),
                    "--save_dir",
                    str(root / f"eval-{layout}"),
                    "--benchmarks",
                    "gsm8k",
                    "--template",
                    "toymath",
                    "--batch_size",
                    "1",
                ]
            )
            == 0
        )
    return root


def test_all_holds_the_greedy_rows_then_the_samples_pass_by_pass(scored):
    rows = read_jsonl(scored / "eval-ours" / "rm" / "gsm8k" / "all" / "output-metrics-dense.jsonl")
    n = len(QUESTIONS)
    assert len(rows) == n * (1 + PASSES)
    assert [r.get(GREEDY_IN_ALL, False) for r in rows] == [True] * n + [False] * n * PASSES
    assert [r["question"] for r in rows] == QUESTIONS * (1 + PASSES)
    assert [r.get("sample_index") for r in rows[n:]] == [k for k in range(PASSES) for _ in range(n)]
    # goalrm's own readers: the samples alone, question by question as they came in
    samples = read_scored(scored / "eval-ours" / "rm", "gsm8k", "all")
    assert [(r["question"], r["sample_index"]) for r in samples] == [(q, k) for q in QUESTIONS for k in range(PASSES)]
    assert all(GREEDY_IN_ALL not in r and "sample_row" not in r for r in samples)
    assert json.loads((scored / "eval-ours" / "rm" / "eval_rm.json").read_text())["scored"] == {
        "gsm8k": {"greedy": n, "all": n * PASSES}
    }


def test_the_official_voting_gives_the_same_figures_on_either_layout_and_goalrm_prints_them(scored, capsys):
    lowest = [
        min(r["cosine_sim"][5:])
        for r in read_jsonl(scored / "eval-ours" / "rm" / "gsm8k" / "all" / "output-metrics-dense.jsonl")
    ]
    threshold = float(np.median(lowest))  # about half the rows dropped, the others kept
    ours = official_voting(str(scored / "eval-ours" / "rm" / "gsm8k" / "all" / "*.jsonl"), len(QUESTIONS), threshold)
    theirs = official_voting(
        str(scored / "eval-theirs" / "rm" / "gsm8k" / "all" / "*.jsonl"), len(QUESTIONS), threshold
    )
    assert ours == theirs
    assert "Total number of generations filtered: 0" not in ours
    assert (
        metrics_main(
            [
                "--model_name",
                "rm",
                "--eval_results_dir",
                str(scored / "eval-ours"),
                "--benchmarks",
                "gsm8k",
                "--filter_threshold",
                str(threshold),
                "--official",
                "--dataset_len",
                str(len(QUESTIONS)),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out.splitlines()
    assert printed[-len(ours) :] == ours
