"""Adapters: rows of the public data sets the paper uses, mapped onto the project's common shapes.

Two shapes carry the method:

* **pairs** ``{question, correct, incorrect}`` (the OpenMathInstruct pair shape), what ``goalrm
  train-rm`` and ``goalrm get-representation`` read;
* **generations** ``{question, generated_solution, predicted_answer, expected_answer, is_correct}``
  (the Nemo-Skills shape), what ``goalrm eval-rm`` scores, one folder per benchmark.

Two more are kept as they are useful on their own: **questions** ``{question, expected_answer,
reference_solution}`` (a benchmark's ``test.jsonl``) and **attributes** (HelpSteer rows for
per-attribute goal states, :func:`goalrm_core.inference.goal_state.attribute_goal_states`).

Known formats (:data:`FORMATS`), each detected from a row's keys or named with ``fmt=``:

==================  ===========  ===============================================================
name                shape        a row holds
==================  ===========  ===============================================================
openmath_pairs      pairs        question, correct, incorrect
prompt_pairs        pairs        prompt, chosen, rejected
hh_rlhf             pairs        chosen, rejected: whole HH-RLHF dialogues, split at the last
                                 ``"\\n\\nAssistant:"`` (rows that cannot be split are counted,
                                 reported and skipped)
nemo_skills         generations  question, generated_solution, predicted_answer, expected_answer,
                                 is_correct (``output-greedy.jsonl`` / ``output-rs*.jsonl``)
gsm8k_solutions     generations  question, ground_truth ("... A: N") and one object per model
                                 ``{solution, is_correct}``: one generation per model solution
gsm8k               questions    question, answer ("... #### N")
helpsteer           attributes   prompt, response, helpfulness, correctness, coherence,
                                 complexity, verbosity (integers 0-4)
==================  ===========  ===============================================================

Sources are read by :func:`goalrm_core.data.preferences.read_source` (local ``.jsonl``,
``.jsonl.gz``, ``.json``, ``.parquet``, ``save_to_disk`` directories; a Hub name only when the Hub
is reachable, with the same clear offline error), and pair rows are normalised by
:func:`goalrm_core.data.preferences.normalise_row`, so the trainer and the adapters agree on every
row. A file holds one format: it is detected from the first row, and every row must then fit it;
a row that does not fit raises an error naming the file, the row, the format's fields and every
known format's fields.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from goalrm_core.data.io import ArtifactError, check_label, parse_label, read_jsonl, write_jsonl
from goalrm_core.data.preferences import (
    HH_RLHF,
    OPENMATH_PAIRS,
    PROMPT_FORM,
    PROMPT_PAIRS,
    PreferenceDataError,
    SourceReport,
    normalise_row,
    read_source,
)
from goalrm_core.data.questions import group_by_question
from goalrm_core.data.schema import GENERATION_FIELDS, PAIR_FIELDS
from goalrm_core.flags import check_choice, safe_path_part

logger = logging.getLogger(__name__)

HELPSTEER_ATTRIBUTES = ("helpfulness", "correctness", "coherence", "complexity", "verbosity")
HELPSTEER_FIELDS = ("prompt", "response", *HELPSTEER_ATTRIBUTES)
#: The official code's math benchmarks (Nemo-Skills generation folders), in the order of its scripts.
NEMO_SKILLS_BENCHMARKS = ("gsm8k", "math", "gsm-hard", "mawps", "asdiv", "algebra222", "svamp")
KINDS = ("pairs", "generations", "questions", "attributes")


class AdapterError(PreferenceDataError):
    """A source or row fits none (or several) of the known formats, or a field has the wrong type."""


@dataclass(frozen=True)
class DataFormat:
    """One known row format: its name, the shape it maps onto, the keys a row must hold."""

    name: str
    kind: str
    required: tuple[str, ...]
    description: str
    convert: Callable[[dict, str, SourceReport], list[dict]] = field(repr=False, compare=False)


# ---------------------------------------------------------------------------------------------
# small parsers
# ---------------------------------------------------------------------------------------------

_GSM8K_ANSWER = re.compile(r"####\s*(.+?)\s*$", re.S)
_FINAL_A_LINE = re.compile(r"(?m)^\s*A:\s*(.*?)\s*$")


def parse_number(text: str) -> int | float | str:
    """An answer as a number when it is one (commas and a leading ``$`` removed), else the text.

    >>> parse_number("70,000"), parse_number("-3"), parse_number("0.5"), parse_number("1/2")
    (70000, -3, 0.5, '1/2')
    """
    cleaned = text.strip().replace(",", "").lstrip("$").strip()
    if re.fullmatch(r"[-+]?\d+", cleaned):
        return int(cleaned)
    if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+)", cleaned):
        return float(cleaned)
    return cleaned


def gsm8k_answer(answer: str) -> int | float | str | None:
    """The reference answer after GSM8K's ``####`` marker, commas removed (``None`` without one).

    >>> gsm8k_answer("2+1=<<2+1=3>>3 bolts\\n#### 3"), gsm8k_answer("#### 1,000"), gsm8k_answer("no marker")
    (3, 1000, None)
    """
    match = _GSM8K_ANSWER.search(answer)
    return parse_number(match.group(1)) if match else None


def final_answer_line(text: str) -> int | float | str | None:
    """The answer of a solution ending in an ``A: N`` line (the GSM8K model-solutions file).

    >>> final_answer_line("9 * 2 = 18\\nA: 18"), final_answer_line("no answer line") is None
    (18, True)
    """
    found = _FINAL_A_LINE.findall(text)
    return parse_number(found[-1]) if found and found[-1] else None


# ---------------------------------------------------------------------------------------------
# per-format conversion of one row (label = "file:line" for error messages)
# ---------------------------------------------------------------------------------------------


def _field_error(label: str, fmt: str, detail: str) -> AdapterError:
    return AdapterError(f"{label}: {detail} (format {fmt!r}: {FORMATS[fmt].description})")


def _string(row: dict, key: str, label: str, fmt: str) -> str:
    value = row[key]
    if not isinstance(value, str):
        raise _field_error(label, fmt, f"field {key!r} must be a string, got {type(value).__name__}")
    return value


def _flag(value: Any, key: str, label: str, fmt: str) -> bool:
    try:
        return parse_label(value, key)
    except ValueError as e:
        raise _field_error(label, fmt, str(e)) from None


def _pair_row(fmt: str) -> Callable[[dict, str, SourceReport], list[dict]]:
    def convert(row: dict, label: str, report: SourceReport) -> list[dict]:
        # Only this format's keys, so normalise_row applies exactly the format asked for.
        keep = [
            *FORMATS[fmt].required,
            *(["first_error_char"] if fmt == OPENMATH_PAIRS and "first_error_char" in row else []),
        ]
        out = normalise_row({k: row[k] for k in keep}, label, report)  # counts the row under its shape, ``fmt``
        return [] if out is None else [{k: v for k, v in out.items() if k != PROMPT_FORM}]  # the trainer's private note

    return convert


def _nemo_skills_row(row: dict, label: str, report: SourceReport) -> list[dict]:
    fmt = "nemo_skills"
    out = {
        "question": _string(row, "question", label, fmt),
        "generated_solution": _string(row, "generated_solution", label, fmt),
        "predicted_answer": row["predicted_answer"],
        "expected_answer": row["expected_answer"],
        "is_correct": _flag(row["is_correct"], "is_correct", label, fmt),
    }
    out.update((k, v) for k, v in row.items() if k not in out)  # keep the file's other fields
    return [out]


def solution_entries(row: dict) -> list[tuple[str, dict]]:
    """``(model name, {solution, is_correct})`` pairs of a GSM8K model-solutions row, in file order."""
    return [(k, v) for k, v in row.items() if isinstance(v, dict) and {"solution", "is_correct"} <= v.keys()]


def _gsm8k_solutions_rows(row: dict, label: str, report: SourceReport) -> list[dict]:
    fmt = "gsm8k_solutions"
    question = _string(row, "question", label, fmt)
    ground_truth = _string(row, "ground_truth", label, fmt)
    entries = solution_entries(row)
    if not entries:
        raise _field_error(
            label, fmt, "no model solution: expected at least one field holding an object {solution, is_correct}"
        )
    expected = final_answer_line(ground_truth)
    out = []
    for index, (model, entry) in enumerate(entries):
        solution = entry["solution"]
        if not isinstance(solution, str):
            raise _field_error(label, fmt, f"{model}.solution must be a string, got {type(solution).__name__}")
        out.append(
            {
                "question": question,
                "generated_solution": solution,
                "predicted_answer": final_answer_line(solution),
                "expected_answer": expected,
                "is_correct": _flag(entry["is_correct"], f"{model}.is_correct", label, fmt),
                "model": model,
                "sample_index": index,
            }
        )
    return out


def _gsm8k_row(row: dict, label: str, report: SourceReport) -> list[dict]:
    fmt = "gsm8k"
    answer = _string(row, "answer", label, fmt)
    expected = gsm8k_answer(answer)
    if expected is None:
        raise _field_error(label, fmt, "field 'answer' has no '#### N' final answer")
    return [
        {"question": _string(row, "question", label, fmt), "expected_answer": expected, "reference_solution": answer}
    ]


def _helpsteer_row(row: dict, label: str, report: SourceReport) -> list[dict]:
    fmt = "helpsteer"
    out: dict[str, Any] = {
        "prompt": _string(row, "prompt", label, fmt),
        "response": _string(row, "response", label, fmt),
    }
    for attr in HELPSTEER_ATTRIBUTES:
        value = row[attr]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 4:
            raise _field_error(label, fmt, f"field {attr!r} must be an integer 0-4, got {value!r}")
        out[attr] = value
    return [out]


FORMATS: dict[str, DataFormat] = {}


def _register(name: str, kind: str, required: Sequence[str], description: str, convert) -> None:
    FORMATS[name] = DataFormat(name, kind, tuple(required), description, convert)


# the pair formats are preferences' three shapes, under the same names
_register(
    OPENMATH_PAIRS,
    "pairs",
    PAIR_FIELDS,
    "OpenMathInstruct-style preference pairs: question, correct, incorrect",
    _pair_row(OPENMATH_PAIRS),
)
_register(
    PROMPT_PAIRS,
    "pairs",
    ("prompt", "chosen", "rejected"),
    "prompt-response pairs: prompt, chosen, rejected",
    _pair_row(PROMPT_PAIRS),
)
_register(
    HH_RLHF,
    "pairs",
    ("chosen", "rejected"),
    "HH-RLHF whole dialogues: chosen, rejected (split at the last '\\n\\nAssistant:')",
    _pair_row(HH_RLHF),
)
_register(
    "nemo_skills",
    "generations",
    GENERATION_FIELDS,
    "Nemo-Skills generations: question, generated_solution, predicted_answer, expected_answer, is_correct",
    _nemo_skills_row,
)
_register(
    "gsm8k_solutions",
    "generations",
    ("question", "ground_truth"),
    "GSM8K model solutions: question, ground_truth ('A: N'), and per model an object {solution, is_correct}",
    _gsm8k_solutions_rows,
)
_register("gsm8k", "questions", ("question", "answer"), "GSM8K: question, answer (ending in '#### N')", _gsm8k_row)
_register(
    "helpsteer",
    "attributes",
    HELPSTEER_FIELDS,
    "HelpSteer: prompt, response, helpfulness, correctness, coherence, complexity, verbosity (0-4)",
    _helpsteer_row,
)


def describe_formats(kind: str | None = None) -> str:
    """One line per known format (of ``kind``, if given): name, shape, fields."""
    return "\n".join(f"  - {f.name} ({f.kind}): {f.description}" for f in FORMATS.values() if kind in (None, f.kind))


def formats_of_kind(kind: str) -> list[str]:
    check_choice("kind", kind, KINDS)
    return [f.name for f in FORMATS.values() if f.kind == kind]


# ---------------------------------------------------------------------------------------------
# detection
# ---------------------------------------------------------------------------------------------


def _check_format_name(fmt: str) -> DataFormat:
    if fmt not in FORMATS:
        raise AdapterError(f"unknown format {fmt!r}; known formats:\n{describe_formats()}")
    return FORMATS[fmt]


def detect_format(row: Any, label: str = "row") -> str:
    """The name of the one known format whose fields ``row`` holds.

    When several fit, the most specific wins if its fields include all the others'
    (``prompt/chosen/rejected`` is ``prompt_pairs``, not ``hh_rlhf``); otherwise the row is
    ambiguous. Unknown and ambiguous rows raise :class:`AdapterError` listing the known formats.

    >>> detect_format({"question": "q", "answer": "#### 1"})
    'gsm8k'
    >>> detect_format({"prompt": "p", "chosen": "a", "rejected": "b"})
    'prompt_pairs'
    """
    if not isinstance(row, dict):
        raise AdapterError(
            f"{label}: expected a JSON object, got {type(row).__name__}; known formats:\n{describe_formats()}"
        )
    keys = set(row)
    matches = [f for f in FORMATS.values() if set(f.required) <= keys]
    if len(matches) == 1:
        return matches[0].name
    specific = [f for f in matches if all(set(g.required) <= set(f.required) for g in matches)]
    if len(specific) == 1:
        return specific[0].name
    if matches:
        names = ", ".join(f.name for f in matches)
        raise AdapterError(
            f"{label}: ambiguous format: the row's keys {sorted(keys)} fit several formats ({names}); "
            f"name one explicitly (fmt=...). Known formats:\n{describe_formats()}"
        )
    closest = sorted(FORMATS.values(), key=lambda f: len(set(f.required) - keys))
    best = len(set(closest[0].required) - keys)
    near = [f for f in closest if len(set(f.required) - keys) == best and len(set(f.required) & keys) > 0]
    hint = "".join(f"; closest: {f.name}, missing {sorted(set(f.required) - keys)}" for f in near[:2])
    raise AdapterError(
        f"{label}: unknown format: the row's keys {sorted(keys)} fit no known format{hint}. Known "
        f"formats:\n{describe_formats()}"
    )


def adapt_row(row: Any, fmt: str | None = None, label: str = "row", report: SourceReport | None = None) -> list[dict]:
    """One raw row -> the rows of its shape (zero for a skipped HH dialogue, several for a
    GSM8K model-solutions row). ``fmt=None`` detects the format from the row's keys."""
    fmt = detect_format(row, label) if fmt is None else _check_format_name(fmt).name
    spec = FORMATS[fmt]
    if not isinstance(row, dict):
        raise AdapterError(f"{label}: expected a JSON object, got {type(row).__name__}")
    missing = [k for k in spec.required if k not in row]
    if missing:
        raise AdapterError(
            f"{label}: missing field(s) {missing} for format {fmt!r} (expects {', '.join(spec.required)}; "
            f"the row has {sorted(row)}). Known formats:\n{describe_formats()}"
        )
    report = report if report is not None else SourceReport(source=label)
    if spec.kind != "pairs":  # a pair row is counted by normalise_row, under the same name
        report.shapes[fmt] = report.shapes.get(fmt, 0) + 1
    return spec.convert(row, label, report)


