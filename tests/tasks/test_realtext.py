"""The real-text designs (goalrm_core.tasks.realtext.design) and the real LM's validation table
(scripts/real_lm_validation.py), the latter on a tiny random twin of SmolLM2 with a real BPE tokenizer."""

import gzip
import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest
from smollm2_twin import write_twin_gguf

from goalrm_core.tasks.realtext.design import (
    SPLITS,
    fitting_pairs,
    gsm8k_pairs,
    hh_split,
    three_way_split,
    token_lengths,
)

ROOT = Path(__file__).resolve().parents[2]


def solutions(n_questions: int = 30) -> list[dict]:
    """Two solutions per question, one correct and one not, the second question of every three all wrong."""
    rows = []
    for q in range(n_questions):
        for k in range(2):
            correct = k == 0 and q % 3 != 1
            solution = f"{q} + 1 = {q + 1 + (not correct) + k}\nA: {k}"
            rows.append({"question": f"What is {q} + 1?", "generated_solution": solution, "is_correct": correct})
    return rows


def test_the_three_splits_partition_the_questions_and_a_seed_repeats_them():
    rows = solutions()
    parts = three_way_split(rows, 0.2, 0.4, seed=3)
    assert set(parts) == set(SPLITS)
    questions = {name: {r["question"] for r in part} for name, part in parts.items()}
    assert sum(len(part) for part in parts.values()) == len(rows)
    assert not (questions["train"] & questions["validation"] or questions["train"] & questions["reported"])
    assert not questions["validation"] & questions["reported"]
    assert [len(questions[s]) for s in SPLITS] == [12, 6, 12]
    assert three_way_split(rows, 0.2, 0.4, seed=3) == parts
    assert three_way_split(rows, 0.2, 0.4, seed=4) != parts
    # the reported questions do not depend on the validation fraction: choosing it never moves them
    assert {r["question"] for r in three_way_split(rows, 0.1, 0.4, seed=3)["reported"]} == questions["reported"]


@pytest.mark.parametrize("validation, reported", [(0.5, 0.5), (-0.1, 0.2), (0.2, 1.0)])
def test_fractions_that_leave_nothing_to_train_are_refused(validation, reported):
    with pytest.raises(ValueError, match="leave some for training"):
        three_way_split(solutions(), validation, reported)


def test_pairs_are_correct_against_incorrect_of_one_question_and_the_reference_can_be_the_correct_side():
    rows = solutions(9)
    refs = {r["question"]: "reference " + r["question"] for r in rows}
    pairs = gsm8k_pairs(rows, refs, pairs_per_question=4)
    by_text = {r["generated_solution"]: r for r in rows}
    for p in pairs:
        assert p["correct"] == refs[p["question"]] or by_text[p["correct"]]["is_correct"]
        assert not by_text[p["incorrect"]]["is_correct"] and by_text[p["incorrect"]]["question"] == p["question"]
    # the all-wrong questions get pairs only through their reference
    all_wrong = {f"What is {q} + 1?" for q in (1, 4, 7)}
    assert {p["question"] for p in pairs if p["correct"] == refs[p["question"]]} >= all_wrong
    assert not any(p["question"] in all_wrong for p in gsm8k_pairs(rows, None, pairs_per_question=4))
    capped = gsm8k_pairs(rows, refs, pairs_per_question=4, max_pairs=5, seed=1)
    assert len(capped) == 5 and all(p in pairs for p in capped)


def test_hh_pairs_split_by_dialogue():
    pairs = [
        {"question": f"\n\nHuman: hi {i // 2}\n\nAssistant:", "correct": "a", "incorrect": f"b{i}"} for i in range(40)
    ]
    parts = hh_split(pairs, 0.25, 0.25, seed=0)
    seen = [{p["question"] for p in part} for part in parts.values()]
    assert sum(len(s) for s in seen) == 20 and len(set().union(*seen)) == 20


@pytest.fixture(scope="module")
def twin_folder(tmp_path_factory):
    """The twin saved as an ordinary checkpoint folder (model and BPE tokenizer)."""
    folder = tmp_path_factory.mktemp("twin")
    model, tokenizer = write_twin_gguf(folder / "twin.gguf")
    model.save_pretrained(folder / "model")
    tokenizer.save_pretrained(folder / "model")
    return folder / "model", tokenizer


