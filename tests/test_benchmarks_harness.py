"""The performance harness runs in --quick mode so it cannot rot. Ratios are not asserted: timed
assertions are flaky on shared machines; benchmarks/results.json records them."""

import importlib.util
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
HARNESS = Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"


def test_quick_harness_writes_every_comparison(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_run", HARNESS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "results.json"
    assert module.main(["--quick", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert {"training", "contrastive_overhead", "scoring", "end_to_end"} <= set(results)
    assert results["training"]["goalrm_tokens_per_s"] > 0
    assert results["scoring"]["max_abs_diff"] < 1e-5  # bucketed and batch-1 scoring agree
    assert results["contrastive_overhead"]["ratio"]["n"] >= 1
