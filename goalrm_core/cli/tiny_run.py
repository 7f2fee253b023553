"""``goalrm tiny-run <folder>``: a tiny run folder in seconds, a random tiny policy and a dozen preference pairs
(:mod:`goalrm_core.tasks.toymath.tiny_run`), to train one step of an RM on (it prints the ``goalrm train-rm``
command that does). The folder must be new or empty; torch loads only once the flags and the folder pass."""

from __future__ import annotations

import argparse

from goalrm_core.flags import Range


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="goalrm tiny-run",
        description="Make a tiny run folder: a randomly initialised tiny "
        "policy (data/policy) and ToyMath preference pairs (data/preference/{train,eval}.jsonl).",
    )
    p.add_argument("folder", help="The run folder to make: a new folder, or an empty one.")
    p.add_argument("--seed", type=Range(int, ">= 0"), default=0, help="Seed of the policy's weights and of the pairs.")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # the folder is checked before torch loads: a non-empty one is refused at once
    from goalrm_core.tasks.toymath.tiny_run import check_target

    check_target(args.folder)
    from goalrm_core.tasks.toymath.tiny_run import describe, make_tiny_run

    print(describe(make_tiny_run(args.folder, seed=args.seed)))
    return 0
