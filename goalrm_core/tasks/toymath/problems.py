"""ToyMath: the embedded default task, a small synthetic arithmetic chain.

Why it exists: the goal-conditioned RM needs a policy that makes *real* mistakes, a checker that
says which answers are right, and the exact place a solution first goes wrong. A ~1M-parameter
character-level model learns ToyMath in minutes on CPU and still slips, so the whole pipeline can run
end to end on a laptop.

The notation is compact on purpose (it was measured to be learnable). A question is the first operand
followed by ``" <op><operand>"`` pairs, evaluated strictly **left to right** (no operator precedence)::

    question:  9 *7 *2 -8 *2
    solution:  9*7=63
               63*2=126
               126-8=118
               118*2=236
               #236

Every solution line is one operation chained from the previous result; the last line is ``#`` and
the answer. The "verbose" style appends one explanation word per operation line
(``9*7=63 multiply``), a second style the policy can be steered toward.

**Digit chains** (``modulus=10``, the demo's default) keep the notation but use single-digit operands
and reduce every result mod 10 (``3 +5 -7 +9`` -> ``3+5=8``, ``8-7=1``, ``1+9=0``, ``#0``). Every fact a
solution asserts is then one of a few hundred single-digit entries, which a small reward model can
learn to check from a few thousand preference pairs; with multi-digit operands it could not (docs/toymath.md,
"Multi-digit ToyMath"). ``heldout_facts`` withholds some ``a op b`` facts from training so that a
benchmark can ask for them.

Everything here is pure Python and deterministic: generators take a seed and build their own
``random.Random``, never touching global random state.
"""

from __future__ import annotations

import functools
import random
import re
import zlib
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace

# the checker lives in grading; callers also read it here, as toymath.problems.is_correct and so on
from goalrm_core.tasks.toymath.grading import (
    MAX_ANSWER_DIGITS,  # noqa: F401
    FirstError,  # noqa: F401
    first_error,
    is_correct,  # noqa: F401
    is_well_formed,  # noqa: F401
    parse_answer,  # noqa: F401
)

# (a, op, b, c): one chained operation ``a op b = c``.
Step = tuple[int, str, int, int]

OPERATORS = "+-*"

# Where notebook 01's preference pairs come from (profile key ``pair_source``): the evaluated
# policy's own samples (the demo), a second generator's one-fact slips, or those slips and the
# solutions of a confidently wrong generator (``confident``'s recipe C, reports/calibration/).
PREFERENCE_SOURCES = ("policy", "slips", "confident+slips")

STYLES = ("terse", "verbose")
VERBOSE_WORDS = {"+": "add", "-": "subtract", "*": "multiply"}

