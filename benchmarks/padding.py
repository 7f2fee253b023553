"""Padding in the RM trainer's real batches: the share of pad tokens per optimiser step, read through the
trainer's own data path (``train.batching.load_items`` tokenises as the trainer does, ``epoch_batches``
orders the micro-batches with ``group_by_length`` on or off, ``PreferenceCollator`` pads each micro-batch's
chosen and rejected rows to its longest row). No model runs: padding depends on the data, the order and
the micro-batch size only.

    python benchmarks/padding.py --run_dir runs/smoke --profile demo --name smoke-pairs

appends one row per ordering to ``benchmarks/padding.json`` (the profile's RM micro-batch and steps;
the pairs of ``--run_dir``'s data stage), and ``python benchmarks/padding.py --doc`` writes
docs/performance.md's table from it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from goalrm_core.model.encoding import PreferenceCollator  # noqa: E402
from goalrm_core.pipeline.profile_files import load_profile  # noqa: E402
from goalrm_core.study.recipe import notebook_recipe  # noqa: E402
from goalrm_core.study.training import rm_config  # noqa: E402
from goalrm_core.train.batching import epoch_batches, item_length, load_items, load_tokenizer  # noqa: E402

RESULTS = ROOT / "benchmarks" / "padding.json"
DOC = ROOT / "docs" / "performance.md"
BEGIN = (
    "<!-- begin: generated from benchmarks/padding.json by `python benchmarks/padding.py --doc`; "
    "do not edit by hand -->"
)
END = "<!-- end: generated from benchmarks/padding.json -->"


def table(rows: list[dict]) -> str:
    """One line per measured set of pairs: its padding with the trainer's default order (grouped by
    length) and without it."""
    lines = [
        "| pairs | profile's RM recipe | steps x pairs | padding, grouped by length (default) | padding, shuffled |",
        "|---|---|---|---|---|",
    ]
    by_name: dict[str, dict[bool, dict]] = {}
    for row in rows:
        by_name.setdefault(row["name"], {})[row["group_by_length"]] = row
    for name, pair in by_name.items():
        any_row = next(iter(pair.values()))
        shown = [
            f"{pair[g]['padding_share']:.1%} of {pair[g]['tokens']:,} tokens" if g in pair else "not measured"
            for g in (True, False)
        ]
        lines.append(
            f"| {name} ({any_row['n_pairs']:,} pairs) | {any_row['profile']} | "
            f"{any_row['steps']} x {any_row['train_batch_size']} "
            f"(micro-batches of {any_row['micro_train_batch_size']}) | {shown[0]} | {shown[1]} |"
        )
    return "\n".join(lines)


def padding_of(items: list[dict], batches: list[list[int]], micro: int, pad_id: int) -> dict:
    """Real and padded tokens over ``batches`` (each split into micro-batches of ``micro`` pairs, as one
    rank of the trainer sees them)."""
    collate = PreferenceCollator(pad_id)
    real = padded = 0
    for batch in batches:
        for start in range(0, len(batch), micro):
            out = collate([items[i] for i in batch[start : start + micro]])
            real += int(out["attention_mask"].sum())
            padded += int(out["attention_mask"].numel())
    return {"real_tokens": real, "tokens": padded, "padding_share": round(1 - real / padded, 4) if padded else None}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run_dir", help="a run whose data stage wrote preference pairs and the policy")
    p.add_argument(
        "--profile", default="demo", help="the profile whose RM recipe (batch, micro-batch, steps) is measured"
    )
    p.add_argument("--name", help="label of the rows")
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--doc", action="store_true", help="write docs/performance.md's table from the results")
    args = p.parse_args(argv)
    if args.doc:
        from goalrm_core.generated_block import update_file

        update_file(DOC, BEGIN, END, f"{BEGIN}\n{table(json.loads(args.results.read_text()))}\n{END}", write=True)
        return 0
    if not (args.run_dir and args.name):
        p.error("--run_dir and --name are needed to measure (or --doc to write the table)")

    values = load_profile(args.profile)
    recipe = notebook_recipe(values)
    with tempfile.TemporaryDirectory() as tmp:  # notebook 02's config of the baseline RM, seed 0
        cfg = rm_config(recipe, args.run_dir, "baseline", 0, out_root=tmp)
        tokenizer = load_tokenizer(cfg)
        items, _, _ = load_items(cfg, tokenizer, say=lambda line: None)
    lengths = [item_length(it) for it in items]
    per_pass = cfg.train_batch_size  # one process: the global batch is its micro-batches
    steps_per_epoch = len(items) // per_pass
    rows = []
    for grouped in (True, False):
        batches = []
        epoch = 0
        while len(batches) < cfg.max_steps:
            batches += epoch_batches(lengths, epoch, cfg.seed, per_pass, steps_per_epoch, grouped)
            epoch += 1
        figures = padding_of(items, batches[: cfg.max_steps], cfg.micro_train_batch_size, tokenizer.pad_token_id)
        rows.append(
            {
                "name": args.name,
                "profile": args.profile,
                "run_dir": str(args.run_dir),
                "group_by_length": grouped,
                "n_pairs": len(items),
                "steps": cfg.max_steps,
                "train_batch_size": cfg.train_batch_size,
                "micro_train_batch_size": cfg.micro_train_batch_size,
                "max_len": cfg.max_len,
                **figures,
            }
        )
        print(
            f"{args.name} group_by_length={grouped}: {figures['padding_share']:.1%} of {figures['tokens']:,} "
            f"tokens are padding "
            f"({cfg.max_steps} steps of {cfg.train_batch_size} pairs, micro-batches of {cfg.micro_train_batch_size})"
        )
    old = json.loads(args.results.read_text()) if args.results.exists() else []
    args.results.write_text(json.dumps(old + rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
