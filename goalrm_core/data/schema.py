"""The fields of the project's row types, defined once (the names follow the official code's files).

* a preference pair: ``question``, ``correct``, ``incorrect``;
* a generation (Nemo-Skills' ``output-*.jsonl`` rows, and the toy task's ``greedy``/``samples``).
"""

PAIR_FIELDS = ("question", "correct", "incorrect")
GENERATION_FIELDS = ("question", "generated_solution", "predicted_answer", "expected_answer", "is_correct")
#: what `goalrm eval-rm` needs of a generation: answers are not read when scoring
SCORED_GENERATION_FIELDS = ("question", "generated_solution", "is_correct")
#: the fields that hold text wherever they appear: a reader refuses null or a number in them
#: (``question: null`` would otherwise be scored as the prompt "None")
TEXT_FIELDS = ("question", "generated_solution", "correct", "incorrect")
