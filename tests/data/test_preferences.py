"""Preference sources: shapes, HH dialogue splitting with counted skips, blending, errors."""

import json
from pathlib import Path

import pandas as pd
import pytest

from goalrm_core.data.preferences import (
    PreferenceDataError,
    blend_counts,
    held_out_split,
    load_preference_rows,
    load_source_rows,
    split_train_eval,
)

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def plain(rows):
    """Rows without the loader's private notes (where each came from, file:line; how its prompt takes a template)."""
    return [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]


def pairs(n, tag="p"):
    return [{"question": f"{tag}{i}", "correct": f"good {i}", "incorrect": f"bad {i}"} for i in range(n)]


def test_openmath_and_prompt_shapes_normalise_to_pairs(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [{"question": "q", "correct": "c", "incorrect": "i", "extra": 1}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"prompt": "q", "chosen": "c", "rejected": "i"}])
    assert plain(load_preference_rows(str(a))) == [{"question": "q", "correct": "c", "incorrect": "i"}]
    assert plain(load_preference_rows(str(b))) == [{"question": "q", "correct": "c", "incorrect": "i"}]
    assert load_preference_rows(str(b))[0]["_source"] == f"{b}:1"


def test_hh_dialogues_split_at_last_assistant_turn_and_skips_are_counted(tmp_path):
    shared = "\n\nHuman: hi\n\nAssistant: hello\n\nHuman: help?"
    rows = [
        {"chosen": shared + "\n\nAssistant: sure", "rejected": shared + "\n\nAssistant: no"},
        {"chosen": "\n\nHuman: no assistant turn", "rejected": "\n\nHuman: none here"},
        {"chosen": "\n\nHuman: a\n\nAssistant: x", "rejected": "\n\nHuman: b\n\nAssistant: y"},
        {"chosen": shared + "\n\nAssistant:  ", "rejected": shared + "\n\nAssistant: no"},
    ]
    path = write_jsonl(tmp_path / "hh.jsonl", rows)
    reports = []
    out = load_preference_rows(str(path), reports=reports)
    assert plain(out) == [{"question": shared + "\n\nAssistant:", "correct": " sure", "incorrect": " no"}]
    (report,) = reports
    assert (report.n_read, report.n_used, report.n_skipped) == (4, 1, 3)
    assert (report.n_skipped_no_assistant_turn, report.n_skipped_no_shared_prefix, report.n_skipped_empty_response) == (
        1,
        1,
        1,
    )
    assert f"{path}:2" in report.summary() and "3 skipped" in report.summary()
    assert report.shapes == {"hh_rlhf": 4}


def test_row_missing_keys_names_source_row_and_shapes(tmp_path):
    path = write_jsonl(tmp_path / "bad.jsonl", pairs(2) + [{"question": "q", "correct": "c"}])
    with pytest.raises(
        PreferenceDataError, match=r"bad\.jsonl:3: missing keys.*question/correct/incorrect.*prompt/chosen/rejected"
    ):
        load_preference_rows(str(path))
    path = write_jsonl(tmp_path / "typed.jsonl", [{"prompt": "q", "chosen": ["a"], "rejected": "b"}])
    with pytest.raises(PreferenceDataError, match=r"typed\.jsonl:1: field 'chosen' must be a string"):
        load_preference_rows(str(path))


def test_json_parquet_save_to_disk_and_split_dirs(tmp_path):
    import datasets

    rows = pairs(5)
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    pd.DataFrame(rows).to_parquet(tmp_path / "rows.parquet")
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "saved"))
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "saved_dict"))
    (tmp_path / "dir").mkdir()
    write_jsonl(tmp_path / "dir" / "train.jsonl", rows)
    for source in ("rows.json", "rows.parquet", "saved", "saved_dict", "dir"):
        got, _ = load_source_rows(str(tmp_path / source))
        assert plain(got) == rows, source
    # a held-out split is found under eval / test / validation (runs/<profile>/data/preference/eval.jsonl)
    write_jsonl(tmp_path / "dir" / "eval.jsonl", rows[:2])
    assert plain(load_source_rows(str(tmp_path / "dir"), split="eval")[0]) == rows[:2]
    assert plain(load_source_rows(str(tmp_path / "dir"), split="test")[0]) == rows[:2]


