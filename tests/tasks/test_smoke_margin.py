"""The smoke-margin script's counting and tables on hand-made rows (no training), and the records
committed under reports/calibration/ still describe params/smoke.yaml."""

import importlib.util

import pytest

from goalrm_core.paths import project_root
from goalrm_core.pipeline.profile_files import load_profile

_spec = importlib.util.spec_from_file_location("smoke_margin", project_root() / "scripts" / "smoke_margin.py")
sm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sm)


def _record(seed, threads, headline, acc=0.5, wall=10.0, **profile):
    return {
        "seed": seed,
        "threads": threads,
        "headline": headline,
        "wall_s": wall,
        "sample_accuracy": {b: acc for b in headline},
        "greedy_accuracy": {b: 1.0 for b in headline},
        "profile": {"n_benchmark_questions": 5, "sampling_temperature": 2.0, **profile},
    }


def _counts(correct, incorrect):
    return {"correct": correct, "incorrect": incorrect}


def test_headline_counts_read_only_the_first_sample_of_each_question():
    rows = [
        {"question": "1 +2", "sample_index": 0, "is_correct": True},
        {"question": "1 +2", "sample_index": 1, "is_correct": False},
        {"question": "3 -1", "sample_index": 0, "is_correct": False},
        {"question": "3 -1", "sample_index": 1, "is_correct": True},
        {"question": "4 +4", "sample_index": 0, "is_correct": False},
    ]
    assert sm.headline_counts(rows) == {"correct": 1, "incorrect": 2}
    assert sm.headline_counts([]) == {"correct": 0, "incorrect": 0}
    assert sm.accuracy(rows) == pytest.approx(2 / 5)


def test_summary_takes_min_max_and_the_smallest_minority_per_benchmark():
    records = [
        _record(0, 1, {"toy-id": _counts(2, 3), "toy-zero": _counts(5, 0)}),
        _record(0, 2, {"toy-id": _counts(4, 1), "toy-zero": _counts(1, 4)}),
    ]
    s = sm.summary(records)
    assert list(s) == ["toy-id", "toy-zero"]  # first-seen order
    assert s["toy-id"] | {} == {
        "runs": 2,
        "correct_min": 2,
        "correct_max": 4,
        "incorrect_min": 1,
        "incorrect_max": 3,
        "minority_min": 1,
        "correct_mean": 3.0,
        "correct_sd": 1.0,
    }
    assert s["toy-zero"]["minority_min"] == 0  # one run held one class only
    assert sm.min_minority(records) == 0
    assert sm.min_minority(records, ["toy-id"]) == 1
    assert sm.min_minority(records[1:]) == 1


def test_tables_have_one_line_per_run_and_per_benchmark():
    records = [
        _record(1, 2, {"toy-id": _counts(3, 2)}, acc=0.25, wall=12.4),
        _record(0, 1, {"toy-id": _counts(2, 3)}, acc=0.5, wall=9.6),
    ]
    runs = sm.runs_table(records).splitlines()
    assert runs[0] == "| seed | threads | toy-id c/i | toy-id sampled | toy-id greedy | wall s |"
    assert runs[2] == "| 0 | 1 | 2/3 | 50.0% | 100.0% | 10 |"  # sorted by seed, then threads
    assert runs[3] == "| 1 | 2 | 3/2 | 25.0% | 100.0% | 12 |"
    summary = sm.summary_table(records).splitlines()
    assert len(summary) == 3 and summary[2] == "| toy-id | 2 | 2-3 | 2-3 | 2.5 (0.5) | 2 | 25%-50% |"


def test_readme_section_is_replaced_between_its_markers_and_appended_once():
    records = [_record(0, 1, {"toy-id": _counts(2, 3)})]
    new = sm.section(records)
    assert new.startswith(sm.BEGIN) and new.rstrip().endswith(sm.END)
    assert "Smallest minority class seen on `toy-id`: 2**, on any benchmark: 2" in new
    page = sm.replace_section("# Calibration\n\nintro\n", new)
    assert page.startswith("# Calibration\n\nintro\n\n" + sm.BEGIN)
    again = sm.replace_section(page + "\n## After\n", sm.section([_record(0, 1, {"toy-id": _counts(1, 4)})]))
    assert again.count(sm.BEGIN) == 1 and again.count(sm.END) == 1
    assert "`toy-id`: 1**" in again and again.endswith("## After\n")


def test_stale_keys_name_what_changed_and_mixed_records_are_refused():
    profile = {"n_benchmark_questions": 5, "sampling_temperature": 2.0}
    records = [_record(0, 1, {"toy-id": _counts(2, 3)}), _record(1, 2, {"toy-id": _counts(2, 3)})]
    assert sm.stale_keys(profile, records) == {}
    assert sm.stale_keys(profile | {"sampling_temperature": 1.5}, records) == {"sampling_temperature": (1.5, 2.0)}
    with pytest.raises(ValueError, match="different profiles"):
        sm.profile_values(records + [_record(2, 1, {"toy-id": _counts(2, 3)}, sampling_temperature=1.0)])


def test_committed_records_describe_the_smoke_profile():
    """reports/calibration/smoke-margin.jsonl was made with params/smoke.yaml's data-stage values, over
    seeds 0-4 and 1 and 2 threads: change the profile and rerun the script, or this fails."""
    records = sm.read_records(sm.RECORDS)
    assert sm.stale_keys(load_profile("smoke"), records) == {}, "rerun python scripts/smoke_margin.py"
    assert {(r["seed"], r["threads"]) for r in records} == {(s, t) for s in sm.SEEDS for t in sm.THREADS}
    assert sm.min_minority(records, [sm.TESTED]) >= 5  # the margin the smoke tests rely on
    assert sm.BEGIN in sm.README.read_text() and sm.section(records) in sm.README.read_text()


def test_thread_invariance_and_thin_sets_are_reported():
    a = _record(0, 1, {"toy-id": _counts(2, 3), "toy-unseen": _counts(1, 4)})
    b = _record(0, 2, {"toy-id": _counts(2, 3), "toy-unseen": _counts(1, 4)})
    assert sm.thread_invariant([a]) is None  # no seed ran under two thread counts
    assert sm.thread_invariant([a, b]) is True
    assert sm.thread_invariant([a, b | {"headline": {"toy-id": _counts(3, 2), "toy-unseen": _counts(1, 4)}}]) is False
    note = sm.thin_note([a, b], floor=2)
    assert (
        note == " Fewer than 2 of a class: `toy-unseen` 1 (seed 0, 1 thread; greedy 100%), "
        "`toy-unseen` 1 (seed 0, 2 threads; greedy 100%)."
    )
    assert sm.thin_note([a], floor=1) == ""
    assert "bit-identical" in sm.section([a, b]) and "bit-identical" not in sm.section([a])