# ---------------------------------------------------------------------------------------------
# sources
# ---------------------------------------------------------------------------------------------


@dataclass
class AdaptedData:
    """The rows of one source in their common shape, with the format found and what was skipped."""

    source: str
    format: str
    kind: str
    rows: list[dict]
    report: SourceReport

    def summary(self) -> str:
        return f"{self.report.summary()} [format {self.format}: {self.kind}]"

    def __len__(self) -> int:
        return len(self.rows)


def load_adapted(
    spec: str | Path,
    fmt: str | None = None,
    kind: str | None = None,
    split: str = "train",
    limit: int = 0,
) -> AdaptedData:
    """Every row of one source (file, ``save_to_disk`` directory, or Hub name when online) in the
    common shape of its format.

    ``fmt`` names the format (default: detected from the first row); ``kind`` requires a shape
    (``"pairs"``, ``"generations"``, ...). ``limit`` > 0 stops after that many raw rows. Skipped
    HH dialogues are counted in ``report`` and logged as a warning; a source whose rows are all
    skipped, or that is empty, raises.
    """
    spec = str(spec)
    if fmt is not None:
        _check_format_name(fmt)
    if kind is not None:
        allowed = formats_of_kind(kind)  # also rejects an unknown kind
        if fmt is not None and fmt not in allowed:
            raise AdapterError(
                f"format {fmt!r} gives {FORMATS[fmt].kind}, not {kind}; formats giving {kind}: {', '.join(allowed)}"
            )
    report = SourceReport(source=spec)
    rows: list[dict] = []
    found = fmt
    for label, raw in read_source(spec, split):
        if found is None:
            found = detect_format(raw, label)
            if kind is not None and FORMATS[found].kind != kind:
                raise AdapterError(
                    f"{label}: {spec} holds {FORMATS[found].kind} (format {found!r}), but {kind} were asked for; "
                    f"formats giving {kind}: {', '.join(formats_of_kind(kind))}"
                )
        report.n_read += 1
        rows.extend(adapt_row(raw, found, label, report))
        if limit and report.n_read >= limit:
            break
    if found is None or report.n_read == 0:
        raise AdapterError(f"{spec}: no rows")
    report.n_used = len(rows)
    if not rows:
        raise AdapterError(f"every row of {spec} was skipped: {report.summary()}")
    (logger.warning if report.n_skipped else logger.info)(report.summary())
    return AdaptedData(spec, found, FORMATS[found].kind, rows, report)


