"""``goalrm <command> ...``: one entry point whose subcommands mirror the official code's scripts.

The package holds the command lines of the core: ``train_rm``, ``get_representation``, ``eval_rm``
and ``metrics`` parse their flags and call the library; nothing in the core imports them.

Every command answers ``--help`` and a bad flag or profile at once: a command module declares its
flags from light modules (:mod:`goalrm_core.choices`, :mod:`goalrm_core.flags`, the config
dataclasses) and imports what loads torch, transformers, deepspeed, scipy or pandas only once its
flags parse (``tests/report/test_cli_startup.py`` holds every command to it; the times are
``benchmarks/cli_startup.py``'s).
"""

from __future__ import annotations

import importlib
import sys

from goalrm_core.flags import run_command, working_folder_gone

# command -> (module, one-line help). Each module exposes ``main(argv) -> int | None``.
COMMANDS = {
    "report": (
        "goalrm_core.pipeline.runner",
        "Run the notebooks of a profile with papermill into runs/reports/<profile>/ (--reports-dir to choose).",
    ),
    "sweep": (
        "goalrm_core.pipeline.sweep",
        "Run the notebooks once per point of a parameter grid; one comparison page.",
    ),
    "train-rm": (
        "goalrm_core.cli.train_rm",
        "Train a baseline or goal-conditioned RM (the official train_rm.py flags).",
    ),
    "get-representation": (
        "goalrm_core.cli.get_representation",
        "Save the goal state of an RM (the official get_representation.py).",
    ),
    "eval-rm": (
        "goalrm_core.cli.eval_rm",
        "Score generations densely: reward, partial rewards, Q-values (the official eval_rm.py).",
    ),
    "metrics": ("goalrm_core.cli.metrics", "Print AUROC and Q-filtered voting metrics of scored generations."),
    "decode": ("goalrm_core.study.decode_cli", "Q-guided decoding and online pruning."),
    "compare": (
        "goalrm_core.report.compare",
        "Do two runs of the report agree? Compare two reports' metrics.json (figures, conclusions, threads).",
    ),
    "tiny-run": (
        "goalrm_core.cli.tiny_run",
        "Make a tiny run folder (a random tiny policy, preference pairs) to train one step on.",
    ),
    "sync-notebooks": (
        "goalrm_core.pipeline.notebook_params",
        "Write the notebooks' parameters cells from params/demo.yaml (--check: report drift).",
    ),
}


def usage() -> str:
    lines = ["usage: goalrm <command> [flags]", "", "commands:"]
    lines += [f"  {name:<20} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "goalrm <command> --help shows each command's flags."]
    return "\n".join(lines)


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
    gone = working_folder_gone()  # before a command's imports: torch does not load in a deleted folder
    if gone:
        print(f"goalrm {command}: error: {gone}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[command][0])
    return run_command(module.main, rest, f"goalrm {command}")
