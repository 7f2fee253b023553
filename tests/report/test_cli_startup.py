"""Every ``goalrm`` command answers --help and a bad argument or profile without loading the numerical
stack: the cases are ``benchmarks/cli_startup.py``'s (which times them; no time is asserted here)."""

import importlib.util
import json
import subprocess
import sys

import pytest

from goalrm_core.paths import project_root

_spec = importlib.util.spec_from_file_location("cli_startup", project_root() / "benchmarks" / "cli_startup.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_every_command_is_covered():
    from goalrm_core.cli import COMMANDS

    covered = {argv[0] for argv, _ in bench.CASES}
    assert set(COMMANDS) <= covered, f"no startup case for {sorted(set(COMMANDS) - covered)}"
    for command in COMMANDS:
        assert [command, "--help"] in [argv for argv, _ in bench.CASES]
        assert any(argv[0] == command and code == 2 for argv, code in bench.CASES), (
            f"no argument error case for {command}"
        )


@pytest.mark.parametrize("argv, code", bench.CASES, ids=[" ".join(argv) for argv, _ in bench.CASES])
def test_command_answers_without_the_numerical_stack(argv, code):
    done = subprocess.run(
        [sys.executable, "-c", bench.PROBE.format(argv=argv, heavy=bench.HEAVY)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=project_root(),
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["code"] == code, done.stderr
    assert out["loaded"] == [], f"goalrm {' '.join(argv)} loaded {out['loaded']}"
