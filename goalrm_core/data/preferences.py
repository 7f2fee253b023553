"""Preference pairs for ``--dataset`` / ``--dataset_probs``: load, normalise, blend, split.

A source is a local ``.jsonl`` / ``.jsonl.gz`` / ``.json`` / ``.parquet`` file, a directory written by
``datasets.save_to_disk`` (or one holding ``<split>.jsonl``), or a Hub name, which is only tried
when the Hub is reachable. Every row is normalised to the pair shape ``{question, correct,
incorrect}`` from one of three accepted shapes:

* OpenMathInstruct pairs: ``question`` / ``correct`` / ``incorrect``;
* prompt-response pairs: ``prompt`` / ``chosen`` / ``rejected``;
* HH-RLHF whole dialogues: ``chosen`` / ``rejected`` only, split at the last ``"\\n\\nAssistant:"``
  into the shared dialogue (the question) and the final assistant turn (the response).

HH rows that cannot be split (no assistant turn, the two dialogues differ before their final turn,
or an empty final turn) are skipped, counted, and reported: never dropped silently.
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from goalrm_core.data.io import ArtifactError, iter_jsonl
from goalrm_core.flags import check_choice

logger = logging.getLogger(__name__)

ASSISTANT_TURN = "\n\nAssistant:"
# The three accepted pair shapes, by the one set of names the adapters' formats use too
# (``adapters.FORMATS``, ``--data-format``) and a source's report counts rows under.
OPENMATH_PAIRS = "openmath_pairs"  # question / correct / incorrect
PROMPT_PAIRS = "prompt_pairs"  # prompt / chosen / rejected
HH_RLHF = "hh_rlhf"  # chosen / rejected whole HH-RLHF dialogues
CUSTOM_KEYS = "custom_keys"  # the keys --prompt_key / --chosen_key / --rejected_key name
ACCEPTED_SHAPES = (
    "question/correct/incorrect (OpenMathInstruct pairs), "
    "prompt/chosen/rejected, or chosen/rejected whole HH-RLHF dialogues"
)
_LOCAL_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".parquet")


class PreferenceDataError(ArtifactError):
    """A preference source cannot be read or a row has none of the accepted shapes."""


@dataclass
class SourceReport:
    """What loading one source did: rows read, skipped (by reason) and kept after blending."""

    source: str
    n_read: int = 0
    n_skipped_no_assistant_turn: int = 0
    n_skipped_no_shared_prefix: int = 0
    n_skipped_empty_response: int = 0
    skipped_rows: list[str] = field(default_factory=list)  # "source:row" labels, the first 20
    n_used: int = 0
    shapes: dict[str, int] = field(
        default_factory=dict
    )  # rows per shape: OPENMATH_PAIRS, PROMPT_PAIRS, HH_RLHF (or an adapter's format)

    @property
    def n_skipped(self) -> int:
        return self.n_skipped_no_assistant_turn + self.n_skipped_no_shared_prefix + self.n_skipped_empty_response

    def summary(self) -> str:
        text = f"{self.source}: {self.n_read} rows read, {self.n_used} used"
        if self.n_skipped:
            text += (
                f"; {self.n_skipped} skipped ({self.n_skipped_no_assistant_turn} without a final "
                f"'\\n\\nAssistant:' turn, {self.n_skipped_no_shared_prefix} whose chosen/rejected dialogues "
                f"differ before it, {self.n_skipped_empty_response} with an empty final turn; first: "
                f"{', '.join(self.skipped_rows[:5])})"
            )
        return text


# ---------------------------------------------------------------------------------------------
# reading one source
# ---------------------------------------------------------------------------------------------


def hub_offline() -> bool:
    """True when the environment says the Hugging Face Hub must not be contacted."""
    truthy = {"1", "true", "yes", "on"}
    return any(os.environ.get(name, "").strip().lower() in truthy for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def hub_reachable(timeout: float = 3.0) -> bool:
    """A quick TCP probe of the Hub endpoint (skipped behind a proxy), so an offline machine fails
    in seconds instead of after the client's retries."""
    import socket
    from urllib.parse import urlparse

    if any(os.environ.get(name) for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        socket.create_connection(
            (url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout=timeout
        ).close()
        return True
    except OSError:
        return False


def _offline_error(spec: str, reason: str) -> PreferenceDataError:
    return PreferenceDataError(
        f"dataset {spec!r} is not a local file/dir and the Hub is unreachable (offline: {reason}). "
        f"Pass a local .jsonl/.json/.parquet file or a datasets.save_to_disk directory, "
        f"or download it on a machine with network access first."
    )


def _iter_json_lines(path: Path) -> Iterator[tuple[str, Any]]:
    for lineno, value in iter_jsonl(path):
        yield f"{path}:{lineno}", value


def _read_json_file(path: Path) -> Iterator[tuple[str, Any]]:
    """A ``.json`` file holds either one JSON array of objects or JSON lines (as many HF dumps do)."""
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        yield from _iter_json_lines(path)
        return
    if isinstance(data, dict) and len(data) == 1 and isinstance(next(iter(data.values())), list):
        data = next(iter(data.values()))  # {"train": [...]} or {"data": [...]}
    if not isinstance(data, list):
        raise PreferenceDataError(
            f"{path}: expected a JSON array of objects (or JSON lines), got {type(data).__name__}"
        )
    for i, row in enumerate(data, start=1):
        yield f"{path} row {i}", row


def _read_table(table: Iterable[dict], label: str) -> Iterator[tuple[str, Any]]:
    for i, row in enumerate(table, start=1):
        yield f"{label} row {i}", row


# Names a split goes by: a held-out split may be called eval, test or validation.
SPLIT_ALIASES = {"eval": ("eval", "test", "validation", "valid"), "test": ("test", "eval", "validation", "valid")}


def split_candidates(split: str) -> tuple[str, ...]:
    return SPLIT_ALIASES.get(split, (split,))


def _read_saved_dataset(path: Path, split: str) -> Iterator[tuple[str, Any]]:
    import datasets

    data = datasets.load_from_disk(str(path))
    if isinstance(data, datasets.DatasetDict):
        name = next((c for c in split_candidates(split) if c in data), None)
        if name is None:
            raise PreferenceDataError(
                f"{path}: no split {split!r} in the saved DatasetDict (splits: {', '.join(data)})"
            )
        data = data[name]
    yield from _read_table(data, str(path))


def _read_hub(spec: str, split: str) -> Iterator[tuple[str, Any]]:
    if hub_offline():
        raise _offline_error(spec, "HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set")
    if not hub_reachable():
        raise _offline_error(spec, "cannot connect to the Hub endpoint")
    import datasets

    try:
        builder = datasets.load_dataset_builder(spec)
        available = set(builder.info.splits or ())
        name = next((c for c in split_candidates(split) if c in available), split)
        data = datasets.load_dataset(spec, split=name)
    except (ConnectionError, TimeoutError, OSError) as e:
        raise _offline_error(spec, f"{type(e).__name__}: {str(e)[:200]}") from None
    except Exception as e:  # the Hub client raises its own types when it cannot connect
        if any(
            word in f"{type(e).__name__} {e}".lower()
            for word in ("connect", "offline", "timeout", "resolve", "network")
        ):
            raise _offline_error(spec, f"{type(e).__name__}: {str(e)[:200]}") from None
        raise
    yield from _read_table(data, spec)


def held_out_split(spec: str) -> str | None:
    """The name of a source's own held-out split (``test``, else ``validation``/``eval``), or None when
    it has none: a single file, or a Hub dataset that cannot be reached to ask."""
    path = Path(spec).expanduser()
    names: set[str] = set()
    if path.is_dir():
        if (path / "dataset_dict.json").exists():
            names = set(json.loads((path / "dataset_dict.json").read_text()).get("splits", []))
        else:
            names = {
                n for n in SPLIT_ALIASES["test"] for suffix in _LOCAL_SUFFIXES if (path / f"{n}{suffix}").is_file()
            }
    elif not path.exists() and not hub_offline() and hub_reachable():
        import datasets  # lazy: slow to import, and only Hub sources need it here

        names = set(datasets.load_dataset_builder(spec).info.splits or ())
    return next((n for n in SPLIT_ALIASES["test"] if n in names), None)


def read_source(spec: str, split: str = "train") -> Iterator[tuple[str, Any]]:
    """Yield ``(label, raw_row)`` from one source; ``label`` names the file and line or row."""
    path = Path(spec).expanduser()
    if path.is_file():
        name = path.name.lower()
        if name.endswith(".jsonl") or name.endswith(".jsonl.gz"):
            return _iter_json_lines(path)
        if name.endswith(".json"):
            return _read_json_file(path)
        if name.endswith(".parquet"):
            import pandas as pd

            return _read_table(pd.read_parquet(path).to_dict(orient="records"), str(path))
        raise PreferenceDataError(f"{path}: unsupported file type; expected one of {', '.join(_LOCAL_SUFFIXES)}")
    if path.is_dir():
        if any((path / marker).exists() for marker in ("dataset_dict.json", "state.json", "dataset_info.json")):
            return _read_saved_dataset(path, split)
        for name in split_candidates(split):
            for suffix in _LOCAL_SUFFIXES:
                if (path / f"{name}{suffix}").is_file():
                    return read_source(str(path / f"{name}{suffix}"), split)
        raise PreferenceDataError(
            f"{path}: a directory but neither a datasets.save_to_disk directory nor one holding "
            f"{' / '.join(n + '.jsonl' for n in split_candidates(split))}"
        )
    looks_like_path = spec.startswith((".", "/", "~")) or spec.lower().endswith(_LOCAL_SUFFIXES) or spec.count("/") > 1
    if looks_like_path:
        raise PreferenceDataError(f"{spec}: file or directory not found")
    return _read_hub(spec, split)


# ---------------------------------------------------------------------------------------------
# normalising rows to {question, correct, incorrect}
# ---------------------------------------------------------------------------------------------


def _shape_error(label: str, row: Any, detail: str) -> PreferenceDataError:
    keys = sorted(row) if isinstance(row, dict) else type(row).__name__
    return PreferenceDataError(f"{label}: {detail} (row keys: {keys}); accepted shapes: {ACCEPTED_SHAPES}")


def _text(row: dict, key: str, label: str) -> str:
    value = row[key]
    if not isinstance(value, str):
        raise _shape_error(label, row, f"field {key!r} must be a string, got {type(value).__name__}")
    return value


def split_dialogue(text: str) -> tuple[str, str] | None:
    """Split an HH-RLHF dialogue into (everything up to and including the last assistant cue, reply).

    >>> split_dialogue("\\n\\nHuman: hi\\n\\nAssistant: hello")
    ('\\n\\nHuman: hi\\n\\nAssistant:', ' hello')
    >>> split_dialogue("no turns here") is None
    True
    """
    cut = text.rfind(ASSISTANT_TURN)
    if cut < 0:
        return None
    cut += len(ASSISTANT_TURN)
    return text[:cut], text[cut:]


def _count_shape(report: SourceReport | None, shape: str) -> None:
    if report is not None:
        report.shapes[shape] = report.shapes.get(shape, 0) + 1


HH_FORMATS = ("dialogue", "split")


def _error_offset(row: dict, label: str, length: int) -> int:
    """A pair's optional ``first_error_char``: the offset of the first wrong character of its
    incorrect response, an integer in [0, len(incorrect)]."""
    value = row["first_error_char"]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= length:
        raise _shape_error(
            label,
            row,
            f"field 'first_error_char' must be an integer offset in [0, {length}] "
            f"(the incorrect response's length), got {value!r}",
        )
    return value


# How a normalised row's prompt takes a template (the private key PROMPT_FORM; absent = every template applies):
# NO_INPUT_TEMPLATE rows take goalrm's --template but not the official --input_template (the official code
# formats only question/correct/incorrect rows and --prompt_key rows with it); AS_IS rows take none.
PROMPT_FORM = "_prompt_form"
NO_INPUT_TEMPLATE, AS_IS = "no_input_template", "as_is"


def _margin(row: dict, label: str) -> float:
    """A pair's optional ``margin`` (what ``--margin_loss`` subtracts), a finite number."""
    value = row["margin"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _shape_error(label, row, f"field 'margin' must be a finite number, got {value!r}")
    return float(value)


def _messages(row: dict, key: str, label: str) -> list:
    """``row[key]`` as a conversation: a list of {role, content} messages whose last one is the reply."""
    value = row[key]
    if (
        not isinstance(value, list)
        or not value
        or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in value
        )
    ):
        raise _shape_error(
            label,
            row,
            f"with --apply_chat_template, field {key!r} must be a list of {{role, content}} messages, "
            f"got {type(value).__name__}",
        )
    if value[-1]["role"] != "assistant":
        raise _shape_error(
            label,
            row,
            f"with --apply_chat_template, the last message of {key!r} must be the assistant's reply, "
            f"got role {value[-1]['role']!r}",
        )
    return value


def chat_splitter(tokenizer):
    """``split(messages, label) -> (prompt, reply)``: the conversation rendered with the tokenizer's chat
    template, cut before its last message (the reply): the prompt is the template over the earlier messages
    with the generation prompt, the reply the rest of the full rendering. For a ``[INST]`` template this is
    the official code's cut after the last ``[/INST]``. A tokenizer without a chat template is a one-line error."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            f"--apply_chat_template: the tokenizer of --pretrain ({type(tokenizer).__name__}) has no chat template; "
            f"drop --apply_chat_template or use a tokenizer that has one"
        )

    def split(messages: list, label: str) -> tuple[str, str]:
        full = tokenizer.apply_chat_template(messages, tokenize=False)
        prompt = (
            tokenizer.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True)
            if len(messages) > 1
            else ""
        )
        if not full.startswith(prompt):
            raise PreferenceDataError(
                f"{label}: the tokenizer's chat template does not render the conversation as its prompt "
                f"followed by the reply, so the reply cannot be cut off; drop --apply_chat_template"
            )
        return prompt, full[len(prompt) :]

    return split


def normalise_row(
    row: Any,
    label: str,
    report: SourceReport | None = None,
    hh_format: str = "split",
    keys: tuple[str, str, str] | None = None,
    chat=None,
) -> dict | None:
    """One raw row in any accepted shape -> ``{question, correct, incorrect}``, or ``None`` when an
    HH dialogue pair cannot be split (counted in ``report``). Anything else raises, naming the row.

    An HH-RLHF row (whole ``chosen`` / ``rejected`` dialogues) becomes, with ``hh_format``:
    ``dialogue`` (the official code): an empty prompt and each whole dialogue as the response, so the
    contrastive positions span the whole dialogue; ``split``: the shared dialogue up to the last
    ``"\n\nAssistant:"`` as the prompt and the two last replies as the responses.

    ``keys`` (``--prompt_key``, ``--chosen_key``, ``--rejected_key``; the prompt key may be empty) read every
    row by those keys only, as the official code does: without a prompt key the prompt is empty and takes no
    template. ``chat`` (:func:`chat_splitter`, ``--apply_chat_template``) reads chosen/rejected rows as
    conversations. A pair's optional ``margin`` is kept (``--margin_loss``)."""
    out = _normalise_pair(row, label, report, hh_format, keys, chat)
    if out is not None and row.get("margin") is not None:
        out["margin"] = _margin(row, label)
    return out


def _normalise_pair(row: Any, label: str, report: SourceReport | None, hh_format: str, keys, chat) -> dict | None:
    check_choice("hh_format", hh_format, HH_FORMATS)
    if not isinstance(row, dict):
        raise _shape_error(label, row, f"expected an object, got {type(row).__name__}")
    if keys is not None and keys[1] and keys[2]:
        prompt_key, chosen_key, rejected_key = keys
        missing = [k for k in (prompt_key, chosen_key, rejected_key) if k and row.get(k) is None]
        if missing:
            raise _shape_error(
                label, row, f"missing key(s) {missing} (named by --prompt_key/--chosen_key/--rejected_key)"
            )
        _count_shape(report, CUSTOM_KEYS)
        out = {
            "question": _text(row, prompt_key, label) if prompt_key else "",
            "correct": _text(row, chosen_key, label),
            "incorrect": _text(row, rejected_key, label),
        }
        if not prompt_key:
            out[PROMPT_FORM] = AS_IS
        return out
    if (
        chat is not None
        and {"chosen", "rejected"} <= row.keys()
        and not {"question", "correct", "incorrect"} <= row.keys()
    ):
        _count_shape(report, PROMPT_PAIRS if "prompt" in row else HH_RLHF)
        prompt, correct = chat(_messages(row, "chosen", label), label)
        _, incorrect = chat(_messages(row, "rejected", label), label)
        return {"question": prompt, "correct": correct, "incorrect": incorrect, PROMPT_FORM: AS_IS}
    if {"question", "correct", "incorrect"} <= row.keys():
        _count_shape(report, OPENMATH_PAIRS)
        out = {key: _text(row, key, label) for key in ("question", "correct", "incorrect")}
        if row.get("first_error_char") is not None:  # optional: where the incorrect response first goes wrong
            out["first_error_char"] = _error_offset(row, label, len(out["incorrect"]))
        return out
    if {"prompt", "chosen", "rejected"} <= row.keys():
        _count_shape(report, PROMPT_PAIRS)
        return {
            "question": _text(row, "prompt", label),
            "correct": _text(row, "chosen", label),
            "incorrect": _text(row, "rejected", label),
            PROMPT_FORM: NO_INPUT_TEMPLATE,
        }
    if {"chosen", "rejected"} <= row.keys():
        _count_shape(report, HH_RLHF)
        chosen, rejected = _text(row, "chosen", label), _text(row, "rejected", label)
        if hh_format == "dialogue":
            return {"question": "", "correct": chosen, "incorrect": rejected, PROMPT_FORM: NO_INPUT_TEMPLATE}
        parts = split_dialogue(chosen), split_dialogue(rejected)
        reason = None
        if parts[0] is None or parts[1] is None:
            reason = "n_skipped_no_assistant_turn"
        elif parts[0][0] != parts[1][0]:
            reason = "n_skipped_no_shared_prefix"
        elif not parts[0][1].strip() or not parts[1][1].strip():
            reason = "n_skipped_empty_response"
        if reason is not None:
            if report is not None:
                setattr(report, reason, getattr(report, reason) + 1)
                if len(report.skipped_rows) < 20:
                    report.skipped_rows.append(label)
            return None
        return {
            "question": parts[0][0],
            "correct": parts[0][1],
            "incorrect": parts[1][1],
            PROMPT_FORM: NO_INPUT_TEMPLATE,
        }
    present = set(row) & {"question", "correct", "incorrect", "prompt", "chosen", "rejected"}
    raise _shape_error(label, row, f"missing keys (has {sorted(present) or 'none of the pair keys'})")


# Where a normalised row came from ("<file>:<line>"); private, read only by error messages.
SOURCE_KEY = "_source"


def load_source_rows(
    spec: str, split: str = "train", hh_format: str = "split", keys: tuple[str, str, str] | None = None, chat=None
) -> tuple[list[dict], SourceReport]:
    """All normalised rows of one source plus its report (skips counted, never silent); ``keys`` and ``chat``
    as :func:`normalise_row` takes them."""
    report = SourceReport(source=spec)
    rows = []
    for label, raw in read_source(spec, split):
        report.n_read += 1
        row = normalise_row(raw, label, report, hh_format, keys, chat)
        if row is not None:
            row[SOURCE_KEY] = label  # file:line, so a later error names the line, not a shuffled index
            rows.append(row)
    if report.n_read == 0:
        raise PreferenceDataError(f"{spec}: no rows")
    if not rows:
        raise PreferenceDataError(f"every row of {spec} was skipped: {report.summary()}")
    return rows, report


# ---------------------------------------------------------------------------------------------
# blending and splitting
# ---------------------------------------------------------------------------------------------


def parse_probs(probs: str, n_sources: int) -> list[float]:
    """Comma-separated weights, one per source, normalised to sum 1. Empty = equal weights."""
    if not probs.strip():
        return [1.0 / n_sources] * n_sources
    try:
        values = [float(p) for p in probs.split(",")]
    except ValueError:
        raise ValueError(f"--dataset_probs {probs!r}: expected comma-separated numbers") from None
    if len(values) != n_sources:
        raise ValueError(f"--dataset_probs has {len(values)} weights but --dataset names {n_sources} sources")
    if any(not math.isfinite(v) or v < 0 for v in values) or sum(values) <= 0:
        raise ValueError(f"--dataset_probs {probs!r}: weights must be >= 0 with a positive sum")
    total = sum(values)
    return [v / total for v in values]


def blend_counts(sizes: list[int], probs: list[float], max_samples: int = 0) -> list[int]:
    """How many rows each source contributes: the blend stops when the first source runs out
    (``datasets.interleave_datasets``' default, ``first_exhausted``; the official ``train_rm.py``
    passes ``all_exhausted``, which repeats the smaller sources: a departure docs/migration.md lists),
    capped at ``max_samples`` when > 0.

    >>> blend_counts([100, 10], [0.5, 0.5])
    [10, 10]
    >>> blend_counts([100], [1.0], max_samples=30)
    [30]
    """
    total = min(size / p for size, p in zip(sizes, probs) if p > 0)
    if max_samples > 0:
        total = min(total, max_samples)
    return [min(size, int(round(p * total))) for size, p in zip(sizes, probs)]


def dataset_sources(spec: str) -> list[str]:
    """The comma-separated sources of ``--dataset`` (a path that exists is one source even when its
    name holds a comma)."""
    return [spec] if Path(spec).exists() else [s.strip() for s in spec.split(",") if s.strip()]


def load_preference_rows(
    spec: str,
    probs: str = "",
    seed: int = 42,
    max_samples: int = 0,
    split: str = "train",
    reports: list[SourceReport] | None = None,
    hh_format: str = "split",
    keys: tuple[str, str, str] | None = None,
    chat=None,
) -> list[dict]:
    """Rows of every comma-separated source in ``spec``, blended by ``probs``.

    Each source's share is a seeded sample without replacement; the blend is shuffled with the
    seed, so the same arguments always give the same rows in the same order. A report line per
    source (rows read, skipped and why, used) is logged and appended to ``reports`` if given.
    """
    sources = dataset_sources(spec)
    if not sources:
        raise ValueError("--dataset is empty: give a .jsonl/.json/.parquet file, a save_to_disk dir or a Hub name")
    weights = parse_probs(probs, len(sources))
    loaded = [
        load_source_rows(source, split, hh_format, keys, chat) if w > 0 else ([], SourceReport(source))
        for source, w in zip(sources, weights)
    ]
    counts = blend_counts([len(rows) for rows, _ in loaded], weights, max_samples)
    rng = np.random.default_rng(seed)
    blended = []
    for (rows, report), count in zip(loaded, counts):
        picked = rng.choice(len(rows), size=count, replace=False) if count < len(rows) else np.arange(len(rows))
        blended.extend(rows[i] for i in sorted(picked.tolist()))
        report.n_used = int(count)
        (logger.warning if report.n_skipped else logger.info)(report.summary())
        if reports is not None:
            reports.append(report)
    order = rng.permutation(len(blended))
    return [blended[i] for i in order]


def official_eval_rows(
    spec: str, hh_format: str = "split", keys: tuple[str, str, str] | None = None, chat=None
) -> tuple[list[dict], list[str]]:
    """(rows, one note per source): the official code's held-out pairs when no eval set is given. Per source of
    ``spec``: its own test/validation split when it has one, else its first ``int(1%)`` of rows in file order
    (``int(0.1%)`` for a ``save_to_disk`` single Dataset, which has no splits), rows that stay in the training
    data as the official code's do. A source under 100 rows (1,000 for a single Dataset) gives none."""
    rows: list[dict] = []
    notes: list[str] = []
    for source in dataset_sources(spec):
        split = held_out_split(source)
        if split:
            part, _ = load_source_rows(source, "test", hh_format, keys, chat)
            notes.append(f"{source}: its {split} split ({len(part)} pairs)")
        else:
            path = Path(source).expanduser()
            single = path.is_dir() and (path / "state.json").is_file() and not (path / "dataset_dict.json").is_file()
            share = 0.001 if single else 0.01
            part, report = load_source_rows(source, "train", hh_format, keys, chat)
            part = part[: int(report.n_read * share)]
            notes.append(f"{source}: its first {share:.1%} of rows ({len(part)} pairs, also trained on)")
        rows.extend(part)
    return rows, notes


def split_train_eval(rows: list[dict], eval_split: float, seed: int = 42) -> tuple[list[dict], list[dict]]:
    """Hold out a seeded ``eval_split`` fraction (at least one row when > 0, never all of them).

    >>> train, held = split_train_eval([{"i": i} for i in range(10)], 0.2, seed=0)
    >>> len(train), len(held), sorted(r["i"] for r in train + held) == list(range(10))
    (8, 2, True)
    """
    if not 0.0 <= eval_split < 1.0:
        raise ValueError(f"eval_split must be in [0, 1), got {eval_split}")
    n_eval = 0 if eval_split == 0 or len(rows) < 2 else max(1, int(round(len(rows) * eval_split)))
    n_eval = min(n_eval, len(rows) - 1) if rows else 0
    order = np.random.default_rng(seed).permutation(len(rows)).tolist()
    held = set(order[:n_eval])
    train = [row for i, row in enumerate(rows) if i not in held]
    return train, [rows[i] for i in sorted(held)]
