"""Command lines for DeepSpeed runs, and a runner that keeps long logs out of notebook cells.

DeepSpeed never runs inside a notebook kernel: the training notebook builds a command with
:func:`train_command`, runs it with :func:`run_streaming` (full output to a log file, a short live
tail on the terminal or, through ``show``, in the cell), then reads the run's artifacts.

One process runs as ``python -m goalrm_core.train.trainer`` (the trainer sets up its own one-process
group). More processes go through the ``deepspeed`` launcher. On a CPU-only machine the launcher
works too: ``--num_gpus N`` (alias ``--num_accelerators``) overrides the accelerator count it
detects (the CPU accelerator counts NUMA nodes, usually 1), it starts N local processes with
``LOCAL_SIZE=N``, and DeepSpeed's CPU accelerator talks gloo. (Setting ``CUDA_VISIBLE_DEVICES=0,1``
without ``--num_gpus`` also works, but only because the CPU accelerator reuses that variable name.)
Multi-node runs take a hostfile (``host slots=N`` lines) and ssh access, as on a SLURM cluster; see
``examples/slurm_train_rm.sh``.
"""

from __future__ import annotations

import collections
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence, TextIO

from goalrm_core.paths import relative_paths
from goalrm_core.train.config import TrainRMConfig

TRAIN_MODULE = "goalrm_core.train.trainer"


class LaunchError(RuntimeError):
    """A launched command failed; the message carries the log path and the log's tail."""


def deepspeed_launcher() -> str:
    """The ``deepspeed`` launcher of this interpreter's environment (so a notebook kernel started
    from a venv does not pick up another installation on PATH)."""
    beside = Path(sys.executable).with_name("deepspeed")
    if beside.is_file():
        return str(beside)
    found = shutil.which("deepspeed")
    if found is None:
        raise LaunchError("the deepspeed launcher is not installed in this environment (pip install deepspeed)")
    return found


def train_command(
    cfg: TrainRMConfig,
    num_processes: int = 1,
    use_deepspeed_launcher: bool | None = None,
    hostfile: str | os.PathLike | None = None,
    num_nodes: int | None = None,
    master_port: int | None = None,
    module: str = TRAIN_MODULE,
) -> list[str]:
    """The command line that trains a reward model as ``cfg`` says (its flags: ``cfg.to_argv()``).

    * one process, no hostfile: ``[python, -m, goalrm_core.train.trainer, ...]``;
    * otherwise (or with ``use_deepspeed_launcher=True``): ``[deepspeed, --num_gpus N,
      --master_port P, --module, goalrm_core.train.trainer, ...]``; with a hostfile ``--hostfile H``
      (and ``--num_nodes``), where ``num_processes`` is per node.

    ``--num_gpus`` also sets the process count on CPU-only machines (see the module docstring).
    A free local port is picked for single-node launcher runs so parallel runs do not collide.
    """
    if not isinstance(cfg, TrainRMConfig):
        raise TypeError(
            "train_command takes a TrainRMConfig (TrainRMConfig.from_dict turns flags into one), got "
            f"{type(cfg).__name__}"
        )
    if num_processes < 1:
        raise ValueError(f"num_processes must be >= 1, got {num_processes}")
    flags = cfg.to_argv()
    if use_deepspeed_launcher is None:
        use_deepspeed_launcher = num_processes > 1 or hostfile is not None
    if not use_deepspeed_launcher:
        if num_processes > 1:
            raise ValueError("num_processes > 1 needs the deepspeed launcher (use_deepspeed_launcher=True)")
        return [sys.executable, "-m", module, *flags]
    cmd = [deepspeed_launcher()]
    if hostfile is not None:
        cmd += ["--hostfile", str(hostfile)]
        if num_nodes:
            cmd += ["--num_nodes", str(num_nodes)]
    cmd += ["--num_gpus", str(num_processes)]
    if master_port is None and hostfile is None:
        from goalrm_core.train.distributed import free_port  # torch: only when a launch is built

        master_port = free_port()
    if master_port is not None:
        cmd += ["--master_port", str(master_port)]
    return [*cmd, "--module", module, *flags]


@dataclass
class RunResult:
    returncode: int
    log_path: Path
    wall_s: float
    tail: list[str]


class TailPrinter:
    """The live view of a running command on a terminal: a throttled status line (its last line),
    and at the end the last lines not shown yet. ``show(lines, final)`` is :func:`run_streaming`'s
    ``show``."""

    def __init__(self, n_lines: int, desc: str | None = None, every_s: float = 1.0):
        self.n_lines, self.every_s = n_lines, every_s
        self.prefix = f"[{desc}] " if desc else ""
        self.printed: str | None = None
        self.last_shown = 0.0

    def due(self, final: bool) -> bool:
        """Whether to draw now: always at the end, else at most every ``every_s`` seconds."""
        now = time.time()
        if not final and now - self.last_shown < self.every_s:
            return False
        self.last_shown = now
        return True

    def show(self, lines: Sequence[str], final: bool = False) -> None:
        if not self.due(final):
            return
        tail = list(lines)[-self.n_lines :]
        if final:
            # the terminal already shows the status lines printed so far: add only the unseen end
            unseen = tail[tail.index(self.printed) + 1 :] if self.printed in tail else tail
            for line in unseen:
                print(self.prefix + line, flush=True)
        elif tail and tail[-1] != self.printed:
            self.printed = tail[-1]
            print(self.prefix + tail[-1][:200], flush=True)