# --------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToyMathConfig:
    """Difficulty knobs of the ToyMath distribution (defaults = the training distribution)."""

    min_steps: int = field(default=2, metadata={"help": "Fewest operations per question (k is drawn uniformly)."})
    max_steps: int = field(
        default=4,
        metadata={"help": "Most operations per question. A tiny model falls to ~0% at 5-6 steps."},
    )
    operand_min: int = field(default=1, metadata={"help": "Smallest operand (inclusive)."})
    operand_max: int = field(
        default=12,
        metadata={"help": "Largest operand (inclusive). Operands above ~20 defeat a tiny model."},
    )
    operations: str = field(default="+-*", metadata={"help": "Operators to draw from: a non-empty subset of '+-*'."})
    modulus: int = field(
        default=0,
        metadata={
            "help": "0: exact integer results (multi-digit ToyMath). m >= 2: every result is "
            "reduced mod m (digit chains: 10, with operands 1-9)."
        },
    )
    operation_weights: tuple[float, ...] = field(
        default=(),
        metadata={"help": "Relative weight of each operator of `operations`, in order; empty = uniform."},
    )
    heldout_facts: int = field(
        default=0,
        metadata={
            "help": "Digit chains only: how many '+'/'-' facts (a op b, a in [0, m), b in [1, m)) "
            "are withheld; see `facts`."
        },
    )
    mistaught_facts: int = field(
        default=0,
        metadata={
            "help": "Digit chains only: how many '+'/'-' facts the base policy is taught WRONG, in every "
            "SFT solution (a fixed crc32-seeded draw disjoint from the held-out facts, each with "
            "a fixed wrong result; see `mistaught_fact_table`). 0 (the demo): none. The "
            "'confident' profile's policy is then confidently wrong on them."
        },
    )
    facts: str = field(
        default="seen",
        metadata={
            "help": "'seen': no step uses a held-out fact (training); 'unseen': at least one step "
            "does (a benchmark); 'all': no restriction."
        },
    )
    style: str = field(
        default="terse",
        metadata={
            "help": "Reference solution style: 'terse' (a*b=c lines) or 'verbose' (adds one explanation word per line)."
        },
    )

    def __post_init__(self) -> None:
        if self.min_steps < 1:
            raise ValueError(f"min_steps must be >= 1, got {self.min_steps}")
        if self.max_steps < self.min_steps:
            raise ValueError(f"max_steps ({self.max_steps}) must be >= min_steps ({self.min_steps})")
        if self.operand_max < self.operand_min:
            raise ValueError(f"operand_max ({self.operand_max}) must be >= operand_min ({self.operand_min})")
        if not self.operations or set(self.operations) - set(OPERATORS):
            raise ValueError(f"operations must be a non-empty subset of {OPERATORS!r}, got {self.operations!r}")
        if len(set(self.operations)) != len(self.operations):
            raise ValueError(f"operations has repeated operators: {self.operations!r}")
        if self.modulus < 0 or self.modulus == 1:
            raise ValueError(f"modulus must be 0 (exact) or >= 2, got {self.modulus}")
        if self.operation_weights and (
            len(self.operation_weights) != len(self.operations)
            or not all(w >= 0 for w in self.operation_weights)
            or sum(self.operation_weights) <= 0
        ):
            raise ValueError(
                f"operation_weights must give one non-negative weight per operator of "
                f"{self.operations!r} with a positive sum, got {self.operation_weights!r}"
            )
        if self.facts not in FACT_FILTERS:
            raise ValueError(f"facts must be one of {FACT_FILTERS}, got {self.facts!r}")
        if self.heldout_facts < 0 or (self.heldout_facts and self.modulus == 0):
            raise ValueError(
                f"heldout_facts needs a modulus and must be >= 0, got {self.heldout_facts} with modulus {self.modulus}"
            )
        if self.heldout_facts > len(_fact_space(self.modulus)):
            raise ValueError(
                f"heldout_facts ({self.heldout_facts}) exceeds the "
                f"{len(_fact_space(self.modulus))} '+'/'-' facts mod {self.modulus}"
            )
        if self.mistaught_facts < 0 or (self.mistaught_facts and self.modulus == 0):
            raise ValueError(
                f"mistaught_facts needs a modulus and must be >= 0, got {self.mistaught_facts} "
                f"with modulus {self.modulus}"
            )
        if self.mistaught_facts > len(_fact_space(self.modulus)) - self.heldout_facts:
            raise ValueError(
                f"mistaught_facts ({self.mistaught_facts}) exceeds the "
                f"{len(_fact_space(self.modulus)) - self.heldout_facts} '+'/'-' facts mod "
                f"{self.modulus} that are not held out"
            )
        if self.facts == "unseen" and not self.heldout_facts:
            raise ValueError("facts='unseen' needs heldout_facts > 0")

        _check_style(self.style)

    @property
    def is_digit_chain(self) -> bool:
        return self.modulus > 0


FACT_FILTERS = ("seen", "unseen", "all")


def _fact_space(modulus: int) -> list[tuple[int, str, int]]:
    return [(a, op, b) for a in range(modulus) for op in "+-" for b in range(1, modulus)]


