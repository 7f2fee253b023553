"""What a decoded ToyMath response says: its answer and whether it is right (``judge``), and
whether it is written in the verbose style (``is_verbose``), the attribute the steering study targets."""

from __future__ import annotations

import re

from goalrm_core.tasks.toymath import problems as toymath

# an operation line, and one that carries an explanation word after its result ("9*7=63 multiply")
_OPERATION_LINE = re.compile(r"^-?[0-9]+[+*-]-?[0-9]+=")
_VERBOSE_LINE = re.compile(r"^-?[0-9]+[+*-]-?[0-9]+=-?[0-9]+ [a-z]+\s*$")


def judge(question: str, text: str, expected: int | None = None, modulus: int = 0) -> dict:
    """predicted_answer and is_correct of a response: correct when every step is right
    (``first_error`` is None) and, given ``expected``, the answer equals it. ``modulus`` as in
    ToyMathConfig (10 for digit chains).

    >>> judge("3 +4", "3+4=7\\n#7"), judge("3 +4", "3+4=8\\n#8")
    ({'predicted_answer': 7, 'is_correct': True}, {'predicted_answer': 8, 'is_correct': False})
    """
    problem = toymath.problem_from_question(question, modulus)
    answer = toymath.parse_answer(text)
    return {
        "predicted_answer": answer,
        "is_correct": toymath.first_error(problem, text) is None and (expected is None or answer == expected),
    }


def is_verbose(text: str) -> bool:
    """True when the response has an operation line and every one carries an explanation word.

    >>> is_verbose("9*7=63 multiply\\n63-1=62 subtract\\n#62"), is_verbose("9*7=63\\n#63")
    (True, False)
    """
    ops = [line for line in text.split("\n") if _OPERATION_LINE.match(line)]
    return bool(ops) and all(_VERBOSE_LINE.match(line) for line in ops)
