"""``goalrm decode {beam,sample}``: Q-guided beam search, or N samples pruned online by Q, on a jsonl of
questions. With the ToyMath template each row is judged too (predicted_answer, is_correct).

A module of its own: it needs the inference layer and the ToyMath verdicts, not the notebook's
run-directory study (``study.decoding``) and its plotting.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from goalrm_core.data.io import ArtifactError, check_not_an_input, check_output_dir, load_npy, read_jsonl, write_jsonl
from goalrm_core.evaluation.voting import SKIP_FIRST
from goalrm_core.flags import Range, add_field_flag, finite_float, non_negative_int, positive_int
from goalrm_core.inference.decode_config import DecodeConfig
from goalrm_core.model.pretrained import packaged_names_help, resolve_model
from goalrm_core.model.templates import TEMPLATES, apply_template

#: the search's settings that sample mode reads as well
_SHARED = ("temperature", "max_new_tokens", "seed")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="goalrm decode", description="Q-guided beam search, or sampling with online Q-pruning."
    )
    p.add_argument(
        "mode", choices=("beam", "sample"), help="beam: Q-guided beam search; sample: N samples, pruned online by Q."
    )
    p.add_argument(
        "--policy_path", required=True, help=f"Causal LM (HF layout) that generates. {packaged_names_help()}"
    )
    p.add_argument(
        "--reward_model_path", required=True, help="RM saved by goalrm train-rm (shares the policy's tokenizer)."
    )
    p.add_argument("--goal_state_path", required=True, help="goal_state.npy from goalrm get-representation.")
    p.add_argument("--questions_path", required=True, help="jsonl with a 'question' field per row.")
    p.add_argument("--save_path", required=True, help="Output jsonl.")
    p.add_argument("--template", default="toymath", choices=tuple(TEMPLATES), help="Prompt template used in training.")
    p.add_argument(
        "--max_questions",
        type=Range(int, ">= 0", note="0 = all"),
        default=0,
        help="Decode at most this many questions (0 = all).",
    )
    p.add_argument(
        "--modulus",
        type=Range(int, ">= 0", note="0 = exact results"),
        default=0,
        help="toymath: 10 for digit chains (results mod 10), 0 for exact results.",
    )
    # the search's settings are DecodeConfig's fields (their help and range); sample mode reads three of them
    for f in dataclasses.fields(DecodeConfig):
        add_field_flag(p, f, help_prefix="" if f.name in _SHARED else "beam mode: ")
    p.add_argument("--n_samples", type=positive_int, default=8, help="sample mode: samples per question.")
    p.add_argument(
        "--prune_threshold", type=finite_float, default=None, help="sample mode: stop a sample when Q falls below this."
    )
    p.add_argument(
        "--skip_first",
        type=non_negative_int,
        default=SKIP_FIRST,
        help="sample mode: never stop before this response token.",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # the models (torch, transformers) load once the flags parse
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from goalrm_core.inference.beam_search import q_guided_decode
    from goalrm_core.inference.goal_state import check_goal_state_owner
    from goalrm_core.inference.pruning import PruneConfig
    from goalrm_core.inference.sampler import check_decoding_inputs, sample
    from goalrm_core.model.reward_model import (
        check_tokenizer_folder,
        check_weights_folder,
        load_reward_model,
        load_rm_tokenizer,
    )
    from goalrm_core.tasks.toymath.verdicts import judge

    if Path(args.save_path).is_dir():
        raise ArtifactError(f"--save_path {args.save_path} is a folder: give the path of the jsonl to write")
    check_output_dir(Path(args.save_path).parent, "the folder of --save_path")  # before any model is loaded
    args.policy_path = resolve_model(args.policy_path, "--policy_path")  # a packaged model's name: its converted folder
    check_not_an_input(
        args.save_path,
        "--save_path",
        [
            ("--questions_path", args.questions_path),
            ("--goal_state_path", args.goal_state_path),
            ("--policy_path", args.policy_path),
            ("--reward_model_path", args.reward_model_path),
        ],
    )
    check_goal_state_owner(args.goal_state_path, args.reward_model_path)  # as eval-rm: another RM's goal is refused
    check_weights_folder(args.policy_path, "--policy_path")
    check_tokenizer_folder(args.policy_path, "--policy_path")
    prune = None if args.prune_threshold is None else PruneConfig(args.prune_threshold, args.skip_first)
    rm = load_reward_model(args.reward_model_path)
    tokenizer = load_rm_tokenizer(args.reward_model_path, rm)
    policy = AutoModelForCausalLM.from_pretrained(args.policy_path).eval()
    goal = check_decoding_inputs(
        policy, rm, tokenizer, load_npy(args.goal_state_path), AutoTokenizer.from_pretrained(args.policy_path)
    )
    rows = read_jsonl(args.questions_path, required=("question",))
    rows = rows[: args.max_questions] if args.max_questions else rows
    questions = [r["question"] for r in rows]
    if args.mode == "beam":
        cfg = DecodeConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(DecodeConfig)})
        out, _ = q_guided_decode(policy, rm, tokenizer, goal, questions, cfg, args.template)
    else:
        prompts = [apply_template(args.template, q) for q in questions]
        samples = sample(
            policy,
            tokenizer,
            prompts,
            n=args.n_samples,
            temperature=args.temperature,
            max_new_tokens=args.max_new_tokens,
            seed=args.seed,
            rm=rm,
            goal=goal,
            prune=prune,
            progress=True,
        )
        out = [
            {
                "question": q,
                "sample_index": i,
                "generated_solution": s.text,
                "num_generated_tokens": s.num_tokens,
                "stopped_at": s.stopped_at,
                "finished": s.finished,
                "cosine_sim": s.q_values,
            }
            for q, group in zip(questions, samples)
            for i, s in enumerate(group)
        ]
    if args.template == "toymath":
        for r, src in zip(out, [r for r in rows for _ in range(1 if args.mode == "beam" else args.n_samples)]):
            if r.get("stopped_at") is None:
                r.update(judge(r["question"], r["generated_solution"], src.get("expected_answer"), args.modulus))
    count = write_jsonl(args.save_path, out)
    print(
        f"{count} rows -> {args.save_path}; tokens generated: "
        f"{sum(r.get('tokens_generated', r.get('num_generated_tokens', 0)) for r in out)}"
    )
    return 0
