"""``goalrm eval-rm``: the official ``eval_rm.py`` flags, scored by
:func:`goalrm_core.inference.scoring.eval_rm`. Data-parallel scoring runs this module on every
process: ``torchrun --nproc_per_node N -m goalrm_core.inference.scoring <eval-rm flags>``."""

from __future__ import annotations

import argparse
import sys

from goalrm_core.choices import GOAL_ROWS
from goalrm_core.cli.reading import add_reading_arguments
from goalrm_core.data import manifest
from goalrm_core.flags import finite_float, non_negative_int, path_part, positive_int, run_command
from goalrm_core.model.templates import TEMPLATES


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="goalrm eval-rm", description="Score generations densely with a reward model.")
    p.add_argument(
        "--completions_data_path", required=True, help="Folder with one sub-folder of generations per benchmark."
    )
    p.add_argument(
        "--reward_model_path",
        required=True,
        help="RM saved by goalrm train-rm, or by the official train_rm.py (its format is detected).",
    )
    p.add_argument("--goal_state_path", help="goal_state.npy from goalrm get-representation (not with --vanilla).")
    p.add_argument(
        "--save_dir",
        required=True,
        help="Output root: <save_dir>/<rm_name>/<bench>/{greedy,all}/output-metrics-dense.jsonl "
        "(rm_name: the last component of --reward_model_path) and <save_dir>/<rm_name>/eval_rm.json.",
    )
    p.add_argument(
        "--filter_threshold",
        type=finite_float,
        default=0.0,
        help="Q-value threshold of the filtered majority vote. Not applied here (every generation is scored): "
        "recorded in <save_dir>/eval_rm.json; `goalrm metrics --filter_threshold` applies it, as the official "
        "metrics.py does (the official eval_rm.py parses it and never uses it).",
    )
    p.add_argument("--benchmarks", nargs="+", required=True, type=path_part, help="Benchmark folder names.")
    p.add_argument("--vanilla", action="store_true", help="Skip the Q-values (baseline RM).")
    p.add_argument(
        "--goal_rows",
        default="one",
        choices=GOAL_ROWS,
        help="A goal state file of several rows: one (refused: one goal per file) or mean (averaged over its rows, "
        "as the official eval_rm.py does).",
    )
    p.add_argument(
        "--template",
        default="nemo",
        choices=tuple(TEMPLATES),
        help="Prompt template (nemo: the official eval_rm.py's literal).",
    )
    add_reading_arguments(p, "eval_rm.py")
    p.add_argument("--batch_size", type=positive_int, default=32, help="Sequences per forward pass.")
    p.add_argument(
        "--max_len",
        type=non_negative_int,
        default=2048,
        help="Maximum tokens per sequence, cut from the right; 0 = none cut (the official eval_rm.py: the "
        "tokenizer's own limit).",
    )
    p.add_argument(
        "--max_samples", type=non_negative_int, default=0, help="Score at most this many rows per file (0 = all)."
    )
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    parser.add_argument("--local_rank", type=int, default=-1, help=argparse.SUPPRESS)  # set by the deepspeed launcher
    args = parser.parse_args(argv)
    from goalrm_core.inference.scoring import eval_rm  # torch and the model, once the flags parse

    counts = eval_rm(
        args.completions_data_path,
        args.reward_model_path,
        args.save_dir,
        args.benchmarks,
        args.goal_state_path,
        args.vanilla,
        template=args.template,
        batch_size=args.batch_size,
        max_len=args.max_len,
        max_samples=args.max_samples,
        filter_threshold=args.filter_threshold,
        encoding=args.encoding,
        readout=args.readout,
        bf16=args.bf16,
        flash_attn=args.flash_attn,
        device=args.device,
        goal_rows=args.goal_rows,
        feature_cache_dir=args.feature_cache_dir,
        command=manifest.command_line("goalrm eval-rm", argv),
    )
    for bench, splits in counts.items():
        if splits:
            print(bench, scored_line(splits))
    return 0


def scored_line(splits: dict[str, int]) -> str:
    """What one benchmark's scoring wrote, by file: ``greedy: 4 rows scored, all: 12 rows (8 samples scored, 4
    greedy rows)``. ``all/`` holds the greedy rows first, as the official layout does, then the samples: only
    the samples are scored there (the greedy rows are ``greedy/``'s scores).

    >>> scored_line({"greedy": 4, "all": 8})
    'greedy: 4 rows scored, all: 12 rows (8 samples scored, 4 greedy rows)'
    >>> scored_line({"all": 8})
    'all: 8 rows (8 samples scored)'
    """
    parts = []
    for split, n in splits.items():
        if split == "all":
            greedy = splits.get("greedy", 0)
            parts.append(
                f"all: {n + greedy} rows ({n} sample{'s' if n != 1 else ''} scored"
                + (f", {greedy} greedy row{'s' if greedy != 1 else ''})" if greedy else ")")
            )
        else:
            parts.append(f"{split}: {n} row{'s' if n != 1 else ''} scored")
    return ", ".join(parts)


if __name__ == "__main__":
    sys.exit(run_command(main, sys.argv[1:], "goalrm eval-rm"))