def heldout_fact_set(cfg: "ToyMathConfig") -> frozenset[tuple[int, str, int]]:
    """The ``cfg.heldout_facts`` withheld ``(a, op, b)`` facts: a fixed draw (crc32-seeded) from the
    '+'/'-' facts mod ``cfg.modulus``, so training and benchmark configs agree on it."""
    return _heldout_facts(cfg.modulus, cfg.heldout_facts)


@functools.lru_cache(maxsize=None)
def _heldout_facts(modulus: int, count: int) -> frozenset[tuple[int, str, int]]:
    if not count:
        return frozenset()
    rng = random.Random(zlib.crc32(f"toymath-heldout-facts/{modulus}".encode()))
    return frozenset(rng.sample(_fact_space(modulus), count))


def mistaught_fact_table(cfg: "ToyMathConfig") -> dict[tuple[int, str, int], int]:
    """The ``cfg.mistaught_facts`` facts the base policy is taught wrong: ``(a, op, b)`` -> the wrong
    result it is taught. A fixed draw (crc32-seeded, like the held-out facts) from the '+'/'-' facts
    mod ``cfg.modulus`` that are not held out; each wrong result differs from the true one."""
    return dict(_mistaught_facts(cfg.modulus, cfg.heldout_facts, cfg.mistaught_facts))


@functools.lru_cache(maxsize=None)
def _mistaught_facts(modulus: int, heldout: int, count: int) -> tuple[tuple[tuple[int, str, int], int], ...]:
    if not count:
        return ()
    rng = random.Random(zlib.crc32(f"toymath-mistaught-facts/{modulus}".encode()))
    excluded = _heldout_facts(modulus, heldout)
    facts = rng.sample([f for f in _fact_space(modulus) if f not in excluded], count)
    return tuple((f, (apply_op(*f, modulus) + rng.randrange(1, modulus)) % modulus) for f in facts)


def taught_steps(problem: "Problem", cfg: "ToyMathConfig") -> list[Step]:
    """The steps the base policy is trained on: the reference chain, except that every step asserting
    a mis-taught fact gives its taught (wrong) result, and the later steps chain from that result
    (every other fact is right). Without mis-taught facts, the reference steps."""
    table = mistaught_fact_table(cfg)
    if not table:
        return list(problem.steps)
    steps: list[Step] = []
    acc = problem.steps[0][0]
    for _, op, b, _ in problem.steps:
        result = table.get((acc, op, b), apply_op(acc, op, b, cfg.modulus))
        steps.append((acc, op, b, result))
        acc = result
    return steps


def taught_solution(problem: "Problem", cfg: "ToyMathConfig", style: str = "terse") -> str:
    """The SFT target text of ``problem``: :func:`taught_steps` formatted like a reference solution."""
    return format_solution(taught_steps(problem, cfg), style)


def mistaught_error(problem: "Problem", solution_text: str, cfg: "ToyMathConfig") -> bool:
    """True iff the solution's first error is a wrong result on a mis-taught fact: the first wrong line
    is ``a op b = c`` with the reference's ``a op b`` (a mis-taught fact) and another ``c``."""
    err = first_error(problem, solution_text)
    if err is None or err.reason != "wrong_step":
        return False
    a, op, b, _ = problem.steps[err.step_index]
    # a wrong_step line that starts like the reference's ``a op b =`` is wrong in its result
    return (a, op, b) in mistaught_fact_table(cfg) and solution_text.split("\n")[err.step_index].startswith(
        f"{a}{op}{b}="
    )


def _check_style(style: str) -> None:
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}, got {style!r}")


# --------------------------------------------------------------------------------------------------
# Problems: arithmetic, formatting, generation, parsing
# --------------------------------------------------------------------------------------------------


def apply_op(a: int, op: str, b: int, modulus: int = 0) -> int:
    """One operation (reduced mod ``modulus`` when it is not 0); the only place the arithmetic lives."""
    if op == "+":
        result = a + b
    elif op == "-":
        result = a - b
    elif op == "*":
        result = a * b
    else:
        raise ValueError(f"unknown operator {op!r}; expected one of {OPERATORS!r}")
    return result % modulus if modulus else result


