"""Checking a ToyMath solution: its final answer, whether it is well formed, and the exact place it
first goes wrong (the line, the character, and whether the slip is an arithmetic fact or the answer).

Pure Python and total: malformed text is judged, never raised on."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only for annotations: the problems module re-exports this one
    from goalrm_core.tasks.toymath.problems import Problem


# Answers with more digits than this are treated as malformed; it also keeps ``int()`` well below
# Python's limit on converting long digit strings, so the checker never raises.
MAX_ANSWER_DIGITS = 1000

_ANSWER_BODY = re.compile(r"-?[0-9]+")


def _is_answer_line(line: str) -> bool:
    return line.lstrip().startswith("#")


def _parse_answer_line(line: str) -> int | None:
    """``#236`` -> 236 (surrounding whitespace allowed); anything else -> None."""
    body = line.strip()[1:].strip()
    if not _ANSWER_BODY.fullmatch(body) or len(body.lstrip("-")) > MAX_ANSWER_DIGITS:
        return None
    try:
        return int(body)
    except ValueError:  # int-to-str digit limit lowered by the user below MAX_ANSWER_DIGITS
        return None


def parse_answer(text: str) -> int | None:
    """The integer on the LAST line that starts with ``#`` (after leading whitespace).

    Lines are split on ``\\n`` only. The part after ``#`` must be an optional ``-`` and ASCII digits
    (surrounding whitespace allowed); if the last ``#`` line is anything else (``#``, ``#-``,
    ``#12abc``, over MAX_ANSWER_DIGITS digits), or no ``#`` line exists, the answer is None. An
    earlier well-formed ``#`` line does not rescue a malformed last one. Never raises.
    """
    if not isinstance(text, str):
        return None
    answer_lines = [line for line in text.split("\n") if _is_answer_line(line)]
    if not answer_lines:
        return None
    return _parse_answer_line(answer_lines[-1])


def is_correct(text: str, expected: int) -> bool:
    """True iff ``parse_answer(text)`` exists and equals ``expected``."""
    answer = parse_answer(text)
    return answer is not None and answer == expected


@dataclass(frozen=True)
class FirstError:
    """Where a solution first goes wrong.

    step_index: 0-based line index of the first wrong line (the ``#`` line has index len(steps)).
    char_offset: offset in the solution text of the first wrong character.
    reason: "malformed", "wrong_step", "wrong_answer", "missing" or "extra_answer".
    """

    step_index: int
    char_offset: int
    reason: str


# An operation line: a op b = c, then end of line or whitespace (the verbose explanation follows).
_STEP_LINE = re.compile(r"-?[0-9]+[+*-]-?[0-9]+=-?[0-9]+(?=\s|$)")


def _first_diff(line: str, ref: str) -> int:
    """Index of the first differing character; the shorter length if one is a prefix of the other."""
    for i, (x, y) in enumerate(zip(line, ref)):
        if x != y:
            return i
    return min(len(line), len(ref))


def _judge_step(line: str, ref: str) -> tuple[int, str] | None:
    """None if the operation line is right, else (column of the error, reason)."""
    if not _STEP_LINE.match(line):
        return 0, "malformed"
    if line.startswith(ref) and (len(line) == len(ref) or line[len(ref)].isspace()):
        return None
    return _first_diff(line, ref), "wrong_step"


def _judge_answer(line: str, ref: str, answer: int) -> tuple[int, str] | None:
    """None if the ``#`` line gives the right answer, else (column of the error, reason)."""
    if not _is_answer_line(line):
        return 0, "malformed"
    value = _parse_answer_line(line)
    if value is None:
        return 0, "malformed"
    if value == answer:
        return None
    return _first_diff(line, ref), "wrong_answer"