def load_pairs(spec: str | Path, fmt: str | None = None, split: str = "train", limit: int = 0) -> AdaptedData:
    """``{question, correct, incorrect}`` rows from OpenMathInstruct-style pairs, prompt/chosen/rejected
    pairs or HH-RLHF dialogues (a Hub name is read only when online, as in ``--dataset``)."""
    return load_adapted(spec, fmt, "pairs", split, limit)


def load_generations(spec: str | Path, fmt: str | None = None, split: str = "train", limit: int = 0) -> AdaptedData:
    """Generation rows from a Nemo-Skills file or the GSM8K model-solutions file (one row per solution)."""
    return load_adapted(spec, fmt, "generations", split, limit)


def load_questions(spec: str | Path, fmt: str | None = None, split: str = "test", limit: int = 0) -> AdaptedData:
    """``{question, expected_answer, reference_solution}`` rows (GSM8K)."""
    return load_adapted(spec, fmt, "questions", split, limit)


def load_helpsteer(spec: str | Path, fmt: str | None = None, split: str = "train", limit: int = 0) -> AdaptedData:
    """HelpSteer rows (prompt, response, five 0-4 attributes) for per-attribute goal states."""
    return load_adapted(spec, fmt, "attributes", split, limit)


# ---------------------------------------------------------------------------------------------
# generation folders: Nemo-Skills (output-greedy.jsonl, output-rs*.jsonl) or ours (greedy/samples)
# ---------------------------------------------------------------------------------------------


