"""ToyMath verdicts of decoded responses: the answer and its correctness, and the verbose style."""

from goalrm_core.tasks.toymath.verdicts import is_verbose, judge


def test_verbose_detection():
    assert is_verbose("9*7=63 multiply\n63-1=62 subtract\n#62")
    assert not is_verbose("9*7=63 multiply\n63-1=62\n#62")
    assert not is_verbose("#62")


def test_judge_checks_every_step_and_the_expected_answer():
    assert judge("3 +4", "3+4=7\n#7") == {"predicted_answer": 7, "is_correct": True}
    assert judge("3 +4", "3+4=7\n#7", expected=8)["is_correct"] is False  # right steps, not the expected answer
    assert judge("3 +4", "3+4=8\n#7") == {"predicted_answer": 7, "is_correct": False}  # a wrong step
    assert judge("7 +5", "7+5=2\n#2", modulus=10) == {"predicted_answer": 2, "is_correct": True}
    assert judge("3 +4", "3+4=")["predicted_answer"] is None
