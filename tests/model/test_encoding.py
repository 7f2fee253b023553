import pytest
from transformers import AutoTokenizer

from goalrm_core.model.encoding import PreferenceCollator, encode_preference_rows, encode_prompt_response


def test_char_tokenizer_roundtrips_through_autotokenizer(tmp_path, tokenizer):
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    text = "9 *7 *2\n9*7=63\n#126"
    ids = loaded(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text)
    assert loaded.decode(ids) == text
    assert {loaded.pad_token_id, loaded.eos_token_id, loaded.bos_token_id} == {0, 1, 2}
    assert loaded("\u00e9", add_special_tokens=False)["input_ids"] == [loaded.unk_token_id]


def test_response_gets_space_and_eos_and_exact_length(tokenizer):
    enc = encode_prompt_response(tokenizer, "1 +2\n", "1+2=3\n#3", max_len=100)
    assert enc.input_ids[-1] == tokenizer.eos_token_id
    assert enc.num_actions == len("1+2=3\n#3 ") + 1
    assert not enc.truncated


def test_truncation_cuts_the_prompt_from_the_left_and_keeps_eos(tokenizer):
    prompt, response = "abcdefghij", "xyz"
    enc = encode_prompt_response(tokenizer, prompt, response, max_len=8)
    assert len(enc.input_ids) == 8 and enc.truncated
    assert enc.input_ids[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(enc.input_ids[:-1]) == "hij" + "xyz "
    assert encode_prompt_response(tokenizer, prompt, "a much longer response", max_len=8) is None


def test_rows_are_counted_when_truncated_or_dropped(tokenizer):
    rows = [
        {"question": "1 +1", "correct": "1+1=2\n#2", "incorrect": "1+1=3\n#3"},
        {"question": "x" * 50, "correct": "#1", "incorrect": "#2"},
        {"question": "1 +1", "correct": "y" * 80, "incorrect": "#2"},
    ]
    items, stats = encode_preference_rows(tokenizer, rows, template="toymath", max_len=30)
    assert (stats.n_rows, stats.n_truncated, stats.n_dropped, stats.dropped_rows) == (3, 1, 1, [2])
    assert len(items) == 2
    assert "1 truncated" in stats.summary() and "1 dropped" in stats.summary()


def test_empty_response_names_the_row(tokenizer):
    rows = [{"question": "q", "correct": "a", "incorrect": "b"}, {"question": "q", "correct": " ", "incorrect": "b"}]
    with pytest.raises(ValueError, match=r"row 1: field 'correct' is an empty response"):
        encode_preference_rows(tokenizer, rows, template="toymath", max_len=30)
    with pytest.raises(ValueError, match=r"math, nemo, hh, toymath"):
        encode_preference_rows(tokenizer, rows[:1], template="chat", max_len=30)


def test_collator_concatenates_chosen_then_rejected(tokenizer):
    rows = [{"question": "1 +1", "correct": "#2", "incorrect": "1+1=3\n#3"}] * 2
    items, _ = encode_preference_rows(tokenizer, rows, template="toymath", max_len=64)
    batch = PreferenceCollator(tokenizer.pad_token_id)(items)
    assert batch["input_ids"].shape[0] == 4
    assert (batch["input_ids"][:, -1] == tokenizer.eos_token_id).all()
    assert batch["num_actions"].tolist() == [4, 4, 10, 10]
    assert (batch["attention_mask"].sum(1) == batch["num_actions"] + len("1 +1\n")).all()
