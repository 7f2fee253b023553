"""Steering toward an attribute, ToyMath's verbose style (notebook 05): a style-mixed copy of the
policy, a goal state from correct solutions in that style, Q-guided beam search toward it against an
unguided sample, how often each decoding is in the style and correct, and whether the goal can see
the style at all.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from transformers import AutoTokenizer, LlamaForCausalLM

from goalrm_core.data.io import atomic_write_json
from goalrm_core.data.rundir import RunDir
from goalrm_core.evaluation import metrics, verdicts
from goalrm_core.inference.beam_search import DecodeConfig, q_guided_decode
from goalrm_core.inference.goal_state import goal_state, last_token_states, q_values
from goalrm_core.inference.sampler import check_decoding_inputs, sample
from goalrm_core.model.reward_model import RewardModel
from goalrm_core.model.templates import apply_template
from goalrm_core.study import formatting as fmt
from goalrm_core.study.decoding_setup import DecodingSetup, samples_as_rows, unique_questions
from goalrm_core.tasks.toymath import problems as toymath
from goalrm_core.tasks.toymath.pipeline import TEMPLATE, load_policy, training_problems
from goalrm_core.tasks.toymath.policy import PolicyConfig, train_sft
from goalrm_core.tasks.toymath.verdicts import is_verbose, judge


@dataclass
class SteerConfig:
    """The short style SFT that makes a copy of the policy produce both styles."""

    steps: int = field(default=300, metadata={"help": "SFT steps on the terse/verbose mix."})
    batch_size: int = field(default=32, metadata={"help": "Sequences per step."})
    learning_rate: float = field(default=1e-3, metadata={"help": "Peak AdamW learning rate."})
    n_problems: int = field(
        default=2000, metadata={"help": "Training problems in the mix (never benchmark questions)."}
    )
    verbose_fraction: float = field(default=0.5, metadata={"help": "Share of verbose solutions in the mix."})
    seed: int = field(default=0, metadata={"help": "Data and order seed."})


@dataclass
class SteeringPolicy:
    """The style-mixed copy of the policy, and its SFT loss history."""

    model: LlamaForCausalLM
    tokenizer: Any
    history: list[dict]


@dataclass
class SteeringSetup:
    """Steering toward the verbose style."""

    n_goal: int = field(
        default=200, metadata={"help": "Verbose correct solutions the goal is averaged over (training problems)."}
    )
    bench: str = field(default="toy-id", metadata={"help": "Benchmark whose first questions are decoded."})
    style: str = field(default="verbose", metadata={"help": "The ToyMath style the goal is built from."})


@dataclass
class SteeringResult:
    summary: dict  # attribute rate and accuracy, steered vs unguided (and toward the correctness goal)
    guided: list[dict]  # one beam-search row per question
    unguided: list[dict]  # one plain sample per question


def steering_policy(
    run, task: toymath.ToyMathConfig, cfg: SteerConfig | None = None, progress: bool = False
) -> SteeringPolicy:
    """A copy of the data stage's policy fine-tuned on a terse/verbose mix, cached in
    ``RunDir.steering_policy`` (reused while its settings are unchanged). ``cfg`` defaults to ``SteerConfig()``."""
    cfg = SteerConfig() if cfg is None else cfg
    out = RunDir(run).steering_policy
    settings = {"steer": asdict(cfg), "toymath": asdict(task)}
    meta = out / "steer.json"
    if meta.exists() and json.loads(meta.read_text()).get("settings") == settings:
        history = json.loads(meta.read_text())["history"]
    else:
        model, tokenizer = load_policy(run)
        problems = training_problems(run, task, cfg.n_problems, cfg.seed + 7)
        rng = random.Random(cfg.seed)
        examples = [
            (
                apply_template(TEMPLATE, p.question),
                p.solution("verbose" if rng.random() < cfg.verbose_fraction else "terse"),
            )
            for p in problems
        ]
        sft = PolicyConfig(
            steps=cfg.steps,
            batch_size=cfg.batch_size,
            learning_rate=cfg.learning_rate,
            warmup_steps=max(1, cfg.steps // 10),
            seed=cfg.seed,
        )
        history = train_sft(model, tokenizer, examples, sft, progress=progress)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        atomic_write_json(meta, {"settings": settings, "history": history})
    return SteeringPolicy(LlamaForCausalLM.from_pretrained(out).eval(), AutoTokenizer.from_pretrained(out), history)


def attribute_goal_state(
    rm: RewardModel,
    tokenizer,
    run,
    task: toymath.ToyMathConfig,
    n: int = 200,
    seed: int = 0,
    style: str = "verbose",
    encoding: str = "split",
    readout: str = "eos",
) -> np.ndarray:
    """(1, hidden) goal: the mean last-token RM state of ``n`` correct solutions written in ``style``
    (training problems, never benchmark questions)."""
    problems = training_problems(run, task, n, seed + 11)
    return goal_state(
        rm,
        tokenizer,
        [apply_template(TEMPLATE, p.question) for p in problems],
        [p.solution(style) for p in problems],
        max_len=512,
        batch_size=64,
        encoding=encoding,
        readout=readout,
    )


def style_separation_auroc(
    rm: RewardModel,
    tokenizer,
    run,
    task: toymath.ToyMathConfig,
    goal,
    n: int = 200,
    seed: int = 0,
    encoding: str = "split",
    readout: str = "eos",
) -> float:
    """Can the goal steer at all? AUROC of the final Q toward ``goal`` for telling the verbose from the
    terse reference solution of the same ``n`` training problems (other problems than the goal's).
    0.5: the cosine to this goal does not see the style, so the beam search cannot select for it."""
    problems = training_problems(run, task, n, seed + 13)
    rows = [
        {"question": p.question, "generated_solution": p.solution(style)}
        for style in ("verbose", "terse")
        for p in problems
    ]
    q = q_values(
        last_token_states(rm, tokenizer, rows, TEMPLATE, max_len=512, encoding=encoding, readout=readout), goal
    ).numpy()
    return metrics.bootstrap_auroc(q, [1] * len(problems) + [0] * len(problems), n_boot=0).auroc


def steering_summary(guided: Sequence[dict], unguided: Sequence[dict], modulus: int = 0) -> dict:
    """Attribute rate and accuracy of steered vs unguided decoding (rows with generated_solution)."""

    def rates(rows):
        judged = [judge(r["question"], r["generated_solution"], modulus=modulus) for r in rows]
        return (
            float(np.mean([is_verbose(r["generated_solution"]) for r in rows])),
            float(np.mean([j["is_correct"] for j in judged])),
        )

    (attr, acc), (attr_u, acc_u) = rates(guided), rates(unguided)
    return {
        "attribute_rate": attr,
        "attribute_rate_unguided": attr_u,
        "accuracy": acc,
        "accuracy_unguided": acc_u,
        "n_questions": len(guided),
    }


def steering_experiment(
    setup: DecodingSetup, steer_policy, cfg: DecodeConfig, steer: SteeringSetup | None = None, control_goal=None
) -> SteeringResult:
    """Steer ``steer_policy`` (``steering_policy``'s model) toward the style: goal from the RM's
    last-token states of correct solutions in that style, Q-guided beam search toward it, against one
    unguided sample per question from the same policy at the same temperature and seed. With
    ``control_goal`` (the ordinary correctness goal) the same search runs toward it too, so the style
    effect of the search itself (e.g. the log-probability term favouring the predictable explanation
    words) is not credited to the style goal: ``attribute_rate_correctness_goal`` and
    ``accuracy_correctness_goal``. ``steer`` defaults to ``SteeringSetup()``."""
    steer = SteeringSetup() if steer is None else steer
    rm, tokenizer, modulus = setup.rm, setup.tokenizer, setup.task.modulus
    check_decoding_inputs(steer_policy, rm, tokenizer, control_goal)
    goal = attribute_goal_state(
        rm,
        tokenizer,
        setup.run,
        setup.task,
        steer.n_goal,
        cfg.seed,
        style=steer.style,
        encoding=setup.encoding,
        readout=setup.readout,
    )
    separation = style_separation_auroc(
        rm,
        tokenizer,
        setup.run,
        setup.task,
        goal,
        steer.n_goal,
        cfg.seed,
        encoding=setup.encoding,
        readout=setup.readout,
    )
    questions = unique_questions(setup.run, steer.bench, setup.n_questions)
    guided, _ = q_guided_decode(steer_policy, rm, tokenizer, goal, questions, cfg)
    prompts = [apply_template(TEMPLATE, q) for q in questions]
    unguided = samples_as_rows(
        questions,
        sample(
            steer_policy,
            tokenizer,
            prompts,
            n=1,
            temperature=cfg.temperature,
            max_new_tokens=cfg.max_new_tokens,
            seed=cfg.seed,
        ),
    )
    summary = steering_summary(guided, unguided, modulus) | {"goal_separation_auroc": separation}
    if control_goal is not None:
        control, _ = q_guided_decode(steer_policy, rm, tokenizer, control_goal, questions, cfg)
        rates = steering_summary(control, unguided, modulus)
        summary |= {
            "attribute_rate_correctness_goal": rates["attribute_rate"],
            "accuracy_correctness_goal": rates["accuracy"],
        }
    return SteeringResult(summary, guided, unguided)


def steering_examples(steering: SteeringResult, k: int = 4) -> pd.DataFrame:
    guided, unguided = steering.guided, steering.unguided
    return pd.DataFrame(
        {
            "question": [r["question"] for r in guided[:k]],
            "steered": [r["generated_solution"] for r in guided[:k]],
            "unguided": [r["generated_solution"] for r in unguided[:k]],
        }
    )


def steering_frame(steering: SteeringResult) -> pd.DataFrame:
    """The steering summary with one unit per column: rows are the two rates (share of solutions
    in the verbose style, accuracy), columns the decodings, every cell a percentage."""
    s = steering.summary
    runs = [
        ("steered toward the verbose goal", ""),
        ("steered toward the correctness goal", "_correctness_goal"),
        ("unguided sample", "_unguided"),
    ]
    rows = []
    for label, key in (("verbose style (% of solutions)", "attribute_rate"), ("accuracy (% of questions)", "accuracy")):
        rows.append(
            {"measure": label, **{name: fmt.pct(s[key + suffix]) for name, suffix in runs if key + suffix in s}}
        )
    return pd.DataFrame(rows)


def steering_reading(steering: SteeringResult) -> str:
    """How many questions the steering table is over, whether the goal can steer at all, and what the
    style cost in correctness (:func:`steering_cost`)."""
    s = steering.summary
    text = f"Each rate is over {s['n_questions']} questions, one seed, one run."
    if "goal_separation_auroc" in s:
        text += (
            f" The verbose goal's cosine tells a verbose solution from the terse one of the same problem with AUROC "
            f"{fmt.num(s['goal_separation_auroc'])} (0.5: it could not steer at all)."
        )
    cost = verdicts.steering_cost(s.get("accuracy"), s.get("accuracy_unguided"))
    return text + (f" {cost}" if cost else "")