def chain_steps(first: int, ops: Iterable[tuple[str, int]], modulus: int = 0) -> list[Step]:
    """Evaluate ``first op1 b1 op2 b2 ...`` left to right (mod ``modulus`` if not 0), recording each step."""
    steps: list[Step] = []
    acc = first
    for op, b in ops:
        result = apply_op(acc, op, b, modulus)
        steps.append((acc, op, b, result))
        acc = result
    return steps


def format_question(steps: list[Step]) -> str:
    """``9 *7 *2``: first operand, then a space before each operator and none after it."""
    if not steps:
        raise ValueError("a question needs at least one step")
    return str(steps[0][0]) + "".join(f" {op}{b}" for _, op, b, _ in steps)


def format_step(step: Step, style: str = "terse") -> str:
    """One solution line: ``9*7=63`` (terse) or ``9*7=63 multiply`` (verbose)."""
    _check_style(style)
    a, op, b, c = step
    line = f"{a}{op}{b}={c}"
    return f"{line} {VERBOSE_WORDS[op]}" if style == "verbose" else line


def format_answer(answer: int) -> str:
    """The final solution line, ``#236``; the same in both styles."""
    return f"#{answer}"


def format_solution(steps: list[Step], style: str = "terse") -> str:
    """Full solution text: one line per step, then the ``#answer`` line (no trailing newline)."""
    if not steps:
        raise ValueError("a solution needs at least one step")
    lines = [format_step(step, style) for step in steps]
    lines.append(format_answer(steps[-1][3]))
    return "\n".join(lines)


@dataclass
class Problem:
    """One ToyMath question with its reference steps and answer."""

    question: str
    steps: list[Step]
    answer: int

    @classmethod
    def from_steps(cls, steps: list[Step]) -> "Problem":
        return cls(question=format_question(steps), steps=list(steps), answer=steps[-1][3])

    def solution(self, style: str = "terse") -> str:
        """The reference solution text in the given style."""
        return format_solution(self.steps, style)

    def reference_lines(self) -> list[str]:
        """The terse reference lines, final ``#`` line included: what ``first_error`` compares to."""
        return [format_step(step) for step in self.steps] + [format_answer(self.answer)]


def _draw(rng: random.Random, cfg: ToyMathConfig) -> Problem:
    k = rng.randint(cfg.min_steps, cfg.max_steps)
    first = rng.randint(cfg.operand_min, cfg.operand_max)
    weights = list(cfg.operation_weights) or None
    ops = [
        (
            rng.choices(cfg.operations, weights)[0] if weights else rng.choice(cfg.operations),
            rng.randint(cfg.operand_min, cfg.operand_max),
        )
        for _ in range(k)
    ]
    return Problem.from_steps(chain_steps(first, ops, cfg.modulus))


def uses_heldout_fact(problem: Problem, heldout: Collection[tuple[int, str, int]]) -> bool:
    return any((a, op, b) in heldout for a, op, b, _ in problem.steps)


def make_problem(rng: random.Random, cfg: ToyMathConfig) -> Problem:
    """Draw one problem: k ~ U[min_steps, max_steps], operands uniform, operators by
    ``operation_weights``; with held-out facts, redrawn until it satisfies ``cfg.facts``."""
    heldout = heldout_fact_set(cfg)
    for _ in range(10_000):
        problem = _draw(rng, cfg)
        if not heldout or cfg.facts == "all" or uses_heldout_fact(problem, heldout) == (cfg.facts == "unseen"):
            return problem
    raise ValueError(f"could not draw a problem with facts={cfg.facts!r} from {cfg}")


