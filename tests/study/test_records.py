"""Records of RM seeds: written atomically and compactly, read back checked, pooled only on one set of data; the
primary conclusions computed from them."""

import gzip
import json

import numpy as np
import pytest

from goalrm_core.study import power, records

SOLUTION = "1+2=3\n3+4=7\n#7"  # lines end at tokens 5, 11, 13


def _scored(n_questions=30, n_samples=2, seed=0, signal=1.0):
    """Scored sample rows as eval-rm writes them: the reward tracks correctness by ``signal``."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(n_questions):
        for i in range(n_samples):
            ok = bool((q + i) % 2)
            n = len(SOLUTION)
            q_tok = list(np.linspace(0, 0.5, n) - (0 if ok else 0.2 * (np.arange(n) >= 6)))
            rows.append(
                {
                    "question": f"{q}+1",
                    "sample_index": i,
                    "is_correct": ok,
                    "first_error_step": None if ok else 1,
                    "generated_solution": SOLUTION,
                    "num_actions": n,
                    "policy_mean_logprob": -0.1 * q,
                    "reward": signal * ok + rng.normal(0, 1),
                    "cosine_sim": q_tok,
                    "partial_rewards": list(rng.normal(0, 1, n)),
                }
            )
    return rows


MADE = {"commit": "abc", "data": "d1"}


def test_a_record_round_trips_compactly(tmp_path):
    path = records.write_record(tmp_path, "goal-conditioned", 10, "toy-id", _scored(), MADE, {"steps": 5})
    assert path.name == "goal-conditioned-seed10.json.gz" and not list(tmp_path.glob(".*tmp*"))
    r = records.read_record(path)
    rows = records.as_rows(r)
    assert len(rows) == 60 and rows[0]["question"] == "0+1" and rows[0]["first_error_line"] == 1
    q = _scored()[0]["cosine_sim"]
    assert rows[0]["line_q"] == [round(q[i], 4) for i in (5, 11, 13)]
    assert all(len(x["line_q"]) == 3 and len(x["line_partial"]) == 3 for x in rows)
    assert all(isinstance(v, float) and round(v, 4) == v for x in rows for v in x["line_q"])
    # deterministic bytes: the same rows give the same file
    again = records.write_record(tmp_path / "b", "goal-conditioned", 10, "toy-id", _scored(), MADE, {"steps": 5})
    assert again.read_bytes() == path.read_bytes()


def test_records_of_other_data_do_not_pool(tmp_path):
    records.write_record(tmp_path, "baseline", 10, "toy-id", _scored(), MADE, {})
    records.write_record(tmp_path, "goal-conditioned", 10, "toy-id", _scored(), {**MADE, "data": "d2"}, {})
    with pytest.raises(ValueError, match="field 'made.data' differs"):
        records.read_records(tmp_path)


def test_a_damaged_record_is_one_line(tmp_path):
    path = tmp_path / "baseline-seed1.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"schema": 1, "columns": ["x"], "rows": []}).encode()))
    with pytest.raises(ValueError, match="field 'columns'"):
        records.read_record(path)
    path.write_bytes(b"not gzip")
    with pytest.raises(ValueError, match="not a readable record"):
        records.read_record(path)


def test_primary_conclusions_from_records(tmp_path):
    for seed in (10, 11, 12, 13):
        records.write_record(tmp_path, "baseline", seed, "toy-id", _scored(seed=seed, signal=0.5), MADE, {})
        records.write_record(
            tmp_path, "goal-conditioned", seed, "toy-id", _scored(seed=100 + seed, signal=2.0), MADE, {}
        )
    records.write_record(tmp_path, "baseline", 14, "toy-id", _scored(seed=14), MADE, {})  # unpaired
    out = power.primary_from_records(records.read_records(tmp_path), n_boot=200)
    assert out["rm_seeds"] == [10, 11, 12, 13] and out["unpaired_seeds"]["baseline"] == [14]
    d = out["delta_auroc"]
    assert d["verdict"] in ("holds", "not shown", "reversed", "equivalent") and d["mde"] > 0
    assert d["ci_low"] <= d["mean"] <= d["ci_high"] and d["equivalence_bound"] == power.EQUIVALENCE
    for rm in ("baseline", "goal-conditioned"):
        assert out[rm]["auroc"]["null"] == 0.5 and out[rm]["sd_upper_80"] >= out[rm]["sd"]
        # the synthetic Q falls by 0.2 at the error's line: the DiD sees it
        did = out[rm]["first_error_did"]
        assert did["mean"] == pytest.approx(-0.2, abs=0.01) and did["references"]["same question"] > 0


def test_equivalence_needs_the_whole_interval_inside_the_bound():
    assert power.with_equivalence({"verdict": "not shown", "ci_low": -0.03, "ci_high": 0.04})["verdict"] == "equivalent"
    assert power.with_equivalence({"verdict": "not shown", "ci_low": -0.06, "ci_high": 0.04})["verdict"] == "not shown"
    assert power.with_equivalence({"verdict": "holds", "ci_low": 0.01, "ci_high": 0.04})["verdict"] == "holds"


def test_step_bench_from_records_keeps_intervals_in_range(tmp_path):
    for seed in (10, 11):
        for arm in ("baseline", "goal-conditioned", "prm"):
            records.write_record(tmp_path, arm, seed, "toy-id", _scored(seed=seed + len(arm)), MADE, {})
    out = power.step_bench_from_records(records.read_records(tmp_path), n_boot=100)
    assert set(out["floors"]) == {"first line", "position prior"}
    assert "exact-label PRM partial reward" in out["f1"] and "goal-conditioned Q" in out["f1"]
    for s in out["f1"].values():
        assert 0.0 <= s["ci_low"] <= s["ci_high"] <= 1.0 and s["rm_seeds"] == [10, 11]
