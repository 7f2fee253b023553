"""``goalrm <command> ...``: one entry point whose subcommands mirror the seed's scripts."""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys

# command -> (module, one-line help). Each module exposes ``main(argv) -> int | None``.
COMMANDS = {
    "report": ("goalrm_core.report.runner", "Run the notebooks of a profile with papermill into reports/<profile>/."),
    "sweep": ("goalrm_core.report.sweep", "Run the notebooks once per point of a parameter grid; one comparison page."),
    "train-rm": ("goalrm_core.train.trainer", "Train a baseline or goal-conditioned RM (the seed's train_rm.py flags)."),
    "get-representation": ("goalrm_core.inference.goal_state", "Save the goal state of an RM (the seed's get_representation.py)."),
    "eval-rm": ("goalrm_core.inference.scoring", "Score generations densely: reward, partial rewards, Q-values (the seed's eval_rm.py)."),
    "metrics": ("goalrm_core.evaluation.tables", "Print AUROC and Q-filtered voting metrics of scored generations."),
    "decode": ("goalrm_core.inference.decoding", "Q-guided decoding and online pruning."),
}


# argparse types of the subcommands' numeric flags: a bad value is a one-line error before any work.

def positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (>= 1), got {text}")
    return value


def non_negative_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer (>= 0), got {text}")
    return value


def finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None


def usage() -> str:
    lines = ["usage: goalrm <command> [flags]", "", "commands:"]
    lines += [f"  {name:<20} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "goalrm <command> --help shows each command's flags."]
    return "\n".join(lines)


def _expected(error: BaseException) -> bool:
    """Errors that mean bad input or a missing file, not a bug: bad values (ArtifactError and the
    data errors are ValueErrors), files that are missing or unreadable, and goalrm's own run errors."""
    if isinstance(error, (ValueError, OSError)):
        return True
    return isinstance(error, RuntimeError) and type(error).__module__.startswith("goalrm_core")


def run_command(main_fn, argv: list[str], prog: str) -> int:
    """Run a command's ``main(argv)``; an expected error becomes one line on stderr,
    ``<prog>: error: <message>``, and exit code 2. ``--debug`` (anywhere in ``argv``) or
    ``GOALRM_DEBUG=1`` shows the full traceback instead."""
    debug = "--debug" in argv or os.environ.get("GOALRM_DEBUG", "") not in ("", "0")
    argv = [a for a in argv if a != "--debug"]
    try:
        return int(main_fn(argv) or 0)
    except Exception as error:
        if debug or not _expected(error):
            raise
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"{prog}: error: {message} (--debug for the traceback)", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--debug" in argv[:1]:  # goalrm --debug <command> ...
        argv = argv[1:] + ["--debug"]
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"goalrm: unknown command {command!r}; valid: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[command][0])
    return run_command(module.main, rest, f"goalrm {command}")


if __name__ == "__main__":
    sys.exit(main())