def first_error(problem: Problem, solution_text: str) -> FirstError | None:
    """Locate the first wrong line and character of ``solution_text``; None if it is fully right.

    The text is split on ``\\n``. Line i < k (k = number of steps) must be operation line i of the
    reference, line k must be the ``#`` line. What "wrong" means, line by line:

    - operation line: it must *start with* the exact terse reference line (``63*2=126``) followed
      by end of line or whitespace; anything after that whitespace (the verbose explanation, or a
      trailing ``\\r``) is ignored. Because the reference chains from correct results, a wrong
      copied operand is as wrong as a wrong result. A line shaped like ``a op b = c`` (integers,
      no spaces) that differs is "wrong_step" at the first character that differs from the
      reference (at the end of the model's text for the line when it is a strict prefix, e.g.
      ``9*7=6``); any other line is "malformed" at its first character.
    - ``#`` line: it must parse (as in parse_answer, so ``# 236`` and `` #236`` pass) to the answer.
      A parseable wrong value is "wrong_answer" at the first character differing from ``#answer``;
      an unparseable one or a non-``#`` line is "malformed" at its first character.
    - missing lines (text ends early): "missing" at len(solution_text).
    - after the ``#`` line, other text is ignored unless it is a ``#`` line with a different or
      unparseable value (it would change parse_answer): "extra_answer" at its first character.

    Consequently None implies ``is_correct(solution_text, problem.answer)``: a wrong final answer
    always yields a FirstError.
    """
    refs = problem.reference_lines()
    lines = solution_text.split("\n")
    offset = 0
    for index, ref in enumerate(refs):
        if index >= len(lines):
            return FirstError(index, len(solution_text), "missing")
        line = lines[index]
        is_last = index == len(refs) - 1
        verdict = _judge_answer(line, ref, problem.answer) if is_last else _judge_step(line, ref)
        if verdict is not None:
            column, reason = verdict
            return FirstError(index, offset + column, reason)
        offset += len(line) + 1
    for index in range(len(refs), len(lines)):
        line = lines[index]
        if _is_answer_line(line) and _parse_answer_line(line) != problem.answer:
            return FirstError(index, offset, "extra_answer")
        offset += len(line) + 1
    return None


_FULL_STEP_LINE = re.compile(r"-?[0-9]+[+*-]-?[0-9]+=-?[0-9]+")
_FULL_ANSWER_LINE = re.compile(r"#-?[0-9]+")


def is_well_formed(solution_text: str) -> bool:
    r"""True iff the text has the *shape* of a terse solution, whatever its facts: one or more lines
    ``a op b = c`` (integers, no spaces), then one ``#answer`` line, and nothing else.

    A wrong but well-formed solution (``3+5=9\n9-7=2\n#2``) can only be told from a right one by
    checking its arithmetic; a malformed one (``4-3>#3``, ``4d-6=8``, a cut-off text) can be told by
    its shape alone. The distinction separates RMs that verify from RMs that spot garbled text.

    >>> is_well_formed("3+5=9\n9-7=2\n#2"), is_well_formed("3+5=8\n8-7>#1"), is_well_formed("3+5=8")
    (True, False, False)
    """
    if not isinstance(solution_text, str):
        return False
    lines = solution_text.split("\n")
    return (
        len(lines) >= 2
        and all(_FULL_STEP_LINE.fullmatch(line) for line in lines[:-1])
        and _FULL_ANSWER_LINE.fullmatch(lines[-1]) is not None
    )


def line_end_tokens(text: str, num_actions: int) -> list[int]:
    """Token index of the last token of each line (a step) of ``text`` (ToyMath's tokenizer has one token
    per character), capped at the scored tokens (a truncated response keeps the lines it reached).

    >>> line_end_tokens("1+2=3\\n3+4=7\\n#7", 14)
    [5, 11, 13]
    """
    ends = [i for i, ch in enumerate(text) if ch == "\n"]
    if not text.endswith("\n"):
        ends.append(len(text) - 1)
    return [e for e in ends if e < num_actions] or [num_actions - 1]