def _visible(line: str) -> str:
    """The last carriage-return segment of a line: what a terminal would show for a tqdm bar."""
    return line.rstrip("\n").split("\r")[-1]


# a tqdm bar with its description: "train-rm:  83%|████▎ | 5/6 [00:00<00:00, 57.26it/s, acc=0.53]"
_BAR = re.compile(r"(?:[^\s:|]+: *)?\d+%\|[^|]*\| *[\d.]+[kMG]?/[\d.?]+[kMG]? *\[[^\]]*\]")


def _shown(line: str) -> str:
    """What the live view shows of a line: paths relative to the project, and no progress bar when
    bars are off (``TQDM_DISABLE``, as in a report run: a subprocess that forces its bar on still
    writes it to the log)."""
    text = _visible(line)
    if os.environ.get("TQDM_DISABLE", "").lower() in ("1", "true", "yes"):
        text = _BAR.sub("", text)
    return relative_paths(text)


def run_streaming(
    cmd: Sequence[str],
    log_path: str | os.PathLike,
    tail_lines: int = 5,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
    timeout_s: float | None = None,
    error_tail_lines: int = 40,
    show: Callable[[Sequence[str], bool], None] | None = None,
    desc: str | None = None,
) -> RunResult:
    """Run ``cmd``, writing its whole output (stdout + stderr) to ``log_path`` and showing the last
    ``tail_lines`` lines while it runs. A non-zero exit (or ``timeout_s``) raises
    :class:`LaunchError` with the log's last ``error_tail_lines`` lines; Ctrl-C stops the whole
    process group (the launcher and its workers). ``desc`` labels the live view and the error;
    ``show(lines, final)`` replaces the terminal's live view (:class:`TailPrinter`): e.g. a view
    updated in place in a notebook cell, or ``lambda *_: None`` for silence."""
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
    display_fn = show or TailPrinter(tail_lines, desc).show
    recent: collections.deque[str] = collections.deque(maxlen=max(tail_lines, error_tail_lines))
    started = time.time()
    with open(log_path, "w", encoding="utf-8") as log:
        log.write(f"$ {shlex.join(str(c) for c in cmd)}\n")
        log.flush()
        proc = subprocess.Popen(
            [str(c) for c in cmd],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=cwd,
            text=True,
            errors="replace",
            bufsize=1,
            start_new_session=True,
            preexec_fn=_dies_with_parent(),
        )
        timed_out = _stream_output(proc, log, recent, display_fn, tail_lines, timeout_s, started)
    wall = time.time() - started
    display_fn(list(recent)[-tail_lines:], True)
    if timed_out or proc.returncode != 0:
        reason = f"timed out after {timeout_s:.0f} s" if timed_out else f"failed with exit code {proc.returncode}"
        tail = "\n".join(list(recent)[-error_tail_lines:])
        label = f"{desc}: " if desc else ""
        raise LaunchError(
            f"{label}command {reason}: {shlex.join(str(c) for c in cmd)}\nfull log: {log_path}\n--- last lines "
            f"---\n{tail}"
        )
    return RunResult(proc.returncode, log_path, wall, list(recent)[-tail_lines:])


def _stream_output(
    proc: subprocess.Popen,
    log: TextIO,
    recent: collections.deque[str],
    display_fn: Callable[[Sequence[str], bool], None],
    tail_lines: int,
    timeout_s: float | None,
    started: float,
) -> bool:
    """Copy ``proc``'s output into ``log`` line by line, keeping the visible lines in ``recent`` and showing the
    last ``tail_lines`` of them, until it ends or runs past ``timeout_s`` (then stopped); returns whether it timed
    out. Anything raised here (Ctrl-C included) stops the process group first."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:  # a thread, so a silent command still times out
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    timed_out = False
    try:
        while True:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                line = ""
            if line is None:
                break
            if line:
                log.write(line)
                log.flush()  # a log someone follows (tail -f, the report's stage line) sees each line as it comes
                visible = _shown(line)
                if visible.strip():
                    recent.append(visible)
                    display_fn(list(recent)[-tail_lines:], False)
            if timeout_s is not None and time.time() - started > timeout_s:
                timed_out = True
                _stop(proc)
                break
        proc.wait()
        if not timed_out and proc.stdout is not None:
            proc.stdout.close()  # the pump has read it to the end
    except BaseException:
        _stop(proc)
        raise
    return timed_out


def _dies_with_parent() -> Callable[[], None] | None:
    """On Linux, what makes the started command get SIGTERM when the process that started it dies,
    however it dies (SIGKILL, the OOM killer, a kernel whose report was killed): ``prctl(PR_SET_PDEATHSIG)``
    in the child between fork and exec. The command runs in a session of its own (so that Ctrl-C
    reaches it only through :func:`_stop`), so without this nothing would stop a training that
    outlived its notebook, and it would keep the GPU and write into a run no one watches. ``None``
    elsewhere (and where libc has no prctl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent, pr_set_pdeathsig, sigterm = os.getpid(), 1, int(signal.SIGTERM)

    def preexec() -> None:  # only a libc call, bound before the fork
        prctl(pr_set_pdeathsig, sigterm, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def _stop(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM the command's process group, then SIGKILL what is left after ``grace_s``."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass
