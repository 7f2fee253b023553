"""Run ``goalrm`` command lines as fresh processes without paying the imports each time.

Started once per test session (``python forkserver.py``), it imports ``goalrm_core.cli`` and every
subcommand module (torch, transformers …: seconds of CPU), then for each request forks a child
that does exactly what ``python -m goalrm_core.cli ARGV`` does, ``sys.exit(cli.main(ARGV))``, in
its own working directory and environment, with stdout and stderr going to files. The parent
computes nothing, so the children start clean.

Protocol: one JSON object per line on stdin, ``{"argv", "cwd", "env", "stdout", "stderr", "timeout"}``
and optionally ``"fault": [name, value]`` (one of ``tests/faults.py``, put in the child before it
runs); one JSON line back on stdout, ``{"exit": code}`` (a child killed by signal N reports -N, as
``subprocess`` does).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import faults  # noqa: E402  (tests/faults.py)


def child(request: dict) -> None:
    """Never returns: runs one command line in this (forked) process and exits with its code."""
    code = 1
    try:
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # the requests' pipe is the server's alone
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(target, fd)
            os.close(target)
        sys.argv = ["goalrm", *request["argv"]]
        if request.get("fault"):
            faults.apply(*request["fault"])
        try:
            code = cli.main(request["argv"])
        except SystemExit as done:  # argparse, and anything else that exits the way Python would
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
            if not isinstance(done.code, (int, type(None))):
                print(done.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code if isinstance(code, int) else 1)


def wait(pid: int, timeout: float) -> int:
    """The child's exit code; a child still running after ``timeout`` seconds is killed (-9)."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def serve() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            child(request)
        print(json.dumps({"exit": wait(pid, request.get("timeout", 300))}), flush=True)


if __name__ == "__main__":
    cli = importlib.import_module("goalrm_core.cli")
    for module, _ in cli.COMMANDS.values():
        importlib.import_module(module)
    print(json.dumps({"ready": True}), flush=True)
    serve()
