"""What the frozen layers' feature cache saves when a second RM scores a benchmark (issue 51's cost lever).

    python scripts/feature_cache_speed.py [--model smollm2-135m|twin] [--rows 8] [--top 2] [--threads 1]

Two RMs of one backbone are made as ``train-rm --train_top_layers N`` saves them (the top N layers and the head
moved away from the backbone's, seeded; the frozen layers as they are), and the first ``--rows`` GSM8K model
solutions of the shared data are one benchmark. ``goalrm eval-rm`` then scores it three times, each timed whole
(loading included): the second RM by the full forward; the first RM with ``--feature_cache_dir`` (the cache is
cold: the frozen layers run once and are kept); the second RM with ``--feature_cache_dir`` (warm: only its top N
layers, norm and head run). The speed-up is the first time over the third; the largest differences between the
first and third runs' rewards, partial rewards and Q-values say how far the cached path is from the full forward.
``scoring_loop_only`` times the scoring alone (the RM loaded and the warm cache opened first), full and cached.
``twin`` is the tests' tiny SmolLM2 twin (2 layers, so N is 1 there). The load average is printed beside each
time: other jobs may share the cores. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def twin_folder(work: Path) -> Path:
    """The tests' SmolLM2 twin, converted as the packaged model is, into ``work``."""
    sys.path.insert(0, str(ROOT / "tests"))
    from smollm2_twin import fake_package, write_twin_gguf

    from goalrm_core.model import pretrained

    write_twin_gguf(work / "twin.gguf")
    sys.path.insert(0, str(work / "site"))
    pretrained.PACKAGED_MODELS["smollm2-135m"] = fake_package(work / "site", work / "twin.gguf")
    os.environ[pretrained.CACHE_ENV] = str(work / "cache")
    return Path(pretrained.resolve_model("smollm2-135m"))


def save_rms(folder: Path, work: Path, top: int) -> list[Path]:
    """Two RMs of the backbone in ``folder``, their top ``top`` layers and heads moved (seeds 1 and 2)."""
    import torch
    from transformers import AutoTokenizer

    from goalrm_core.model.reward_model import RewardModel, save_reward_model
    from goalrm_core.model.top_layers import freeze_lower_layers

    tokenizer = AutoTokenizer.from_pretrained(folder)
    base = RewardModel.from_backbone(str(folder), dtype=torch.float32)
    paths = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        model = copy.deepcopy(base)
        freeze_lower_layers(model, top)
        with torch.no_grad():
            for weight in model.parameters():
                if weight.requires_grad:
                    weight.add_(0.01 * weight.std() * torch.randn_like(weight))
        paths.append(save_reward_model(model, work / f"rm-{seed}", tokenizer))
    return paths


def benchmark(work: Path, rows: int, hidden: int) -> None:
    """The first ``rows`` GSM8K model solutions as benchmark ``gsm8k`` in ``work/gens``, and a goal state."""
    import numpy as np

    from goalrm_core.data.adapters import load_generations
    from goalrm_core.data.io import write_jsonl

    gens = load_generations(ROOT.parent / "shared" / "data" / "gsm8k_example_model_solutions.jsonl").rows[:rows]
    write_jsonl(work / "gens" / "gsm8k" / "greedy.jsonl", gens)
    np.save(work / "goal.npy", np.random.default_rng(0).normal(size=(1, hidden)).astype(np.float32))


def timed_eval(work: Path, rm: Path, out: str, cache: bool) -> dict:
    """One eval-rm of ``rm`` into ``work/out``, timed whole; its scored rows and the load average before it."""
    from goalrm_core.cli.eval_rm import main as eval_rm
    from goalrm_core.data.io import read_jsonl

    argv = ["--completions_data_path", str(work / "gens"), "--reward_model_path", str(rm), "--save_dir"]
    argv += [str(work / out), "--benchmarks", "gsm8k", "--template", "math", "--max_len", "512"]
    argv += ["--goal_state_path", str(work / "goal.npy"), "--batch_size", "8", "--device", "cpu"]
    argv += ["--feature_cache_dir", str(work / "feature-cache")] if cache else []
    load = os.getloadavg()
    t0 = time.perf_counter()
    assert eval_rm(argv) == 0
    seconds = time.perf_counter() - t0
    rows = read_jsonl(work / out / rm.name / "gsm8k" / "greedy" / "output-metrics-dense.jsonl")
    return {"seconds": round(seconds, 2), "load_average": [round(x, 2) for x in load], "rows": rows}


