"""Prompt templates. The RM input is the template applied to the question, followed by the response."""

from __future__ import annotations

from goalrm_core.flags import check_choice

# The paper's math prompt (OpenMath-CodeLlama), clean: the form the official get_representation.py builds.
MATH_TEMPLATE = (
    "System:\n"
    "You're an expert Python programmer and mathematician. Help the user to solve this problem using code "
    "when necessary. Make sure to put the answer (and only answer) inside \\boxed{{}}.\n\n"
    "User:\n{question}\n\nAssistant:\n"
)

# The same prompt exactly as the official training data and eval_rm.py build it: their literal is a
# backslash-continued triple-quoted string, so it starts with two spaces and keeps each continued
# line's two-space indent after the single space that ended the line before ("mathematician.   Help").
NEMO_TEMPLATE = (
    "  System:\n"
    "  You're an expert Python programmer and mathematician. "
    "  Help the user to solve this problem using code when necessary. "
    "  Make sure to put the answer (and only answer) inside \\boxed{{}}.\n\n"
    "User:\n{question}\n\nAssistant:\n"
)

TEMPLATES = {
    # literal braces are doubled for str.format
    "math": MATH_TEMPLATE,
    "nemo": NEMO_TEMPLATE,
    # HH-RLHF: the prompt is already the dialogue "\n\nHuman: ... \n\nAssistant:".
    "hh": "{question}",
    # The embedded ToyMath task: the compact problem, then the solution on the next line.
    "toymath": "{question}\n",
}


def apply_template(template: str, question: str) -> str:
    check_choice("template", template, tuple(TEMPLATES))
    return TEMPLATES[template].format(question=question)
