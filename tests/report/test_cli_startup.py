"""`goalrm report` answers --help and a bad argument without loading the numerical stack."""

import json
import subprocess
import sys

import pytest

from goalrm_core.paths import project_root

HEAVY = ("torch", "transformers", "deepspeed", "scipy")

PROBE = """
import json, sys
from goalrm_core.cli import main
try:
    code = main({argv!r})
except SystemExit as exit:
    code = exit.code
print(json.dumps({{"code": code, "loaded": sorted(m for m in {heavy!r} if m in sys.modules)}}))
"""


@pytest.mark.parametrize("argv, code", [(["report", "--help"], 0), (["report", "--profile", "no-such-profile"], 2),
                                        (["report", "--profile", "../x"], 2)])
def test_report_answers_without_torch(argv, code):
    done = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)], capture_output=True, text=True,
                          timeout=120, cwd=project_root())
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["code"] == code, done.stderr
    assert out["loaded"] == [], f"{' '.join(argv)} loaded {out['loaded']}"
