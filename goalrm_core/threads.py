"""CPU thread count. Oversubscribed OpenMP threads spin and waste most of their time: on a busy
2-core machine one thread trains the tiny models several times faster than two (measured 0.48 vs
1.81 s per SFT step under load). So the default uses only the cores that are idle right now.

"Right now" is measured, not read from the load average: the 1-minute load average lags by about a
minute, so a notebook started just after a busy stage saw a loaded machine that was in fact idle
and ran on one thread of two."""

from __future__ import annotations

import os
import time


def _cpu_times() -> tuple[float, float] | None:
    """(busy, total) jiffies over all cores from /proc/stat, or None where it does not exist."""
    try:
        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def idle_cores(window_s: float = 0.5) -> int:
    """Cores idle over the last ``window_s`` seconds (at least 1). Falls back to the load average
    where /proc/stat is missing."""
    cores = os.cpu_count() or 1
    first = _cpu_times()
    if first is None:
        busy = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
        return max(1, min(cores, round(cores - busy)))
    time.sleep(window_s)
    second = _cpu_times()
    busy_fraction = (second[0] - first[0]) / max(1e-9, second[1] - first[1])
    return max(1, min(cores, round(cores * (1 - busy_fraction))))


def set_torch_threads(threads: int = 0) -> int:
    """Use ``threads`` CPU threads (0 = the idle cores); exported to subprocesses via OMP_NUM_THREADS."""
    import torch  # here, not at import: the command lines that only count cores answer without torch

    n = threads if threads > 0 else idle_cores()
    torch.set_num_threads(n)
    os.environ["OMP_NUM_THREADS"] = str(n)
    return n


def matmul_gflops(threads: int, n: int = 1024, reps: int = 3) -> float:
    """This machine's fp32 matmul rate (GFLOP/s) on ``n`` x ``n`` matrices with ``threads`` threads,
    the best of ``reps`` timings of 10 products. Timings only mean something beside it: the same
    CPU model has run the demo at speeds 3x apart."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    try:
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.mm(a, b)  # warm-up: the first product allocates and picks a kernel
        best = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(10):
                torch.mm(a, b)
            best = min(best, (time.perf_counter() - t0) / 10)
    finally:
        torch.set_num_threads(before)
    return 2 * n**3 / best / 1e9
