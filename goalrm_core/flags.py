"""Command-line flags: the declared valid range of a numeric flag (:class:`Range`) and the one error
policy of a command's ``main`` (:func:`run_command`). Every layer uses them, the core included, so
they live below all of it and import nothing of the project."""

from __future__ import annotations

import argparse
import contextvars
import difflib
import math
import numbers
import os
import re
import sys
from typing import Iterable


class Range:
    """A numeric flag's valid range, used as its argparse ``type`` (parse the text, check the value,
    say what was expected) and to check a value given in Python (:meth:`check`).

    ``bounds`` is a comparison (``"> 0"``, ``">= 1"``), an interval (``"[0, 1)"``) or ``""`` (any
    finite number); ``also`` lists values allowed outside the bounds (``-1`` = never) and ``note``
    says what the special values mean. NaN and inf are never in range.

    >>> max_steps = Range(int, ">= 0", note="0 = the epochs")
    >>> max_steps("3"), str(max_steps)
    (3, 'an integer >= 0 (0 = the epochs)')
    >>> max_steps("-3")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: must be an integer >= 0 (0 = the epochs), got -3
    >>> Range(float, "[0, 1)").check(1.0, "--eval_split")
    Traceback (most recent call last):
    ValueError: --eval_split must be a finite number in [0, 1), got 1.0
    """

    _COMPARISON = re.compile(r"^(>=|>|<=|<) *(-?[0-9.e+-]+)$")
    _INTERVAL = re.compile(r"^([\[(]) *(-?[0-9.e+-]+) *, *(-?[0-9.e+-]+) *([\])])$")

    def __init__(self, kind: type, bounds: str = "", *, also: tuple = (), note: str = ""):
        if kind not in (int, float):
            raise TypeError(f"Range kind must be int or float, got {kind!r}")
        self.kind, self.bounds, self.also, self.note = kind, bounds.strip(), tuple(also), note
        self.low = self.high = None
        self.low_open = self.high_open = False
        if not self.bounds:
            return
        if m := self._COMPARISON.match(self.bounds):
            op, value = m.group(1), float(m.group(2))
            if op.startswith(">"):
                self.low, self.low_open = value, op == ">"
            else:
                self.high, self.high_open = value, op == "<"
        elif m := self._INTERVAL.match(self.bounds):
            self.low, self.high = float(m.group(2)), float(m.group(3))
            self.low_open, self.high_open = m.group(1) == "(", m.group(4) == ")"
        else:
            raise ValueError(f"bad Range bounds {bounds!r}: write '>= 0', '> 0', '[0, 1)' …")

    def __str__(self) -> str:
        text = "an integer" if self.kind is int else "a finite number"
        if self.bounds:
            text += f" {self.bounds}" if self._COMPARISON.match(self.bounds) else f" in {self.bounds}"
        if self.also:
            text += " or " + " or ".join(str(v) for v in self.also)
        return text + (f" ({self.note})" if self.note else "")

    __repr__ = __str__

    def contains(self, value) -> bool:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral if self.kind is int else numbers.Real):
            return False
        if value in self.also:
            return True
        if not math.isfinite(value):
            return False
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return self.high is None or not (value > self.high or (self.high_open and value == self.high))

    def check(self, value, name: str):
        """``value`` itself when it is in range; else a ``ValueError`` naming ``name``, the value and the range."""
        if not self.contains(value):
            raise ValueError(f"{name} must be {self}, got {value!r}")
        return value

    def __call__(self, text: str):
        try:
            value = self.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be {'an integer' if self.kind is int else 'a number'}, got {text!r}"
            ) from None
        if not self.contains(value):
            raise argparse.ArgumentTypeError(f"must be {self}, got {text}")
        return value


def check_choice(name: str, value, valid) -> object:
    """``value`` itself when it is one of ``valid``; else a ``ValueError`` naming ``name``, the value and the choices.

    >>> check_choice("readout", "eos", ("eos", "last_token"))
    'eos'
    >>> check_choice("readout", "first", ("eos", "last_token"))
    Traceback (most recent call last):
    ValueError: unknown readout 'first'; valid: eos, last_token
    """
    if value not in valid:
        raise ValueError(f"unknown {name} {value!r}; valid: {', '.join(map(str, valid))}")
    return value


