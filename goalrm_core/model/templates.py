"""Prompt templates. The RM input is the template applied to the question, followed by the response."""

from __future__ import annotations

MATH_TEMPLATE = (
    "System:\n"
    "You're an expert Python programmer and mathematician. Help the user to solve this problem using code "
    "when necessary. Make sure to put the answer (and only answer) inside \\boxed{{}}.\n\n"
    "User:\n{question}\n\nAssistant:\n"
)

TEMPLATES = {
    # The paper's math template (OpenMath-CodeLlama); literal braces are doubled for str.format.
    "math": MATH_TEMPLATE,
    # HH-RLHF: the prompt is already the dialogue "\n\nHuman: ... \n\nAssistant:".
    "hh": "{question}",
    # The embedded ToyMath task: the compact problem, then the solution on the next line.
    "toymath": "{question}\n",
}


def apply_template(template: str, question: str) -> str:
    if template not in TEMPLATES:
        raise ValueError(f"unknown template {template!r}; valid: {', '.join(TEMPLATES)}")
    return TEMPLATES[template].format(question=question)