def benchmark_dir(root: Path, bench: str) -> Path:
    """``root/bench``, or an error naming the benchmarks that exist (or the name, when it is not a
    plain folder name)."""
    path = root / safe_path_part(bench, "benchmark")
    if not path.is_dir():
        existing = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        raise ArtifactError(
            f"benchmark folder {path} is missing; benchmarks in {root}: {', '.join(existing) or 'none'}"
        )
    return path


def generation_files(bench_dir: Path) -> dict[str, list[Path]]:
    """``{"greedy": [...], "all": [...]}`` for one benchmark folder, in either layout."""
    greedy = [p for p in (bench_dir / "greedy.jsonl", bench_dir / "output-greedy.jsonl") if p.exists()]
    samples = (
        [bench_dir / "samples.jsonl"]
        if (bench_dir / "samples.jsonl").exists()
        else sorted(bench_dir.glob("output-rs*.jsonl"))
    )
    return {"greedy": greedy[:1], "all": samples}


_RS_NUMBER = re.compile(r"output-rs(\d+)\.jsonl$")


@dataclass
class BenchmarkFolder:
    """One benchmark's generation files and what checking them found."""

    name: str
    path: Path
    layout: str  # "goalrm" (greedy.jsonl / samples.jsonl), "nemo-skills" (output-*.jsonl) or "mixed"
    greedy: Path | None
    samples: list[Path]
    n_greedy: int | None = None  # rows, counted when every row was checked
    n_samples: int | None = None


