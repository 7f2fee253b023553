"""The prompt templates, pinned to the exact strings the official code builds."""

from goalrm_core.model.templates import apply_template


def test_nemo_template_is_the_official_literal():
    # examples/eval_rm.py and the training data's NEMO_TEMPLATE: a backslash-continued triple-quoted string
    assert apply_template("nemo", "What is 2+2?") == (
        "  System:\n  You're an expert Python programmer and mathematician.   Help the user to solve this problem "
        "using code when necessary.   Make sure to put the answer (and only answer) inside \\boxed{}.\n\n"
        "User:\nWhat is 2+2?\n\nAssistant:\n"
    )


def test_math_template_is_the_clean_prompt_of_get_representation():
    assert apply_template("math", "What is 2+2?") == (
        "System:\nYou're an expert Python programmer and mathematician. Help the user to solve this problem "
        "using code when necessary. Make sure to put the answer (and only answer) inside \\boxed{}.\n\n"
        "User:\nWhat is 2+2?\n\nAssistant:\n"
    )