def test_token_lengths_count_what_a_cut_would_truncate(twin_folder):
    _, tokenizer = twin_folder
    prompts, responses = ["Natalie has 12 apples. ", "A train"], ["12 + 35 = 47.", " travels 60 miles in 2 hours."]
    full = [len(tokenizer(p + r, add_special_tokens=False)["input_ids"]) + 1 for p, r in zip(prompts, responses)]
    counts = token_lengths(tokenizer, prompts, responses, max_len=min(full))
    assert (counts.texts, counts.tokens, counts.longest) == (2, sum(full), max(full))
    assert counts.over_max_len == (full[0] != full[1])
    assert token_lengths(tokenizer, [], [], 8).texts == 0
    with pytest.raises(ValueError, match="2 prompts for 1 responses"):
        token_lengths(tokenizer, prompts, responses[:1], 8)


def load_script():
    spec = importlib.util.spec_from_file_location("real_lm_validation", ROOT / "scripts" / "real_lm_validation.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def write_data(folder: Path) -> None:
    with open(folder / "gsm8k.jsonl", "w") as f:
        for q in range(20):
            row = {"question": f"Tom has {q} apples and buys {q + 1}. How many?", "ground_truth": f"A: {2 * q + 1}"}
            for m, wrong in (("small", q % 2), ("large", q % 3 == 0)):
                row[m] = {
                    "solution": f"{q} + {q + 1} = {2 * q + 1 + wrong}\nA: {2 * q + 1 + wrong}",
                    "is_correct": not wrong,
                }
            f.write(json.dumps(row) + "\n")
    with gzip.open(folder / "hh.jsonl.gz", "wt") as f:
        for i in range(20):
            dialogue = f"\n\nHuman: how do I bake bread {i}?\n\nAssistant:"
            f.write(json.dumps({"chosen": dialogue + " Mix flour and water.", "rejected": dialogue + " No."}) + "\n")


def test_the_validation_table_scores_only_validation_questions(twin_folder, tmp_path):
    write_data(tmp_path)
    script = load_script()
    out = tmp_path / "out" / "table"
    argv = ["--model", str(twin_folder[0]), "--data-dir", str(tmp_path), "--gsm8k-file", "gsm8k.jsonl"]
    argv += ["--hh-file", "hh.jsonl.gz", "--n-boot", "50", "--threads", "1", "--out", str(out)]
    assert script.main(argv) == 0
    result = json.loads(out.with_suffix(".json").read_text())
    parts = three_way_split(script.load_generations(tmp_path / "gsm8k.jsonl").rows, script.VALIDATION, script.REPORTED)
    assert result["gsm8k"]["questions"] == {s: len({r["question"] for r in parts[s]}) for s in SPLITS}
    assert (
        result["gsm8k"]["scored_solutions"]
        == len(parts["validation"])
        == 2 * result["gsm8k"]["questions"]["validation"]
    )
    for entry in result["gsm8k"]["auroc"].values():
        assert entry["auroc"] is None or 0.0 <= entry["auroc"] <= 1.0
    lengths = result["gsm8k"]["lengths"]
    assert lengths["validation"]["256"]["texts"] == len(parts["validation"])
    assert lengths["train"]["256"]["texts"] == 2 * result["gsm8k"]["train_pairs"]
    assert sum(result["hh"]["pairs"].values()) == 20
    forward = result["forward"]
    assert forward["tokens"] > 0 and forward["tokens_per_s"] > 0 and math.isfinite(forward["fraction_of_peak"])
    page = out.with_suffix(".md").read_text()
    assert "| base LM mean log-prob |" in page and "reported split" in page
    # the same run again gives the same figures (the machine's speed and timings aside)
    assert script.main(argv) == 0
    again = json.loads(out.with_suffix(".json").read_text())
    assert again["gsm8k"] == result["gsm8k"] and again["hh"] == result["hh"]


def test_pairs_that_do_not_fit_are_left_out_and_counted(twin_folder):
    _, tokenizer = twin_folder
    short = {"question": "q", "correct": " Mix flour.", "incorrect": " No."}
    long_prompt = {"question": "word " * 200, "correct": " Mix flour.", "incorrect": " No."}
    long_reply = {"question": "q", "correct": " yes" * 200, "incorrect": " No."}
    rows = [short, long_prompt, long_reply]
    prompts = [f"\n\nHuman: {r['question']}\n\nAssistant:" for r in rows]
    lengths = [
        max(len(tokenizer(p + r[s], add_special_tokens=False)["input_ids"]) for s in ("correct", "incorrect")) + 1
        for p, r in zip(prompts, rows)
    ]
    max_len = lengths[0] + 5
    assert lengths[1] > max_len and lengths[2] > max_len
    assert fitting_pairs(tokenizer, prompts, rows, max_len) == ([short], 2)
    assert fitting_pairs(tokenizer, prompts, rows, max(lengths)) == (rows, 0)  # a text of exactly max_len fits
    with pytest.raises(ValueError, match="2 prompts for 3 pairs"):
        fitting_pairs(tokenizer, prompts[:2], rows, max_len)