def _sample_number(path: Path) -> int:
    match = _RS_NUMBER.search(path.name)
    return int(match.group(1)) if match else 0


def _check_generation_file(path: Path, check: str) -> int | None:
    """Validate a generation file's rows (``first`` row or ``all``); returns the row count for ``all``."""
    if check == "none":
        return None
    if check == "first":
        for label, raw in read_source(str(path)):
            adapt_row(raw, "nemo_skills", label)
            return None
        raise AdapterError(f"{path}: no rows")
    return len(load_generations(path, fmt="nemo_skills").rows)


def list_generation_folder(
    root: str | Path,
    benchmarks: Sequence[str] | None = None,
    check: str = "first",
) -> dict[str, BenchmarkFolder]:
    """The benchmark folders of a generations directory, in either layout, validated.

    ``benchmarks=None`` lists every sub-folder holding generation files (the official code's benchmarks first,
    in :data:`NEMO_SKILLS_BENCHMARKS` order). A requested benchmark without a folder, or a folder
    without a greedy file, is an error naming what exists. ``check`` is ``"first"`` (the first row
    of each file fits the generation shape), ``"all"`` (every row; counts filled in) or ``"none"``.
    """
    if check not in ("first", "all", "none"):
        raise ValueError(f"check must be 'first', 'all' or 'none', got {check!r}")
    root = Path(root)
    if not root.is_dir():
        raise ArtifactError(f"{root}: generations folder not found")
    if benchmarks is None:
        found = [p.name for p in root.iterdir() if p.is_dir() and any(generation_files(p).values())]
        order = {name: i for i, name in enumerate(NEMO_SKILLS_BENCHMARKS)}
        benchmarks = sorted(found, key=lambda n: (order.get(n, len(order)), n))
        if not benchmarks:
            raise ArtifactError(
                f"{root}: no benchmark folders with generation files (greedy.jsonl / samples.jsonl or "
                f"output-greedy.jsonl / output-rs*.jsonl); expected e.g. {root}/gsm8k/output-greedy.jsonl"
            )
    out = {}
    for bench in benchmarks:
        path = benchmark_dir(root, bench)
        files = generation_files(path)
        greedy = files["greedy"][0] if files["greedy"] else None
        samples = sorted(files["all"], key=_sample_number)
        if greedy is None:
            present = sorted(p.name for p in path.iterdir())
            raise ArtifactError(
                f"{path}: no greedy generations (greedy.jsonl or output-greedy.jsonl); files there: "
                f"{', '.join(present) or 'none'}"
            )
        names = [greedy.name] + [p.name for p in samples]
        nemo = [n.startswith("output-") for n in names]
        layout = "nemo-skills" if all(nemo) else "goalrm" if not any(nemo) else "mixed"
        n_greedy = _check_generation_file(greedy, check)
        counts = [_check_generation_file(p, check) for p in samples]
        n_samples = sum(counts) if check == "all" else None
        out[bench] = BenchmarkFolder(bench, path, layout, greedy, samples, n_greedy, n_samples)
    return out