def scoring_only(work: Path, rm: Path) -> dict:
    """The scoring loop alone (the RM loaded, the warm cache opened): full forward against the cached path."""
    import torch

    from goalrm_core.data.io import read_jsonl
    from goalrm_core.inference.forward import load_for_reading, open_feature_cache
    from goalrm_core.inference.scoring import score_generations
    from goalrm_core.model.reward_model import load_rm_tokenizer

    model = load_for_reading(rm, device="cpu")
    tokenizer = load_rm_tokenizer(rm, model)
    rows = read_jsonl(work / "gens" / "gsm8k" / "greedy.jsonl")
    goal = torch.as_tensor(__import__("numpy").load(work / "goal.npy")[0])
    cache = open_feature_cache(model, work / "feature-cache")
    seconds = {}
    for name, features in (("full", None), ("warm", cache)):
        t0 = time.perf_counter()
        score_generations(
            model,
            tokenizer,
            rows,
            "math",
            goal,
            512,
            8,
            progress=False,
            encoding="official",
            readout="last_token",
            feature_cache=features,
        )
        seconds[name] = round(time.perf_counter() - t0, 2)
    return {
        **seconds,
        "speed_up": round(seconds["full"] / seconds["warm"], 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def largest_differences(a: list[dict], b: list[dict]) -> dict[str, float]:
    diff = {"reward": 0.0, "partial_rewards": 0.0, "cosine_sim": 0.0}
    for x, y in zip(a, b):
        diff["reward"] = max(diff["reward"], abs(x["reward"] - y["reward"]))
        for key in ("partial_rewards", "cosine_sim"):
            diff[key] = max(diff[key], max(abs(u - v) for u, v in zip(x[key], y[key])))
    return {k: float(f"{v:.3g}") for k, v in diff.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="smollm2-135m", help="smollm2-135m (the packaged model) or twin")
    p.add_argument("--rows", type=int, default=8, help="GSM8K model solutions in the benchmark")
    p.add_argument("--top", type=int, default=2, help="the layers each RM trained (1 for the twin)")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--keep", action="store_true", help="keep the work folder (the RMs, outputs and cache)")
    args = p.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="feature-cache-speed-"))
    if args.model == "twin":
        folder = twin_folder(work)
    else:
        from goalrm_core.model.pretrained import resolve_model

        folder = Path(resolve_model(args.model))
    first, second = save_rms(folder, work, args.top)
    benchmark(work, args.rows, json.loads((folder / "config.json").read_text())["hidden_size"])
    full = timed_eval(work, second, "full", cache=False)
    cold = timed_eval(work, first, "cold", cache=True)
    warm = timed_eval(work, second, "warm", cache=True)
    tokens = sum(len(r["partial_rewards"]) for r in full["rows"])
    print(
        json.dumps(
            {
                "model": args.model,
                "rows": args.rows,
                "response_tokens": tokens,
                "top_layers": args.top,
                "threads": args.threads,
                **{
                    name: {k: v for k, v in run.items() if k != "rows"}
                    for name, run in (("full", full), ("cold", cold), ("warm", warm))
                },
                "speed_up_warm_over_full": round(full["seconds"] / warm["seconds"], 2),
                "largest_difference_warm_vs_full": largest_differences(full["rows"], warm["rows"]),
                "scoring_loop_only": scoring_only(work, second),
                "work": str(work) if args.keep else None,
            },
            indent=1,
        )
    )
    if not args.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