def generate_problems(cfg: ToyMathConfig, n: int, seed: int, exclude: Collection[str] = ()) -> list[Problem]:
    """``n`` problems from ``random.Random(seed)``; same arguments, same list.

    ``exclude`` holds question strings to skip (e.g. benchmark questions, so no test question leaks
    into training); draws continue until ``n`` problems are kept. Duplicates are otherwise allowed.
    Raises ValueError if the distribution is too small to supply ``n`` non-excluded problems.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = random.Random(seed)
    problems: list[Problem] = []
    budget = 50 * n + 1000
    while len(problems) < n:
        if budget == 0:
            raise ValueError(
                f"could only draw {len(problems)} of {n} problems outside the {len(exclude)} "
                "excluded questions; the distribution is too small"
            )
        budget -= 1
        problem = make_problem(rng, cfg)
        if problem.question not in exclude:
            problems.append(problem)
    return problems


_QUESTION_FIRST = re.compile(r"\s*(-?[0-9]+)")
_QUESTION_PAIR = re.compile(r"\s*([+*-])\s*(-?[0-9]+)")


def problem_from_question(question: str, modulus: int = 0) -> Problem:
    """Parse a question string back into a Problem (reference steps computed left to right, mod
    ``modulus`` when it is not 0: the notation of a digit chain does not say it is one).

    Accepts the generator's notation (``9 *7 *2 -8 *2``) and tolerates extra whitespace; a negative
    operand is written right after its operator (``9 --3`` is nine minus minus three). Raises
    ValueError naming the offending position on anything else.
    """
    if not isinstance(question, str):
        raise ValueError(f"question must be a string, got {type(question).__name__}")
    match = _QUESTION_FIRST.match(question)
    if match is None:
        raise ValueError(f"malformed ToyMath question {question!r}: expected a leading integer")
    first = int(match.group(1))
    pos = match.end()
    ops: list[tuple[str, int]] = []
    while True:
        match = _QUESTION_PAIR.match(question, pos)
        if match is None:
            break
        ops.append((match.group(1), int(match.group(2))))
        pos = match.end()
    if question[pos:].strip():
        raise ValueError(
            f"malformed ToyMath question {question!r}: unexpected text at offset {pos}: "
            f"{question[pos : pos + 10]!r} (expected ' <op><int>' with op in {OPERATORS!r})"
        )
    if not ops:
        raise ValueError(f"malformed ToyMath question {question!r}: no operation")
    return Problem.from_steps(chain_steps(first, ops, modulus))


def problem_to_row(problem: Problem, style: str = "terse") -> dict:
    """The JSONL row the data notebooks write: question, expected_answer, reference_solution, n_steps."""
    return {
        "question": problem.question,
        "expected_answer": problem.answer,
        "reference_solution": problem.solution(style),
        "n_steps": len(problem.steps),
    }


# --------------------------------------------------------------------------------------------------
# Benchmarks: fixed, mildly shifted distributions derived from the training one
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Benchmark:
    """One ToyMath benchmark, defined in one entry: what it shifts, and the config its questions are
    drawn from given the training one (``None``: the benchmark does not apply to that task)."""

    shift: str
    config: Callable[[ToyMathConfig], ToyMathConfig | None]


# Weight of '*' in toy-times relative to the training operators' total: about 1 step in 8.
TIMES_SHARE = 0.125


def _raised_operand_max(operand_max: int) -> int:
    return operand_max + max(1, round(0.25 * abs(operand_max)))


def _long(cfg: ToyMathConfig, **more) -> ToyMathConfig:
    return replace(cfg, min_steps=cfg.max_steps, max_steps=cfg.max_steps + 1, **more)


def _times(cfg: ToyMathConfig) -> ToyMathConfig | None:
    if "*" in cfg.operations:
        return None
    weights = list(cfg.operation_weights) or [1.0] * len(cfg.operations)
    times = sum(weights) * TIMES_SHARE / (1 - TIMES_SHARE)
    return replace(cfg, operations=cfg.operations + "*", operation_weights=tuple(weights) + (times,))


# Multi-digit: a tiny model falls to ~0% at 5-6 steps or operands above 20, so the shifts are mild.
BENCHMARKS = {
    "toy-id": Benchmark("the training distribution itself", replace),
    "toy-long": Benchmark("one step longer: k in [max_steps, max_steps + 1]", _long),
    "toy-big": Benchmark(
        "larger operands: operand_max raised by ~25%",
        lambda cfg: replace(cfg, operand_max=_raised_operand_max(cfg.operand_max)),
    ),
    "toy-mixed": Benchmark(
        "both shifts of toy-long and toy-big at once",
        lambda cfg: _long(cfg, operand_max=_raised_operand_max(cfg.operand_max)),
    ),
}

# Digit chains: length is not a mild shift for a tiny model (0% one step outside the trained range),
# so the shifts keep notation and lengths and change which facts are asked.
CHAIN_BENCHMARKS = {
    "toy-id": Benchmark("the training distribution itself", replace),
    "toy-zero": Benchmark("operand 0 allowed (never an operand in training)", lambda cfg: replace(cfg, operand_min=0)),
    "toy-times": Benchmark("'*' mixed in at a low rate (never trained)", _times),
    "toy-unseen": Benchmark(
        "every question uses at least one held-out fact",
        lambda cfg: replace(cfg, facts="unseen") if cfg.heldout_facts else None,
    ),
}

# Benchmark seeds are >= 2**32; training seeds are expected below it, so the streams never coincide.
BENCHMARK_SEED_OFFSET = 2**32


def _benchmarks(train_cfg: ToyMathConfig) -> dict[str, Benchmark]:
    return CHAIN_BENCHMARKS if train_cfg.is_digit_chain else BENCHMARKS


def benchmark_descriptions(train_cfg: ToyMathConfig) -> dict[str, str]:
    """Name -> one-line description of the benchmarks of this task, in report order."""
    return {name: _benchmarks(train_cfg)[name].shift for name in benchmark_configs(train_cfg)}


def benchmark_table() -> str:
    """docs/toymath.md's table of the digit-chain benchmarks: :data:`CHAIN_BENCHMARKS`."""
    return "\n".join(
        ["| benchmark | shift |", "|---|---|", *(f"| `{name}` | {b.shift} |" for name, b in CHAIN_BENCHMARKS.items())]
    )


