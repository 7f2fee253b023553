"""The performance harness runs in --quick mode so it cannot rot. Ratios are not asserted: timed
assertions are flaky on shared machines; benchmarks/results.json records them."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from goalrm_core.pipeline.profile_files import load_profile

pytestmark = pytest.mark.slow
HARNESS = Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"


def _harness():
    spec = importlib.util.spec_from_file_location("bench_run", HARNESS)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_quick_harness_writes_every_comparison(tmp_path):
    module = _harness()
    out = tmp_path / "results.json"
    assert module.main(["--quick", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert {"training", "contrastive_overhead", "peak_fraction", "scoring", "online_q", "end_to_end"} <= set(results)
    assert results["training"]["goalrm_tokens_per_s"] > 0
    assert results["scoring"]["max_abs_diff"] < 1e-5  # bucketed and batch-1 scoring agree
    overhead = results["contrastive_overhead"]
    assert overhead["trainer_ratio"]["n"] >= 1 and overhead["step"]["ratio"]["n"] >= 1
    assert set(overhead["step"]["profile"]) == {"vanilla", "contrastive"}
    # the shapes are the profile's, read from params/demo.yaml
    assert results["shapes"]["hidden_size"] == load_profile("demo")["policy_hidden_size"]
    # a threshold that is evaluated stops nothing here, so both runs make the same tokens
    tokens = results["online_q"]["tokens"]
    assert tokens["alone"] == tokens["per_token"] == tokens["chunked"] == tokens["off"]
    assert tokens["stopping"] <= tokens["alone"]  # the median Q stops samples; cut tokens still count
    # the rm_every scan covers reading every token and the sampler's default, in the same loop
    scan = {row["rm_every"]: row for row in results["online_q_rm_every"]}
    assert {1, module.RM_EVERY} <= set(scan) and all(0 < row["stopping_tokens_ratio"] <= 1 for row in scan.values())


def test_performance_table_is_the_committed_results():
    """docs/performance.md's table is generated from benchmarks/results.json (`run.py --doc`)."""
    module = _harness()
    committed = json.loads(module.RESULTS.read_text())
    assert module.table_block(committed) in module.TABLE_DOC.read_text(encoding="utf-8"), (
        "run: python benchmarks/run.py --doc"
    )


def test_step_lever_table_is_the_committed_results():
    """docs/performance.md's lever table is generated from benchmarks/step_levers.json (`step_levers.py --doc`)."""
    spec = importlib.util.spec_from_file_location("bench_levers", HARNESS.parent / "step_levers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = json.loads(module.RESULTS.read_text())
    assert {r["strategy"] for r in committed} == {"vanilla", "contrastive"}
    assert all("default" in r["variants"] and "compile" in r["variants"] for r in committed)
    assert json.loads(module.TRAINER_RESULTS.read_text())["train_s"].keys() == {"eager", "compiled"}
    assert module.committed_block() in module.TABLE_DOC.read_text(encoding="utf-8"), (
        "run: python benchmarks/step_levers.py --doc"
    )


def test_the_b54e8af_pair_table_is_the_committed_results():
    """docs/performance.md's demo and suite rows against b54e8af are generated from benchmarks/pair_b54e8af.json."""
    spec = importlib.util.spec_from_file_location("bench_pair", HARNESS.parent / "pair_b54e8af.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = json.loads(module.RESULTS.read_text())
    demo = committed["demo"]
    assert demo["old"]["commit"] == "b54e8af" and demo["new"]["commit"] != "b54e8af"
    assert demo["ratio_new_over_old"]["total"] == round(demo["new"]["total_s"] / demo["old"]["total_s"], 3)
    if "suite" in committed:  # recorded after the suite's own timing run
        assert committed["suite"]["old"]["commit"] == "b54e8af"
    block = f"{module.BEGIN}\n{module.table(committed)}\n{module.END}"
    assert block in module.DOC.read_text(encoding="utf-8"), "run: python benchmarks/pair_b54e8af.py --doc"


def test_the_padding_table_is_the_committed_results():
    """docs/performance.md's padding table is generated from benchmarks/padding.json, every row's share
    its own token counts."""
    spec = importlib.util.spec_from_file_location("bench_padding", HARNESS.parent / "padding.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = json.loads(module.RESULTS.read_text())
    for row in rows:
        assert row["padding_share"] == round(1 - row["real_tokens"] / row["tokens"], 4), row["name"]
    block = f"{module.BEGIN}\n{module.table(rows)}\n{module.END}"
    assert block in module.DOC.read_text(encoding="utf-8"), "run: python benchmarks/padding.py --doc"


def test_the_real_lm_harness_runs_quick_on_the_twin(tmp_path):
    """benchmarks/real_lm.py --quick on the tiny SmolLM2 twin (converted as the real model is): every lever of
    goalrm's trainer and its plain-loop twin ran, and bucketed scoring agrees with batch 1."""
    from smollm2_twin import write_twin_gguf

    from goalrm_core.model.pretrained import convert_gguf

    write_twin_gguf(tmp_path / "twin.gguf")
    convert_gguf(tmp_path / "twin.gguf", tmp_path / "twin")
    spec = importlib.util.spec_from_file_location("bench_real_lm", HARNESS.parent / "real_lm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "real_lm.json"
    assert module.main(["--quick", "--pretrain", str(tmp_path / "twin"), "--threads", "1", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert set(results["levers"]) == set(module.GOALRM_VARIANTS)
    for name, lever in results["levers"].items():
        assert lever["goalrm_tokens_per_s"]["median"] > 0 and lever["fraction_of_peak"] > 0, name
        assert ("train_tokens_per_s_ratio_vs_plain_loop" in lever) == (name in module.PLAIN_VARIANTS), name
    assert results["scoring"]["max_abs_diff"] < 1e-4 and results["scoring"]["ratio"] > 0
    assert results["shapes"]["layers"] == 2
