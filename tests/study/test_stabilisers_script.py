"""scripts/stabilisers.py (issue 50, item 4) at a tiny scale: the validation draw made from the power run's committed
data snapshot (a dozen questions, two samples each), the goal-conditioned RM trained 4 steps for 2 validation seeds
under each setting, one row each in a table with its curves, the markdown rendered, and a rerun that trains nothing.
Everything is written under tmp (the script's run folder root is redirected there), never under runs/ or reports/."""

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_script(name: str):
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def stabilisers():
    return load_script("stabilisers")


def test_the_curves_are_summarised_from_the_train_rows(stabilisers):
    rows = [
        {
            "step": s,
            "contrastive_loss": 1.0 if s < 90 else 0.5,
            "accuracy": s / 100,
            "hidden_norm": 10.0 + s,
            "hidden_effective_rank": 20.0 - abs(s - 40) / 10,
            "contrastive_beta": 0.5,
        }
        for s in range(5, 101, 5)
    ]
    summary = stabilisers.curve_summary(rows, 100)
    assert summary["final_contrastive_loss"] == 0.5 and summary["final_accuracy"] == 1.0  # the last 5 steps' row
    assert (summary["min_hidden_effective_rank"], summary["min_hidden_effective_rank_step"]) == (14.0, 100)
    assert (summary["first_hidden_effective_rank"], summary["max_hidden_norm"], summary["n_train_rows"]) == (
        16.5,
        110,
        20,
    )
    curves = summary["curves"]
    assert curves["step"] == [9, 17, 25, 34, 42, 50, 59, 67, 75, 84, 92, 100]
    assert all(len(curves[k]) == 12 for k in stabilisers.TRACKED)
    with pytest.raises(ValueError, match="no train rows"):
        stabilisers.curve_summary([], 100)


def test_the_settings_flags_and_the_reported_seeds_are_refused(stabilisers, capsys):
    assert stabilisers.setting_flags("warmup", 2400, 0.25) == {"contrastive_warmup_steps": 600}
    assert stabilisers.setting_flags("stop-goal", 2400, 0.25) == {"contrastive_stop_gradient": "goal"}
    assert stabilisers.setting_flags("none", 2400, 0.25) == {}
    assert set(range(10, 35)) <= stabilisers.reported_seeds()
    with pytest.raises(SystemExit):
        stabilisers.main(["--dry-run", "--seeds", "0", "10"])
    assert "--seeds [10] are reported RM seeds" in capsys.readouterr().err


@pytest.mark.slow
def test_a_tiny_study_prepares_trains_records_renders_and_resumes(stabilisers, tmp_path, monkeypatch, capsys):
    import calibrate_confident

    from goalrm_core.data.io import read_jsonl

    monkeypatch.setattr(calibrate_confident, "ROOT", tmp_path)  # its run folders: under tmp, not runs/
    run_dir = tmp_path / "runs" / "calibration" / "confident" / "val-tiny"
    table = tmp_path / "stabilisers.jsonl"
    argv = [
        *("--run_dir", str(run_dir), "--name", "tiny", "--seeds", "0", "1", "--table", str(table)),
        *("--questions", "12", "--samples", "2", "--pair_questions", "40", "--n_slip_questions", "30"),
        *("--n_boot", "20", "--threads", "2", "--"),
        *("--max_steps", "4", "--train_batch_size", "4", "--micro_train_batch_size", "4", "--logging_steps", "1"),
        *("--torch_compile", "false", "--max_len", "96"),
    ]
    assert stabilisers.main([*argv[: argv.index("--")], "--dry-run", *argv[argv.index("--") :]]) == 0
    out = capsys.readouterr().out
    assert "to be made" in out and "6 RMs to train, 2 side by side: about" in out and not table.exists()

    assert stabilisers.main(argv) == 0
    rows = read_jsonl(table)
    # seeds in groups of --parallel, each group under every setting in turn
    assert [(r["setting"], r["seed"]) for r in rows] == [
        (s, seed) for s in ("none", "warmup", "stop-goal") for seed in (0, 1)
    ]
    assert len({r["rm_key"] for r in rows}) == 6
    for r in rows:
        assert r["flags"] == {"none": {}, "warmup": {"contrastive_warmup_steps": 1}}.get(
            r["setting"], {"contrastive_stop_gradient": "goal"}
        )
        assert r["n_eval_rows"] == 24 and r["n_train_rows"] == 4 and r["final_contrastive_beta"] == 0.5
        assert r["auroc"] is None or 0 <= r["auroc"] <= 1
        for key in ("final_contrastive_loss", "final_accuracy", "final_hidden_norm", "final_hidden_effective_rank"):
            assert math.isfinite(r[key]), key
        assert 1 <= r["min_hidden_effective_rank"] <= r["first_hidden_effective_rank"] <= 128  # the policy's width
        assert r["curves"]["step"] == [1, 2, 3, 4] and r["run_dir"] == str(run_dir)
        assert r["recipe"]["max_steps"] == 4 and r["data"]["source"] == "confident+slips"
    warm = next(r for r in rows if r["setting"] == "warmup")
    assert warm["curves"]["contrastive_loss"][0] == 0.0  # β = 0 on the first step
    assert (run_dir / "policy-row.jsonl").is_file()  # the validation draw's policy row, beside its run
    markdown = table.with_suffix(".md").read_text()
    assert "## tiny" in markdown and all(f"| {s} |" in markdown for s in ("none", "warmup", "stop-goal"))

    capsys.readouterr()
    assert stabilisers.main(argv) == 0  # a rerun: every row is there, nothing trains
    assert "every row is in" in capsys.readouterr().out and len(read_jsonl(table)) == 6
    other = [a if a != "4" else "3" for a in argv]  # the same name with another recipe is refused in one line
    assert stabilisers.main(other) == 2
    assert "one name is one study; give another --name" in capsys.readouterr().err
    assert json.loads(table.read_text().splitlines()[0])["name"] == "tiny"