def benchmark_configs(train_cfg: ToyMathConfig) -> dict[str, ToyMathConfig]:
    """The benchmarks of this task as configs, ``toy-id`` first: :data:`CHAIN_BENCHMARKS` for digit chains
    (``toy-times`` only when training has no '*', ``toy-unseen`` only when the task holds facts out),
    else :data:`BENCHMARKS`. Shifts are kept mild on purpose: a benchmark where the policy is always
    right or always wrong says nothing about a reward model."""
    configs = {name: b.config(train_cfg) for name, b in _benchmarks(train_cfg).items()}
    return {name: cfg for name, cfg in configs.items() if cfg is not None}


def benchmark_seed(name: str, seed: int = 0) -> int:
    """A stable seed per (benchmark, seed): crc32 (not ``hash``, which varies per process) of the
    name, lifted above BENCHMARK_SEED_OFFSET so it cannot equal a training seed."""
    return BENCHMARK_SEED_OFFSET + zlib.crc32(f"toymath-benchmark/{name}/{seed}".encode())


def make_benchmark(name: str, train_cfg: ToyMathConfig, n: int, seed: int = 0) -> list[Problem]:
    """``n`` fixed problems of the named benchmark (deterministic in name, config, n and seed)."""
    configs = benchmark_configs(train_cfg)
    if name not in configs:
        raise ValueError(f"unknown ToyMath benchmark {name!r}; known: {sorted(configs)}")
    return generate_problems(configs[name], n, benchmark_seed(name, seed))


def benchmark_questions(
    train_cfg: ToyMathConfig, n: int, seed: int = 0, names: Iterable[str] | None = None
) -> set[str]:
    """All questions of the named benchmarks (default: all), to pass as ``generate_problems(...,
    exclude=...)`` so that no benchmark question is also a training question."""
    return {
        problem.question
        for name in (benchmark_configs(train_cfg) if names is None else names)
        for problem in make_benchmark(name, train_cfg, n, seed)
    }
