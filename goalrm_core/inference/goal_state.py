"""Goal states, and the one Q function.

A goal state is where the RM's representation of a *preferred* response ends up. Default (the
paper): the mean last-token hidden state over the preferred responses, saved as a (1, hidden)
``.npy``; the alternatives exist for the ablation. The Q-value of a prefix is the cosine of its last
hidden state to the goal (``q_values``): the dense scorer, the sampler's online pruning, the beam
search and the notebooks' separation tables all call it. Command line:
``goalrm get-representation --dataset-path --reward-model-path --save-dir`` (:mod:`goalrm_core.cli.get_representation`).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from goalrm_core.choices import GOAL_METHODS, GOAL_ROWS
from goalrm_core.data import manifest
from goalrm_core.data.adapters import HELPSTEER_ATTRIBUTES
from goalrm_core.data.io import ArtifactError, load_npy
from goalrm_core.flags import check_choice
from goalrm_core.inference.forward import ReadSpec, iter_read
from goalrm_core.model.encoding import require_text
from goalrm_core.model.reward_model import RewardModel
from goalrm_core.model.templates import apply_template
from goalrm_core.model.top_layers import FeatureCache

#: a goal state's norm below this times sqrt(hidden size) is refused (see check_goal_state)
GOAL_NORM_FLOOR = 1e-6


def check_goal_state(goal: np.ndarray, hidden_size: int, source: str = "goal state", rows: str = "one") -> torch.Tensor:
    """A goal must be real numbers, finite, of a norm that is not negligible, and match the RM's hidden
    size; returns it as a (hidden,) tensor. ``rows`` (:data:`GOAL_ROWS`): ``mean`` averages an
    (n, hidden) goal over its n rows first.

    Negligible: below ``GOAL_NORM_FLOOR * sqrt(hidden)``. A hidden state after the model's final norm
    has entries of order 1 (norm of order sqrt(hidden)); a goal a million times smaller than that (a
    ``1e-29`` vector, a sum that cancelled) is within float rounding of zero, and its cosine to
    every state would be ~0 (torch's cosine divides by at least 1e-8)."""
    check_choice("goal_rows", rows, GOAL_ROWS)
    goal = np.asarray(goal)
    shape = tuple(goal.shape)
    if goal.dtype.kind == "c":
        raise ValueError(
            f"{source} holds complex numbers ({goal.dtype}); a goal state is real: its imaginary part would be dropped"
        )
    if goal.dtype.kind not in "fiu":
        raise ValueError(
            f"{source} holds {goal.dtype} values, not numbers; goal states are written by `goalrm get-representation`"
        )
    if goal.ndim == 2 and goal.shape[0] > 1 and goal.shape[1] == hidden_size:
        if rows != "mean":
            raise ValueError(
                f"{source} has {goal.shape[0]} rows {shape}: one goal per file is expected, (1, {hidden_size}); "
                f"--goal_rows mean averages the rows, as the official eval_rm.py does"
            )
        goal = goal.mean(axis=0)
    elif goal.ndim == 2 and goal.shape[0] == 1:
        goal = goal[0]
    if goal.shape != (hidden_size,):
        raise ValueError(
            f"{source} has shape {shape}, but the reward model's hidden size is {hidden_size}: expected (1, "
            f"{hidden_size})"
        )
    if not np.isfinite(goal).all():
        raise ValueError(f"{source} contains NaN or inf values")
    if not np.any(goal):
        raise ValueError(f"{source} is all zeros: its cosine to every state is 0, so every Q-value would be 0")
    norm, floor = float(np.linalg.norm(goal.astype(np.float64))), GOAL_NORM_FLOOR * float(np.sqrt(hidden_size))
    if not norm >= floor:
        raise ValueError(
            f"{source} has norm {norm:.3g}, negligible next to the RM's hidden states (norm of order "
            f"sqrt({hidden_size}) = {np.sqrt(hidden_size):.3g}; refused below {floor:.3g}): every Q-value would be ~0"
        )
    return torch.as_tensor(goal, dtype=torch.float32)


def load_goal_state(path: str | Path, hidden_size: int, rows: str = "one") -> torch.Tensor:
    return check_goal_state(load_npy(path), hidden_size, source=str(path), rows=rows)


def check_goal_state_owner(path: str | Path, reward_model_path: str | Path) -> dict:
    """What vouches for a goal state file: its hash and, when ``goalrm get-representation`` wrote it
    (its folder's manifest lists it), the RM it was made from. A goal state of another RM (same
    hidden size, another config hash) or from an unfinished run is refused: its Q-values would mean
    nothing. Returns the record eval-rm keeps in its own manifest."""
    path = Path(path)
    record = {
        "goal_state_path": str(path),
        "goal_state_sha256": manifest.file_digest(path)["sha256"],
        "goal_state_config_hash": None,
    }
    made = manifest.check_file(path, "get-representation output folder")
    if made is None:
        return record
    owner = made.get("producer", {}).get("config_hash")
    ours = manifest.config_hash(reward_model_path)
    if owner is not None and owner != ours:
        raise ArtifactError(
            f"{path} is another RM's goal state: it was made from {made['producer'].get('reward_model_path', '?')} "
            f"(config hash {owner}), but --reward_model_path {reward_model_path} has config hash {ours}; "
            f"run `goalrm get-representation` with this RM"
        )
    return {**record, "goal_state_config_hash": owner}


def q_values(states, goal) -> torch.Tensor:
    """Q of each state: its cosine to the goal state, in float32, clamped to [-1, 1].

    ``states`` is (n, hidden) or (hidden,), ``goal`` (hidden,) or (1, hidden); numpy arrays or
    tensors. Returns (n,) (or a scalar tensor). The cosine is ``torch.nn.functional.cosine_similarity``
    (eps 1e-8), as the dense scorer has always computed it; the clamp only catches float rounding
    past +-1, so that a threshold of -1 never stops anything.

    >>> q_values(np.array([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0]]), np.array([[2.0, 0.0]])).tolist()
    [1.0, 0.0, -1.0]
    """
    states = torch.as_tensor(states, dtype=torch.float32)
    goal = torch.as_tensor(goal, dtype=torch.float32).reshape(-1)
    return F.cosine_similarity(states, goal.view(*[1] * (states.ndim - 1), -1), dim=-1).clamp(-1.0, 1.0)


def goal_state(
    model: RewardModel,
    tokenizer,
    prompts: Sequence[str],
    responses: Sequence[str],
    method: str = "mean_last",
    seed: int = 0,
    max_len: int = 2048,
    batch_size: int = 32,
    progress: bool = False,
    *,
    encoding: str,
    readout: str,
) -> np.ndarray:
    """A (1, hidden) goal state from preferred responses (already templated prompts); ``encoding`` and
    ``readout`` as in ``inference.forward`` (the official get_representation.py: ``official``,
    ``last_token``)."""
    return goal_states(
        model,
        tokenizer,
        prompts,
        responses,
        [method],
        seed,
        max_len,
        batch_size,
        progress,
        encoding=encoding,
        readout=readout,
    )[method]


#: Goal methods that read one response, drawn at random (the same one for both)
ONE_RESPONSE = ("random_response", "random_token")


def goal_states(
    model: RewardModel,
    tokenizer,
    prompts: Sequence[str],
    responses: Sequence[str],
    methods: Sequence[str] = GOAL_METHODS,
    seed: int = 0,
    max_len: int = 2048,
    batch_size: int = 32,
    progress: bool = False,
    *,
    encoding: str,
    readout: str,
    feature_cache: FeatureCache | None = None,
) -> dict[str, np.ndarray]:
    """:func:`goal_state` of each of ``methods``, the same arrays, from one pass of the RM over the
    responses for the methods that read them all, and one over the response the others draw
    (``feature_cache``: see ``inference.forward.ReadSpec``)."""
    for method in methods:
        check_choice("goal method", method, GOAL_METHODS)
    if not responses:
        raise ValueError("no preferred responses to build a goal state from")
    rng = random.Random(seed)
    pick = rng.randrange(
        len(responses)
    )  # the one-response methods' response; random_token then draws its token with rng
    one = [m for m in methods if m in ONE_RESPONSE]
    every = [m for m in methods if m not in ONE_RESPONSE]
    spec = ReadSpec(
        encoding=encoding,
        readout=readout,
        max_len=max_len,
        batch_size=batch_size,
        progress=progress,
        desc="goal state",
        feature_cache=feature_cache,
    )
    goals = {}
    if one:
        goals |= _mean_states(model, tokenizer, [prompts[pick]], [responses[pick]], one, rng, spec)
    if every:
        goals |= _mean_states(model, tokenizer, prompts, responses, every, rng, spec)
    return {method: goals[method] for method in methods}


def _mean_states(
    model, tokenizer, prompts, responses, methods, rng: random.Random, spec: ReadSpec
) -> dict[str, np.ndarray]:
    """Each method's mean of hidden states over one pass of the RM, read as ``spec`` says: every
    response token's (``mean_all_tokens``), one token's per response drawn with ``rng``
    (``random_token``), or the last token's (the others)."""
    size = model.config.hidden_size
    totals = {m: torch.zeros(size, dtype=torch.float64) for m in methods}
    counts = dict.fromkeys(methods, 0)
    for _, s in iter_read(model, tokenizer, prompts, responses, spec):
        for method in methods:
            if method == "mean_all_tokens":
                totals[method] += s.response_hidden.double().sum(0)
                counts[method] += s.num_actions
            elif method == "random_token":
                totals[method] += s.response_hidden[rng.randrange(s.num_actions)].double()
                counts[method] += 1
            else:
                totals[method] += s.response_hidden[-1].double()
                counts[method] += 1
    goals = {}
    for method in methods:
        if counts[method] == 0:
            raise ValueError("no response was scored, so there is no goal state")
        goals[method] = (totals[method] / counts[method]).float().numpy()[None, :]
        check_goal_state(goals[method], size, source="the computed goal state")
    return goals


def attribute_goal_states(
    model: RewardModel,
    tokenizer,
    rows: Sequence[dict],
    template: str,
    threshold: int = 3,
    attributes: Sequence[str] = HELPSTEER_ATTRIBUTES,
    max_len: int = 2048,
    batch_size: int = 32,
    *,
    encoding: str,
    readout: str,
) -> dict[str, np.ndarray]:
    """One goal per attribute, from the responses scoring at least ``threshold`` on it (HelpSteer rows)."""
    goals = {}
    for attr in attributes:
        keep = [r for r in rows if r.get(attr) is not None and r[attr] >= threshold]
        if not keep:
            continue
        prompts = [apply_template(template, r["prompt"]) for r in keep]
        goals[attr] = goal_state(
            model,
            tokenizer,
            prompts,
            [r["response"] for r in keep],
            max_len=max_len,
            batch_size=batch_size,
            encoding=encoding,
            readout=readout,
        )
    return goals


def goal_state_from_pairs(
    model, tokenizer, pairs: Sequence[dict], template: str, method: str = "mean_last", **kw
) -> np.ndarray:
    """Goal state from the ``correct`` side of question/correct/incorrect pairs (an empty or
    non-string response is an error naming its file and line, as in training)."""
    return goal_states_from_pairs(model, tokenizer, pairs, template, [method], **kw)[method]


def goal_states_from_pairs(
    model, tokenizer, pairs: Sequence[dict], template: str, methods: Sequence[str] = GOAL_METHODS, **kw
) -> dict[str, np.ndarray]:
    """:func:`goal_state_from_pairs` of each of ``methods``, the RM reading the responses once for all
    (:func:`goal_states`)."""
    prompts = [apply_template(template, require_text(p, "question", i)) for i, p in enumerate(pairs)]
    return goal_states(
        model, tokenizer, prompts, [require_text(p, "correct", i) for i, p in enumerate(pairs)], methods, **kw
    )


def last_token_states(
    model: RewardModel,
    tokenizer,
    rows: Sequence[dict],
    template: str,
    max_len: int = 2048,
    batch_size: int = 64,
    *,
    encoding: str,
    readout: str,
) -> np.ndarray:
    """(n, hidden) last-token hidden states of generations (question + generated_solution rows), read
    as ``encoding`` and ``readout`` say (``inference.forward``)."""
    prompts = [apply_template(template, r["question"]) for r in rows]
    states = np.zeros((len(rows), model.config.hidden_size), dtype=np.float32)
    spec = ReadSpec(encoding=encoding, readout=readout, max_len=max_len, batch_size=batch_size)
    for i, s in iter_read(model, tokenizer, prompts, [r["generated_solution"] for r in rows], spec):
        states[i] = s.response_hidden[-1].numpy()
    return states
