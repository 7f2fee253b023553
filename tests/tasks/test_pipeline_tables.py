"""Notebook 01's tables and sentences from hand-built frames: the length claim follows the interval,
and nothing shown is a repr."""

import pandas as pd

from goalrm_core.tasks.toymath import pipeline as tp
from goalrm_core.tasks.toymath import problems as toymath
from goalrm_core.tasks.toymath.policy import PolicyConfig


def frame(bench, correct_lengths, incorrect_lengths):
    rows = [{"benchmark": bench, "is_correct": True, "length": n} for n in correct_lengths]
    rows += [{"benchmark": bench, "is_correct": False, "length": n} for n in incorrect_lengths]
    return pd.DataFrame(rows)


def test_length_claim_follows_the_interval_of_the_difference():
    samples = pd.concat(
        [
            frame("toy-id", [20, 21, 22, 20, 21], [30, 31, 29, 30, 32]),  # clearly longer
            frame("toy-zero", [25, 27, 26, 24], [25, 26, 27, 24]),  # no difference
            frame("toy-times", [30, 31, 32, 30], [20, 21, 19, 20]),  # shorter
            frame("toy-unseen", [25, 26], [30]),
        ]
    )  # one incorrect sample
    lengths = tp.length_table(samples)
    assert list(lengths["benchmark"]) == ["toy-id", "toy-zero", "toy-times", "toy-unseen"]
    row = lengths.set_index("benchmark").loc["toy-id"]
    assert row["length_difference"] == row["incorrect_len_mean"] - row["correct_len_mean"]
    assert row["length_difference_ci_low"] < row["length_difference"] < row["length_difference_ci_high"]
    sentence = tp.length_sentence(lengths)
    assert "toy-id: incorrect samples are longer" in sentence
    assert "toy-zero: no length difference resolved" in sentence
    assert "toy-times: incorrect samples are shorter" in sentence
    assert "toy-unseen: too few samples" in sentence


def test_settings_table_has_no_reprs():
    table = tp.config_table(toymath.ToyMathConfig(), PolicyConfig())
    assert list(table.columns) == ["setting", "value"]
    assert not table["value"].str.contains("Config\\(").any()


def test_pair_sentence_names_every_count():
    stats = {
        "n_sampled_questions": 600,
        "sample_accuracy": 0.5,
        "n_questions": 400,
        "n_pairs": 700,
        "n_train": 630,
        "n_eval": 70,
    }
    s = tp.pair_sentence(stats)
    assert all(f"{v:,}" in s for v in (600, 400, 700, 630, 70)) and "50.0%" in s and "{" not in s


def test_pair_sentence_of_second_generator_pairs():
    stats = {
        "n_sampled_questions": 600,
        "n_questions": 600,
        "n_pairs": 1200,
        "n_train": 1080,
        "n_eval": 120,
        "source": "slips",
    }
    s = tp.pair_sentence(stats)
    assert all(f"{v:,}" in s for v in (600, 1200, 1080, 120)) and "slip" in s and "{" not in s
