"""A tiny run folder in a second or two: a randomly initialised character-level Llama as the policy and a
dozen ToyMath preference pairs, in the one run-directory layout (:class:`~goalrm_core.data.rundir.RunDir`)::

    <folder>/data/policy/                   the policy and its tokenizer (``--pretrain``)
    <folder>/data/preference/train.jsonl    preference pairs (``--dataset``)
    <folder>/data/preference/eval.jsonl     held-out pairs (``--eval_dataset``)

It is what someone extending goalrm trains one step on (``goalrm tiny-run <folder>``, then
:func:`train_command`'s ``goalrm train-rm``; docs/design.md, "Adding a loss variant"), and what the tests
build their tiny policy and pairs with. Nothing is downloaded and nothing is trained here: the policy's
weights are its seed's initialisation, the pairs are digit-chain questions with one step slipped in the
rejected solution (:func:`~goalrm_core.tasks.toymath.verify_data.slip_pairs`). The same seed makes the same
bytes on the same machine.

The folder is written beside its target under a temporary name and renamed into place when complete, so a
failed or interrupted call leaves no half-written run folder; a target that exists and is not an empty folder
is refused in one line.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from pathlib import Path

from goalrm_core.data.rundir import RunDir

# The policy's size: the tests' ``tiny_config`` (tests/conftest.py) is this config, so a test that builds a
# model of its own matches the policy's shapes.
HIDDEN_SIZE, NUM_LAYERS, NUM_HEADS, MAX_POSITIONS = 32, 2, 4, 256
TRAIN_PAIRS, EVAL_PAIRS = 8, 4
# Digit chains of one or two steps: short responses, every fact a single-digit one.
MODULUS = 10


def tiny_policy_config(tokenizer):
    """The tiny policy's ``LlamaConfig`` for ``tokenizer`` (the character tokenizer)."""
    from goalrm_core.model.reward_model import tiny_llama_config

    return tiny_llama_config(
        len(tokenizer),
        hidden_size=HIDDEN_SIZE,
        num_layers=NUM_LAYERS,
        num_heads=NUM_HEADS,
        max_position_embeddings=MAX_POSITIONS,
    )


def tiny_pairs(n: int, seed: int = 0) -> list[dict]:
    """``n`` preference pairs ``{question, correct, incorrect, first_error_char}`` drawn from ``seed``: a
    digit-chain question (one or two steps, mod 10), its reference solution, and the same solution with one
    step's result changed and carried through."""
    from goalrm_core.tasks.toymath.problems import ToyMathConfig, generate_problems
    from goalrm_core.tasks.toymath.verify_data import slip_pairs

    cfg = ToyMathConfig(
        min_steps=1, max_steps=2, operand_min=1, operand_max=MODULUS - 1, operations="+-", modulus=MODULUS
    )
    return slip_pairs(generate_problems(cfg, n, seed), per_question=1, modulus=MODULUS, seed=seed)


def check_target(folder: str | os.PathLike) -> Path:
    """``folder`` as a path when a tiny run may be made there (it does not exist, or is an empty folder);
    else a one-line ``ValueError``."""
    target = Path(folder)
    if target.exists() or target.is_symlink():
        if not target.is_dir():
            raise ValueError(f"{target} exists and is not a folder: give a new or empty folder for the tiny run")
        if any(target.iterdir()):
            raise ValueError(
                f"{target} is not empty: give a new or empty folder for the tiny run (nothing was written)"
            )
    return target


def make_tiny_run(
    folder: str | os.PathLike, seed: int = 0, train_pairs: int = TRAIN_PAIRS, eval_pairs: int = EVAL_PAIRS
) -> RunDir:
    """Write a tiny run folder at ``folder`` (new, or an empty folder) and return its :class:`RunDir`: the
    policy (random weights from ``seed``) with the character tokenizer, and ``train_pairs`` + ``eval_pairs``
    preference pairs drawn from ``seed``. Written under a temporary name beside ``folder`` and renamed into
    place, so ``folder`` is either complete or untouched."""
    if seed < 0 or train_pairs < 1 or eval_pairs < 1:
        raise ValueError(f"seed must be >= 0, train_pairs and eval_pairs >= 1, got {seed}, {train_pairs}, {eval_pairs}")
    target = check_target(folder)
    import torch
    from transformers import LlamaForCausalLM

    from goalrm_core.data.io import UMASK, write_jsonl
    from goalrm_core.model.tokenization import build_char_tokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        os.chmod(tmp, 0o777 & ~UMASK)  # mkdtemp makes 0700; a run folder is meant to be shared
        run = RunDir(tmp)
        tokenizer = build_char_tokenizer()
        with torch.random.fork_rng(devices=[]):  # the caller's random state stays as it was
            torch.manual_seed(seed)
            policy = LlamaForCausalLM(tiny_policy_config(tokenizer))
        policy.save_pretrained(run.policy)
        tokenizer.save_pretrained(run.policy)
        pairs = tiny_pairs(train_pairs + eval_pairs, seed)
        write_jsonl(run.preference_pairs("train"), pairs[:train_pairs])
        write_jsonl(run.preference_pairs("eval"), pairs[train_pairs:])
        try:
            os.rename(tmp, target)  # onto a missing or empty folder; atomic on one file system
        except OSError as error:  # something appeared at the target meanwhile
            raise ValueError(
                f"{target} could not be written ({error.strerror}): give a new or empty folder for the tiny run"
            ) from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return RunDir(target)


def train_command(folder: str | os.PathLike, save_path: str | os.PathLike | None = None, *more: str) -> list[str]:
    """The ``goalrm train-rm`` command line that trains one step of a tiny RM on the tiny run at ``folder``
    (into ``<folder>/models/tiny-seed0`` unless ``save_path``), ``more`` flags appended.

    >>> " ".join(train_command("/tmp/tiny")[:4])
    'goalrm train-rm --pretrain /tmp/tiny/data/policy'
    """
    run = RunDir(folder)
    return [
        "goalrm",
        "train-rm",
        "--pretrain",
        str(run.policy),
        "--dataset",
        str(run.preference_pairs("train")),
        "--eval_dataset",
        str(run.preference_pairs("eval")),
        "--template",
        "toymath",
        "--max_len",
        "64",
        "--train_batch_size",
        "4",
        "--micro_train_batch_size",
        "4",
        "--max_steps",
        "1",
        "--save_path",
        str(save_path if save_path is not None else run.model("tiny")),
        *more,
    ]


def describe(run: RunDir) -> str:
    """What :func:`make_tiny_run` wrote and the command that trains one step on it."""
    return (
        f"wrote a tiny run: {run.policy} (policy, random weights), {run.preference_pairs('train')} and "
        f"{run.preference_pairs('eval')} (pairs)\none training step: {shlex.join(train_command(run.root))}"
    )
