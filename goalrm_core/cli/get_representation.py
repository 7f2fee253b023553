"""``goalrm get-representation``: the official ``get_representation.py`` flags; saves an RM's goal
state (:func:`goalrm_core.inference.goal_state.goal_state_from_pairs`) with its manifest."""

from __future__ import annotations

import argparse
from pathlib import Path

from goalrm_core.choices import GOAL_METHODS
from goalrm_core.cli.reading import add_reading_arguments
from goalrm_core.data import manifest
from goalrm_core.data.io import atomic_path, check_not_an_input, check_output_dir, writer_lock
from goalrm_core.data.preferences import load_source_rows
from goalrm_core.data.rundir import rm_name
from goalrm_core.flags import non_negative_int, positive_int
from goalrm_core.model.templates import TEMPLATES


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="goalrm get-representation", description="Save an RM's goal state (1, hidden) as .npy."
    )
    p.add_argument(
        "--dataset-path",
        "--dataset_path",
        dest="dataset_path",
        required=True,
        help="Preference pairs (question/correct/...): a datasets.save_to_disk folder (its train split, as the "
        "official get_representation.py reads), a .jsonl/.json/.parquet file, or a folder holding train.jsonl.",
    )
    p.add_argument(
        "--reward-model-path",
        "--reward_model_path",
        dest="reward_model_path",
        required=True,
        help="RM saved by goalrm train-rm.",
    )
    p.add_argument(
        "--save-dir",
        "--save_dir",
        dest="save_dir",
        required=True,
        help="Folder for goal_state.npy (1, hidden) and <rm_name>_goal_state_embedding.npy (hidden,), the official "
        "file.",
    )
    p.add_argument(
        "--method", default="mean_last", choices=GOAL_METHODS, help="How the goal is formed (the paper: mean_last)."
    )
    p.add_argument(
        "--template",
        default="math",
        choices=tuple(TEMPLATES),
        help="Prompt template (math: the clean prompt the official script builds).",
    )
    add_reading_arguments(p, "get_representation.py")
    p.add_argument(
        "--max_len",
        type=positive_int,
        default=1024,
        help="Maximum tokens per sequence (the official script cuts at 1024).",
    )
    p.add_argument("--batch_size", type=positive_int, default=32, help="Sequences per forward pass.")
    p.add_argument("--seed", type=non_negative_int, default=0, help="Seed of the random_* methods.")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_output_dir(args.save_dir, "--save-dir")
    check_not_an_input(
        args.save_dir,
        "--save-dir",
        [("--dataset-path", args.dataset_path), ("--reward-model-path", args.reward_model_path)],
        here=False,
    )
    # numpy, torch and transformers, once the flags parse and the output folder is usable
    import numpy as np

    from goalrm_core.inference.forward import keep_feature_cache, load_for_reading, open_feature_cache
    from goalrm_core.inference.goal_state import goal_state_from_pairs
    from goalrm_core.model.reward_model import load_rm_tokenizer

    command = manifest.command_line("goalrm get-representation", argv)
    with writer_lock(args.save_dir, "--save-dir", command):  # one writer at a time
        model = load_for_reading(args.reward_model_path, args.bf16, args.flash_attn, args.device)
        tokenizer = load_rm_tokenizer(args.reward_model_path, model)
        pairs, _ = load_source_rows(args.dataset_path, "train")
        desc = f"reward model {args.reward_model_path}"
        cache = open_feature_cache(model, args.feature_cache_dir, desc)
        goal = goal_state_from_pairs(
            model,
            tokenizer,
            pairs,
            args.template,
            args.method,
            seed=args.seed,
            max_len=args.max_len,
            batch_size=args.batch_size,
            progress=True,
            encoding=args.encoding,
            readout=args.readout,
            feature_cache=cache,
        )
        keep_feature_cache(cache, args.feature_cache_dir, desc)
        save_dir = Path(args.save_dir)
        out, official = (
            save_dir / "goal_state.npy",
            save_dir / f"{rm_name(args.reward_model_path)}_goal_state_embedding.npy",
        )
        # both files written beside their places first: a full disk or a read-only folder fails here, and an
        # earlier finished folder keeps its files and its manifest; the folder is marked unfinished only for the renames
        with atomic_path(out, ".npy") as tmp_out, atomic_path(official, ".npy") as tmp_official:
            np.save(tmp_out, goal)
            np.save(tmp_official, goal[0])
            manifest.begin(save_dir, command)
        dataset = Path(args.dataset_path)
        manifest.finish(
            save_dir,
            {out.name: None, official.name: None},
            command=command,
            inputs=[dataset] if dataset.is_file() else [],
            producer={
                "reward_model_path": str(args.reward_model_path),
                "config_hash": manifest.config_hash(args.reward_model_path),
                "dataset_path": str(dataset),
                "preferred_responses": len(pairs),
                **{
                    k: getattr(args, k)
                    for k in ("method", "template", "encoding", "readout", "bf16", "max_len", "seed")
                },
            },
        )
    print(f"goal state {goal.shape} from {len(pairs)} preferred responses -> {out} (and {official.name})")
    return 0
