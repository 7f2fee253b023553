"""The corpus of bad inputs: each gives a clear error (file, line or row, field, what was expected)
and leaves no half-written artifact behind."""

import copy
import json

import numpy as np
import pytest
from transformers import AutoModel

from goalrm_core.data.io import ArtifactError, atomic_write_json, load_npy, read_jsonl, write_jsonl
from goalrm_core.inference.goal_state import check_goal_state
from goalrm_core.model.encoding import encode_preference_rows
from goalrm_core.model.reward_model import RewardModel, check_tokenizer_matches, load_reward_model, save_reward_model
from goalrm_core.model.tokenization import build_char_tokenizer
from goalrm_core.pipeline.profile_checks import check_profile_against_notebooks
from goalrm_core.pipeline.profile_files import load_profile
from goalrm_core.study import artifacts


def test_malformed_jsonl_names_file_and_line(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"question": "a", "correct": "b", "incorrect": "c"}\n{"question": "a", "correct":\n')
    with pytest.raises(ArtifactError, match=r"pairs\.jsonl:2: malformed JSON"):
        read_jsonl(path)


def test_non_utf8_names_the_line(tmp_path):
    path = tmp_path / "gens.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": "\xff\xfe"}\n')
    with pytest.raises(ArtifactError, match=r"gens\.jsonl:2: not valid UTF-8"):
        read_jsonl(path)


def test_a_lone_surrogate_in_a_text_field_is_refused_naming_the_line(tmp_path):
    """JSON may escape half of a surrogate pair ("\\ud800"): valid JSON, no text a tokenizer can encode."""
    path = tmp_path / "pairs.jsonl"
    path.write_text(
        '{"question": "a", "correct": "b", "incorrect": "c"}\n'
        '{"question": "a", "correct": "x\\ud800", "incorrect": "c"}\n'
    )
    with pytest.raises(
        ArtifactError, match=r"pairs\.jsonl:2: field 'correct' holds a lone surrogate '\\ud800' at character 1"
    ):
        read_jsonl(path)
    path.write_text(
        '{"question": "a", "correct": "\\ud83d\\ude00", "incorrect": "c"}\n'
    )  # a whole pair is an emoji: fine
    assert read_jsonl(path)[0]["correct"] == "\U0001f600"


def test_missing_fields_and_non_objects(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"question": "q"}\n')
    with pytest.raises(ArtifactError, match=r"x\.jsonl:1: missing field\(s\) \['correct', 'incorrect'\]"):
        read_jsonl(path, required=("question", "correct", "incorrect"))
    path.write_text("[1, 2]\n")
    with pytest.raises(ArtifactError, match=r"x\.jsonl:1: expected a JSON object"):
        read_jsonl(path)


def test_wrong_field_types_and_empty_strings(tokenizer):
    with pytest.raises(ValueError, match=r"row 0: field 'correct' must be a string, got int"):
        encode_preference_rows(tokenizer, [{"question": "q", "correct": 3, "incorrect": "b"}], "toymath", 64)
    with pytest.raises(ValueError, match=r"row 0: field 'incorrect' is an empty response"):
        encode_preference_rows(tokenizer, [{"question": "q", "correct": "a", "incorrect": ""}], "toymath", 64)
    same = {"question": "q", "correct": "1+1=2", "incorrect": "1+1=2", "_source": "pairs.jsonl:7"}
    with pytest.raises(ValueError, match=r"^pairs\.jsonl:7: fields 'correct' and 'incorrect' hold the same response"):
        encode_preference_rows(tokenizer, [{"question": "q", "correct": "a", "incorrect": "b"}, same], "toymath", 64)


def test_a_10mb_single_line_is_read_or_rejected_cleanly(tmp_path, tokenizer):
    path = tmp_path / "big.jsonl"
    write_jsonl(path, [{"question": "q", "correct": "1" * 10_000_000, "incorrect": "2"}])
    rows = read_jsonl(path, required=("question", "correct", "incorrect"))
    items, stats = encode_preference_rows(tokenizer, rows, "toymath", 512)
    assert items == [] and stats.n_dropped == 1 and stats.dropped_rows == [0]


def test_truncated_npy(tmp_path):
    path = tmp_path / "goal_state.npy"
    np.save(path, np.ones((1, 64), dtype=np.float32))
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ArtifactError, match="damaged .npy file"):
        load_npy(path)


def test_nan_goal_and_hidden_size_mismatch():
    with pytest.raises(ValueError, match="NaN or inf"):
        check_goal_state(np.array([[np.inf, 0.0]]), 2)
    with pytest.raises(ValueError, match=r"\(1, 3\).*hidden size is 2"):
        check_goal_state(np.zeros((1, 3)), 2)


def test_tokenizer_that_does_not_match_the_model(tiny_config):
    model = RewardModel(AutoModel.from_config(copy.deepcopy(tiny_config)))
    bigger = build_char_tokenizer(alphabet="".join(chr(c) for c in range(32, 400)))
    with pytest.raises(ValueError, match="do not belong together"):
        check_tokenizer_matches(model, bigger)


def test_checkpoint_with_missing_files(tmp_path, tiny_config, tokenizer):
    model = RewardModel(AutoModel.from_config(copy.deepcopy(tiny_config)))
    path = save_reward_model(model, tmp_path / "rm", tokenizer)
    (path / "config.json").unlink()
    with pytest.raises(ArtifactError, match="config.json missing"):
        load_reward_model(path)


def test_profile_with_wrong_types(tmp_path):
    (tmp_path / "bad.yaml").write_text("seed: [1, {a: 2}]\n")
    with pytest.raises(ValueError, match="seed"):
        load_profile("bad", tmp_path)
    declared = {"01_data": {"n_samples": {"inferred_type_name": "None", "default": "16"}}}
    with pytest.raises(ValueError, match="n_samples"):
        check_profile_against_notebooks({"n_samples": "sixteen"}, declared)


def test_missing_artifacts_say_what_to_run_first(tmp_path):
    with pytest.raises(ArtifactError, match="notebooks/02_training.ipynb"):
        artifacts.load_rm(tmp_path, "baseline")
    with pytest.raises(ArtifactError, match="notebooks/01_data.ipynb"):
        artifacts.preference_pairs(tmp_path, "train")
    with pytest.raises(ArtifactError, match="notebooks/03_representations.ipynb"):
        artifacts.read_goal_state(tmp_path, "baseline")


def test_failed_writes_leave_nothing_half_written(tmp_path):
    target = tmp_path / "metrics.json"
    atomic_write_json(target, {"ok": 1})
    with pytest.raises(TypeError):
        atomic_write_json(target, {"bad": object()})
    assert json.loads(target.read_text()) == {"ok": 1}

    def rows():
        yield {"a": 1}
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_jsonl(tmp_path / "gens.jsonl", rows())
    assert not (tmp_path / "gens.jsonl").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]