def test_blending_is_seeded_and_follows_the_probabilities(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", pairs(100, "a"))
    b = write_jsonl(tmp_path / "b.jsonl", pairs(30, "b"))
    spec = f"{a},{b}"
    rows = load_preference_rows(spec, "0.75,0.25", seed=1)
    assert len(rows) == 120  # b runs out first: 30 / 0.25 = 120 rows in all
    assert sum(r["question"].startswith("a") for r in rows) == 90
    assert rows == load_preference_rows(spec, "0.75,0.25", seed=1)
    assert rows != load_preference_rows(spec, "0.75,0.25", seed=2)
    assert len(load_preference_rows(spec, "0.75,0.25", seed=1, max_samples=40)) == 40
    assert blend_counts([10, 10], [1.0, 0.0]) == [10, 0]
    with pytest.raises(ValueError, match="2 sources"):
        load_preference_rows(spec, "1.0")


def test_hub_name_offline_raises_clearly(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(
        PreferenceDataError, match=r"'Anthropic/hh-rlhf' is not a local file/dir and the Hub is unreachable \(offline"
    ):
        load_preference_rows("Anthropic/hh-rlhf", "1.0")
    with pytest.raises(PreferenceDataError, match="not found"):
        load_preference_rows("./missing/pairs.jsonl")


def test_split_train_eval_is_disjoint_and_seeded():
    rows = pairs(50)
    train, held = split_train_eval(rows, 0.1, seed=3)
    assert (len(train), len(held)) == (45, 5)
    assert {r["question"] for r in train}.isdisjoint(r["question"] for r in held)
    assert (train, held) == split_train_eval(rows, 0.1, seed=3)
    assert split_train_eval(rows, 0.0, seed=3) == (rows, [])


@pytest.mark.skipif(not (SHARED_DATA / "hh_rlhf_harmless_base_test.jsonl.gz").exists(), reason="../shared/data absent")
def test_real_hh_rlhf_pairs_load_with_counted_skips():
    reports = []
    rows = load_preference_rows(str(SHARED_DATA / "hh_rlhf_harmless_base_test.jsonl.gz"), reports=reports)
    assert reports[0].n_read == 2312 and len(rows) == reports[0].n_used == 2312 - reports[0].n_skipped
    assert all(r["question"].endswith("\n\nAssistant:") and r["correct"].strip() for r in rows)


def test_a_bad_row_is_named_by_file_and_line_after_shuffling(tmp_path, tokenizer):
    from goalrm_core.model.encoding import encode_preference_rows

    rows = pairs(40)
    rows[30]["correct"] = "   "  # file line 31
    path = write_jsonl(tmp_path / "pairs.jsonl", rows)
    loaded = load_preference_rows(str(path), seed=3)
    assert loaded.index(next(r for r in loaded if r["question"] == "p30")) != 30  # shuffled away from its line
    with pytest.raises(ValueError, match=r"pairs\.jsonl:31: field 'correct' is an empty response"):
        encode_preference_rows(tokenizer, loaded, "toymath", 64)


def test_a_dataset_path_with_a_comma_is_one_source(tmp_path):
    path = write_jsonl(tmp_path / "pairs,v2.jsonl", pairs(3))
    assert plain(load_preference_rows(str(path), seed=0)) != [] and len(load_preference_rows(str(path))) == 3


def test_hh_dialogue_format_is_the_official_empty_prompt_and_whole_dialogues(tmp_path):
    chosen, rejected = "\n\nHuman: hi\n\nAssistant: hello", "\n\nHuman: hi\n\nAssistant: go away"
    path = write_jsonl(tmp_path / "hh.jsonl", [{"chosen": chosen, "rejected": rejected}])
    assert plain(load_preference_rows(str(path), hh_format="dialogue")) == [
        {"question": "", "correct": chosen, "incorrect": rejected}
    ]
    assert plain(load_preference_rows(str(path), hh_format="split")) == [
        {"question": "\n\nHuman: hi\n\nAssistant:", "correct": " hello", "incorrect": " go away"}
    ]
    with pytest.raises(ValueError, match="hh_format"):
        load_preference_rows(str(path), hh_format="turns")


def test_training_evaluates_on_a_sources_own_test_split_as_the_official_code_does(tmp_path, tokenizer):
    from goalrm_core.train.batching import load_items
    from goalrm_core.train.config import TrainRMConfig

    folder = tmp_path / "pairs"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", pairs(20, "train"))
    write_jsonl(folder / "test.jsonl", pairs(3, "test"))
    assert held_out_split(str(folder)) == "test" and held_out_split(str(folder / "train.jsonl")) is None
    cfg = TrainRMConfig(dataset=str(folder), template="toymath", encoding="split", max_len=64)
    train, held, counts = load_items(cfg, tokenizer, say=lambda _: None)
    assert (len(train), len(held)) == (20, 3)  # every training row kept, the test split evaluates
    holdout = TrainRMConfig(
        dataset=str(folder), template="toymath", encoding="split", max_len=64, eval_source="holdout", eval_split=0.1
    )
    train, held, _ = load_items(holdout, tokenizer, say=lambda _: None)
    assert (len(train), len(held)) == (18, 2)