def _samples_question_major(files: Sequence[Path]) -> list[dict]:
    """Rows of the sample files, grouped by question (first-appearance order), each tagged with its
    ``sample_index`` (the ``rs`` number of a Nemo-Skills file, or the one the row already has)."""
    rows = []
    for path in files:
        for row in load_generations(path, fmt="nemo_skills").rows:
            if path.name.startswith("output-rs"):
                row["sample_index"] = _sample_number(path)
            rows.append(row)
    return [r for group in group_by_question(rows).values() for r in group]


def convert_generation_folder(
    src: str | Path,
    out: str | Path,
    benchmarks: Sequence[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Write ``<out>/<bench>/{greedy,samples}.jsonl`` from a Nemo-Skills (or our) generations folder.

    Every row is checked and written in the generation shape (the five common fields first, the
    file's other fields kept); samples are ordered question by question with their ``sample_index``.
    A folder already in our layout with ``out == src`` is left as it is (``converted: False``).
    Returns per benchmark the layout found, the rows written and whether anything was written.
    """
    src, out = Path(src), Path(out)
    folders = list_generation_folder(src, benchmarks, check="all")
    summary: dict[str, dict[str, Any]] = {}
    for bench, folder in folders.items():
        if folder.layout == "goalrm" and out.resolve() == src.resolve():
            summary[bench] = {
                "layout": folder.layout,
                "greedy": folder.n_greedy,
                "samples": folder.n_samples,
                "converted": False,
            }
            continue
        greedy_rows = load_generations(folder.greedy, fmt="nemo_skills").rows
        n_greedy = write_jsonl(out / bench / "greedy.jsonl", greedy_rows)
        n_samples = (
            write_jsonl(out / bench / "samples.jsonl", _samples_question_major(folder.samples)) if folder.samples else 0
        )
        summary[bench] = {"layout": folder.layout, "greedy": n_greedy, "samples": n_samples, "converted": True}
    return summary


def write_generation_folder(rows: Sequence[dict], out: str | Path, bench: str, samples: bool = False) -> dict[str, int]:
    """Write generation rows as one benchmark of our layout: ``<out>/<bench>/greedy.jsonl`` (and the
    same rows, question by question, as ``samples.jsonl`` when ``samples``, for the voting metrics).

    Every row is checked against the generation shape first.
    """
    checked = [adapt_row(r, "nemo_skills", f"{bench} row {i + 1}")[0] for i, r in enumerate(rows)]
    counts = {"greedy": write_jsonl(Path(out) / bench / "greedy.jsonl", checked)}
    if samples:
        grouped = [r for group in group_by_question(checked).values() for r in group]
        counts["samples"] = write_jsonl(Path(out) / bench / "samples.jsonl", grouped)
    return counts


def read_generation_folder(root: str | Path, bench: str, split: str = "greedy") -> list[dict]:
    """Rows of one benchmark's ``greedy`` or ``samples`` file, in either layout."""
    if split not in ("greedy", "samples"):
        raise ValueError(f"split must be 'greedy' or 'samples', got {split!r}")
    folder = list_generation_folder(root, [bench], check="none")[bench]
    files = [folder.greedy] if split == "greedy" else folder.samples
    return [r for f in files for r in read_jsonl(f, required=GENERATION_FIELDS, check=check_label)]
