"""Step labels estimated from the policy's rollouts (Math-Shepherd's hard estimate), for ToyMath pairs
whose exact labels are known, so the two can be compared and a process reward model trained on either.

A pair's ``first_error_char`` (``verify_data.slip_pairs``, ``confident_pairs``) is the offset of the first
wrong character of its ``incorrect`` solution; the trainer's per-token value loss labels the tokens before
it on track and the rest not (``model.encoding.error_action``, ``model.losses.dense_value_loss``). Here
the first error is *estimated* instead:

* a line is the text up to and including each ``"\\n"`` (the last line may lack one), as the step-verifier
  bench defines it (``grading.line_end_tokens``; ToyMath's tokenizer has one token per character,
  so its token indices are character offsets);
* the prefix that ends with line ``i`` is *on track* if any of ``k`` continuations the policy samples after
  the question's prompt and that prefix reaches the right final answer (``grading.is_correct``). The
  last line's prefix is the whole solution: it is graded as it stands, not continued;
* the estimated first error is the first line whose prefix is not on track.

As a ``first_error_char`` (:func:`label_from_on_track`): the rollouts locate a line, not a character, so an
estimate on the line of the exact first error keeps the exact offset (the two labels then agree token by
token), an estimate on another line is that line's first character, and a solution on track throughout
gets ``len(incorrect)``, the end of the response (every character of it labelled on track, the nearest a
``first_error_char`` comes to a chosen side's labels; under the ``split`` encoding the appended
``" " + EOS`` stay labelled off track). Files of exact and estimated labels then differ only where the
line-level labels differ.

All rollouts of all pairs go through one call of the project's KV-cache sampler
(``inference.sampler.sample``: its own seeded generator per batch, so the labels depend on ``seed``,
``batch_size`` and the pairs' order only, on one machine and thread count).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from goalrm_core.inference.sampler import sample
from goalrm_core.model.templates import apply_template
from goalrm_core.tasks.toymath.grading import is_correct, line_end_tokens
from goalrm_core.tasks.toymath.pipeline import TEMPLATE
from goalrm_core.tasks.toymath.problems import problem_from_question


def line_ends(text: str) -> list[int]:
    """The end (exclusive character offset) of each line of ``text``: line ``i`` is ``text[:ends[i]]``
    minus the lines before it (``grading.line_end_tokens`` with one token per character).

    >>> line_ends("1+2=3\\n3+4=7\\n#7")
    [6, 12, 14]
    """
    if not text:
        raise ValueError("an empty solution has no lines")
    return [e + 1 for e in line_end_tokens(text, len(text))]


def line_of_char(text: str, char: int | None) -> int | None:
    """The index of the line that holds character ``char`` of ``text``; ``len(lines)`` for the end of
    the text (an error that is a missing line: ``grading.first_error``'s "missing"); None for None.

    >>> line_of_char("1+2=3\\n3+4=8\\n#8", 10), line_of_char("1+2=3\\n3+4=8\\n#8", 6), line_of_char("1+2=3", 5)
    (1, 1, 1)
    """
    if char is None:
        return None
    if isinstance(char, bool) or not isinstance(char, int) or not 0 <= char <= len(text):
        raise ValueError(f"first_error_char must be an integer offset in [0, {len(text)}], got {char!r}")
    ends = line_ends(text)
    return next((i for i, end in enumerate(ends) if char < end), len(ends))


def estimated_error_line(on_track: Sequence[bool]) -> int | None:
    """The first line whose prefix is not on track; None when every prefix is."""
    return next((i for i, ok in enumerate(on_track) if not ok), None)


def label_from_on_track(text: str, on_track: Sequence[bool], exact_char: int | None = None) -> int:
    """The labelling rule: per-line on-track verdicts of ``text`` -> its estimated ``first_error_char``.

    The first line not on track gives the offset: ``exact_char`` when it lies on that line (the rollouts
    agree with the exact label, which alone says where in the line the error is), else the line's first
    character; no such line gives ``len(text)`` (on track throughout).

    >>> label_from_on_track("3+5=9\\n9-7=2\\n#2", [False, False, False], exact_char=4)
    4
    >>> label_from_on_track("3+5=8\\n8-7=2\\n#2", [True, False, False], exact_char=10)
    10
    >>> label_from_on_track("3+5=8\\n8-7=2\\n#2", [False, False, False], exact_char=10)
    0
    >>> label_from_on_track("3+5=8\\n8-7=2\\n#2", [True, True, False]), label_from_on_track("3+5=8\\n#8", [True, True])
    (12, 8)
    """
    ends = line_ends(text)
    if len(on_track) != len(ends):
        raise ValueError(f"{len(on_track)} on-track verdicts for a solution of {len(ends)} lines")
    line = estimated_error_line(on_track)
    if line is None:
        return len(text)
    if exact_char is not None and line_of_char(text, exact_char) == line:
        return exact_char
    return ends[line - 1] if line else 0


def prefix_on_track(prefix: str, continuations: Sequence[str], answer: int) -> bool:
    """Math-Shepherd's hard estimate: some continuation of ``prefix`` ends with the right answer."""
    return any(is_correct(prefix + c, answer) for c in continuations)


@dataclass(frozen=True)
class RolloutLabel:
    """One pair's labels: the exact and the estimated first wrong line (None: none), each line's number
    of rollouts that reached the right answer (the last line: 1 if the solution's own answer is right,
    else 0, graded once), and the estimated ``first_error_char``."""

    exact_line: int | None
    estimated_line: int | None
    hits: tuple[int, ...]
    first_error_char: int

    @property
    def n_lines(self) -> int:
        return len(self.hits)


def estimate_first_errors(
    policy,
    tokenizer,
    pairs: Sequence[dict],
    *,
    k: int = 8,
    temperature: float = 1.0,
    seed: int = 0,
    modulus: int,
    max_new_tokens: int = 48,
    batch_size: int = 256,
    progress: bool = False,
) -> tuple[list[dict], list[RolloutLabel]]:
    """Pairs ``{question, correct, incorrect, first_error_char}`` -> the same pairs with ``first_error_char``
    estimated from ``k`` rollouts per line end of each ``incorrect`` solution, and one
    :class:`RolloutLabel` per pair. ``modulus``: the task's (``pipeline.task_config(run).modulus``), which
    the question's right answer is computed with. A pair without an exact label (no
    ``first_error_char``) still gets an estimate; its ``exact_line`` is None."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    answers, texts, exact = [], [], []
    for i, pair in enumerate(pairs):
        for key in ("question", "incorrect"):
            if not isinstance(pair.get(key), str) or (key == "incorrect" and not pair[key]):
                raise ValueError(f"pair {i}: field {key!r} must be a non-empty string, got {pair.get(key)!r}")
        try:
            answers.append(problem_from_question(pair["question"], modulus).answer)
            exact.append(line_of_char(pair["incorrect"], pair.get("first_error_char")))
        except ValueError as err:
            raise ValueError(f"pair {i}: {err}") from None
        texts.append(pair["incorrect"])
    # every line end but the last (the whole solution, graded as it stands) is continued k times
    prompts, owners = [], []
    for i, (pair, text) in enumerate(zip(pairs, texts)):
        for line, end in enumerate(line_ends(text)[:-1]):
            prompts.append(apply_template(TEMPLATE, pair["question"]) + text[:end])
            owners.append((i, line, text[:end]))
    samples = (
        sample(
            policy,
            tokenizer,
            prompts,
            n=k,
            temperature=temperature,
            max_new_tokens=max_new_tokens,
            seed=seed,
            batch_size=batch_size,
            progress=progress,
            desc="rollouts",
        )
        if prompts
        else []
    )
    hits = [[0] * len(line_ends(t)) for t in texts]
    for (i, line, prefix), drawn in zip(owners, samples):
        hits[i][line] = sum(is_correct(prefix + s.text, answers[i]) for s in drawn)
    labelled, labels = [], []
    for i, (pair, text) in enumerate(zip(pairs, texts)):
        hits[i][-1] = int(is_correct(text, answers[i]))
        on_track = [h > 0 for h in hits[i]]
        char = label_from_on_track(text, on_track, pair.get("first_error_char"))
        labels.append(RolloutLabel(exact[i], estimated_error_line(on_track), tuple(hits[i]), char))
        labelled.append({**pair, "first_error_char": char})
    return labelled, labels


def agreement(labels: Sequence[RolloutLabel]) -> dict:
    """How the estimated first wrong lines compare with the exact ones, over the pairs with an exact
    label: the share on the same line, earlier, later, and with none estimated (on track throughout)."""
    known = [lab for lab in labels if lab.exact_line is not None]
    n = len(known)

    def share(test) -> float | None:
        return round(sum(map(test, known)) / n, 4) if n else None

    return {
        "n_pairs": len(labels),
        "n_exact": n,
        "same_line": share(lambda r: r.estimated_line == r.exact_line),
        "earlier": share(lambda r: r.estimated_line is not None and r.estimated_line < r.exact_line),
        "later": share(lambda r: r.estimated_line is not None and r.estimated_line > r.exact_line),
        "none": share(lambda r: r.estimated_line is None),
    }
