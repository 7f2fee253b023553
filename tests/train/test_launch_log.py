"""run_streaming's log is written as the command prints: a follower of the file sees each line while the command
still runs, not when its output ends."""

import sys

from goalrm_core.train.launch import run_streaming

SCRIPT = """
import pathlib, sys, time
log = pathlib.Path(sys.argv[1])
mark = "-".join(["first", "line"])  # built here, so the command written atop the log does not hold it
print(mark, flush=True)
deadline = time.time() + 20
while mark + "\\n" not in log.read_text() and time.time() < deadline:
    time.sleep(0.05)
print("saw it" if mark + "\\n" in log.read_text() else "not yet", flush=True)
"""


def test_each_line_reaches_the_log_while_the_command_runs(tmp_path):
    script, log = tmp_path / "print.py", tmp_path / "run.log"
    script.write_text(SCRIPT)
    run_streaming([sys.executable, str(script), str(log)], log, show=lambda *_: None)
    assert log.read_text().splitlines()[1:] == ["first-line", "saw it"]