_OWN = object()


def add_field_flag(
    parser: argparse.ArgumentParser, field, default=_OWN, *, negatable: bool = False, help_prefix: str = ""
) -> None:
    """One ``--<name>`` flag of ``parser`` from a dataclass ``field`` whose metadata defines the setting:
    its ``help``, and a number's valid ``range`` (a :class:`Range`, the flag's type), ``choices``,
    ``required``, or ``words`` (one or more words kept as one string). A bool is a switch, with a
    ``--no-<name>`` when ``negatable`` (a setting on by default). ``default`` is the flag's default
    when it is not the field's own."""
    meta = field.metadata
    text = help_prefix + meta.get("help", "")
    common = dict(default=field.default if default is _OWN else default, help=text.replace("%", "%%") or None)
    if field.type in ("bool", bool):
        parser.add_argument(
            f"--{field.name}", action=argparse.BooleanOptionalAction if negatable else "store_true", **common
        )
    elif meta.get("words"):
        parser.add_argument(f"--{field.name}", nargs="+", action=_JoinWords, **common)
    else:
        kind = meta.get("range") or {"int": int, "float": float, "str": str}.get(field.type, field.type)
        parser.add_argument(
            f"--{field.name}", type=kind, choices=meta.get("choices"), required=meta.get("required", False), **common
        )


class _JoinWords(argparse.Action):
    """A flag that takes one or more words and stores them joined by a space (so a value written back
    to a command line reads as the string that was written)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, " ".join(values))


positive_int = Range(int, ">= 1")
non_negative_int = Range(int, ">= 0")
finite_float = Range(float)


_DEBUG = contextvars.ContextVar("goalrm_debug", default=False)


def debugging() -> bool:
    """Whether the running command was asked for tracebacks (``--debug`` or ``GOALRM_DEBUG=1``): a
    ``main`` that turns errors into exit codes itself lets them through then."""
    return _DEBUG.get() or os.environ.get("GOALRM_DEBUG", "") not in ("", "0")


def _expected(error: BaseException) -> bool:
    """Errors that mean bad input or a missing file, not a bug: bad values (ArtifactError and the
    data errors are ValueErrors), files that are missing or unreadable, and goalrm's own run errors."""
    if isinstance(error, (ValueError, OSError)) or symlink_loop(error):
        return True
    return isinstance(error, RuntimeError) and type(error).__module__.startswith("goalrm_core")


def symlink_loop(error: BaseException) -> str | None:
    """The message for pathlib's ``RuntimeError("Symlink loop from '<path>'")`` (``Path.resolve`` on a
    link that leads back to itself, Python < 3.13), naming the path; ``None`` for any other error."""
    text = str(error)
    if type(error) is RuntimeError and text.startswith("Symlink loop from "):
        return (
            f"{text[len('Symlink loop from ') :]} is a symbolic link loop (it leads back to itself); remove the "
            "link or give another path"
        )
    return None


def error_line(error: BaseException) -> str:
    """An expected error as the one line a command prints (without the program's name)."""
    return one_line(symlink_loop(error) or error) or type(error).__name__


def one_line(error: BaseException | str, longest: int = 400) -> str:
    """An error message as one line, with any word longer than ``longest`` characters (a value pasted
    whole: a 5,000-character --set) cut to its start and its length, so the line stays readable; a
    path of usual length is kept whole."""

    def cut(word: str) -> str:
        if len(word) <= longest:
            return word
        # the quote and punctuation that close it stay (a set of characters, stripped in any order: meant)
        closing = len(word) - len(word.rstrip("'\"),;:.)]"))  # noqa: B005
        return f"{word[:60]}…({len(word):,} characters){word[len(word) - closing :]}"

    return " ".join(cut(word) for word in str(error).split())


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) that stopped a command, with the one line saying what was kept and how to
    resume (``Interrupted("the last checkpoint is …; resume with …", how="SIGTERM")``):
    :func:`run_command` prints ``<prog>: interrupted: <that>`` and exits 130 (143 for SIGTERM)."""

    def __init__(self, resume: str = "", how: str = "Ctrl-C"):
        super().__init__(resume)
        self.resume, self.how = resume, how


def interrupted_how(stop: BaseException) -> str:
    """``SIGTERM`` for goalrm's SIGTERM-as-Ctrl-C (:class:`goalrm_core.pipeline.signals.Terminated`), else
    ``Ctrl-C``."""
    return getattr(stop, "how", None) or ("SIGTERM" if type(stop).__name__ == "Terminated" else "Ctrl-C")


def working_folder_gone() -> str | None:
    """The one line for a working folder deleted under the shell (``os.getcwd()`` fails): every relative path
    would fail later, and torch's libraries do not even load there (oneMKL stops the process); ``None`` when
    the working folder is there."""
    try:
        os.getcwd()
    except FileNotFoundError:
        where = os.environ.get("PWD") or "the shell's folder"
        return (
            f"the working folder {where} no longer exists (deleted or moved under the shell): cd to an existing "
            "folder and run again"
        )
    return None


def run_command(main_fn, argv: list[str], prog: str) -> int:
    """Run a command's ``main(argv)``; an expected error becomes one line on stderr,
    ``<prog>: error: <message>``, and exit code 2. Ctrl-C (and SIGTERM where the command turns it into
    one) becomes one line too, ``<prog>: interrupted: <what was kept and how to resume>``, exit 130
    (143 for SIGTERM). ``--debug`` (anywhere in ``argv``) or ``GOALRM_DEBUG=1`` shows the full
    traceback instead."""
    gone = working_folder_gone()
    if gone:
        print(f"{prog}: error: {gone}", file=sys.stderr)
        return 2
    token = _DEBUG.set("--debug" in argv)
    argv = [a for a in argv if a != "--debug"]
    try:
        return int(main_fn(argv) or 0)
    except KeyboardInterrupt as stop:
        if debugging():
            raise
        how = interrupted_how(stop)
        what = "interrupted" if how == "Ctrl-C" else f"interrupted ({how})"
        resume = one_line(getattr(stop, "resume", "")) or "stopped before it finished; run the same command again"
        print(f"\n{prog}: {what}: {resume}", file=sys.stderr, flush=True)
        return 143 if how == "SIGTERM" else 130
    except Exception as error:
        if debugging() or not _expected(error):
            raise
        print(f"{prog}: error: {error_line(error)} (--debug for the traceback)", file=sys.stderr)
        return 2
    finally:
        _DEBUG.reset(token)


def safe_path_part(name, what: str) -> str:
    """``name`` itself when it can be one component of a path under a folder goalrm writes or reads
    (a benchmark, an RM name, a profile); else a ``ValueError`` naming ``what`` and the value. A name
    holding ``/``, ``\\`` or ``..``, an absolute path, ``.`` or an empty name would reach outside it.

    >>> safe_path_part("gsm8k", "benchmark")
    'gsm8k'
    >>> safe_path_part("../x", "benchmark")
    Traceback (most recent call last):
    ValueError: benchmark '../x' is not a plain name: it must not be empty, hold '/', '\\' or '..', nor be absolute
    """
    text = str(name)
    if (
        not text.strip()
        or text == "."
        or ".." in text
        or "/" in text
        or "\\" in text
        or "\0" in text
        or os.path.isabs(text)
        or re.match(r"^[A-Za-z]:", text)
    ):
        raise ValueError(
            f"{what} {text!r} is not a plain name: it must not be empty, hold '/', '\\' or '..', nor be absolute"
        )
    return text


def path_part(text: str) -> str:
    """An argparse ``type`` for a flag whose value becomes a folder or file name (:func:`safe_path_part`)."""
    try:
        return safe_path_part(text, "name")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """``"; did you mean a, b?"`` for the known names close to ``key``, else ``""``.

    >>> did_you_mean("max_stepz", ["max_steps", "seed"]), did_you_mean("x", ["seed"])
    ('; did you mean max_steps?', '')
    """
    close = difflib.get_close_matches(key, sorted(set(known)), n=3)
    return f"; did you mean {', '.join(close)}?" if close else ""
