"""Shared fixtures: a tiny Llama and the character tokenizer, built locally (nothing is downloaded), the tiny
run folder (``goalrm tiny-run``: its policy is ``tiny_policy_dir``),
one smoke-profile report shared by every test that reads a rendered report, and the tiny stage
notebooks the runner tests build (:func:`write_notebook`)."""

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import LlamaForCausalLM, LlamaModel

from goalrm_core.model.reward_model import RewardModel
from goalrm_core.model.tokenization import build_char_tokenizer
from goalrm_core.tasks.toymath.tiny_run import make_tiny_run, tiny_policy_config

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# Tests that share an expensive fixture run in one pytest-xdist worker (``make test`` runs two with
# ``--dist loadgroup``): the fixture is built once, and no worker idles on a lock while the other builds it.
# (pytest 9.2 broke xdist 3.8's groups, which rename a test's node id: pyproject.toml pins pytest 9.1.)
SHARED_FIXTURES = ("smoke_report", "two_process_runs", "uninterrupted", "project")


def pytest_itemcollected(item):
    shared = [name for name in SHARED_FIXTURES if name in getattr(item, "fixturenames", ())]
    if shared:
        item.add_marker(pytest.mark.xdist_group(shared[0]))


@pytest.fixture(scope="session")
def tokenizer():
    return build_char_tokenizer()


@pytest.fixture(scope="session")
def tiny_config(tokenizer):
    """The config of the tiny run's policy (:func:`~goalrm_core.tasks.toymath.tiny_run.tiny_policy_config`)."""
    return tiny_policy_config(tokenizer)


# A policy, an RM and a goal for the sampling and decoding tests: random weights, one shared tokenizer.
@pytest.fixture(scope="module")
def tiny_lm(tiny_config):
    torch.manual_seed(1)
    return LlamaForCausalLM(tiny_config).eval()


@pytest.fixture(scope="module")
def tiny_rm(tiny_config):
    torch.manual_seed(2)
    return RewardModel(LlamaModel(tiny_config)).eval()


@pytest.fixture(scope="module")
def tiny_goal(tiny_config):
    return np.random.default_rng(0).normal(size=(1, tiny_config.hidden_size)).astype(np.float32)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """One tiny run folder per test run (``goalrm tiny-run``: a random tiny policy and preference pairs, seed 0).
    Read it, never write into it: copy what a test changes."""
    return make_tiny_run(tmp_path_factory.mktemp("tiny_run"), seed=0)


@pytest.fixture(scope="session")
def tiny_policy_dir(tiny_run):
    """The tiny run's policy: a randomly initialised causal LM saved like a Hub checkpoint, for --pretrain."""
    return tiny_run.policy


def profile_file(resolved: dict) -> dict:
    """A resolved profile (:func:`~goalrm_core.pipeline.profile_files.load_profile`) as a profile file writes
    it: the trainer's settings (``study.recipe.RM_KEYS``) in its ``rm:`` block, the other keys as they are;
    ``load_profile`` reads the file back to ``resolved``."""
    from goalrm_core.study.recipe import RM_BLOCK, RM_KEYS

    block = {k: v for k, v in resolved.items() if k in RM_KEYS}
    return {**{k: v for k, v in resolved.items() if k not in RM_KEYS}, **({RM_BLOCK: block} if block else {})}


def smoke_run(tmp_path_factory, name):
    """``goalrm report --profile smoke`` with its run directory in tmp (tests never touch runs/) and
    one thread, since identical numbers need an identical thread count. Returns (exit code, the
    report folder, the run folder)."""
    import yaml

    from goalrm_core.paths import resolve_path
    from goalrm_core.pipeline.profile_files import load_profile
    from goalrm_core.pipeline.runner import run_report

    root = tmp_path_factory.mktemp(name)
    profile = load_profile("smoke") | {"run_dir": str(root / "run"), "torch_threads": 1}
    (root / "params").mkdir()
    (root / "params" / "smoke.yaml").write_text(yaml.safe_dump(profile_file(profile)))
    code = run_report(
        "smoke", params_dir=root / "params", reports_root=root / "reports", notebooks_dir=resolve_path("notebooks")
    )
    return code, root / "reports" / "smoke", root / "run"


def shared_smoke_run(request, tmp_path_factory, name):
    """:func:`smoke_run` once per test run. Under pytest-xdist the workers share it: whichever asks first
    builds it while the others wait on a file lock, then all read it, so the tests that read a smoke
    report need not run in one worker (and no worker builds it twice)."""
    import fcntl
    import json

    if getattr(request.config, "workerinput", None) is None:  # one process: a session fixture is once already
        return smoke_run(tmp_path_factory, name)
    shared = tmp_path_factory.getbasetemp().parent  # the run's folder, above every worker's own
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / f"{name}.json"
        if not done.exists():
            code, reports, run = smoke_run(tmp_path_factory, name)
            done.write_text(json.dumps([code, str(reports), str(run)]))
        code, reports, run = json.loads(done.read_text())
    return code, Path(reports), Path(run)


@pytest.fixture(scope="session")
def smoke_report(request, tmp_path_factory):
    """One smoke report per test run (a few minutes), for tests/test_notebooks.py, the browser test and
    the sweep test alike (built once across the xdist workers: :func:`shared_smoke_run`)."""
    return shared_smoke_run(request, tmp_path_factory, "first")


def pytest_sessionfinish(session, exitstatus):
    """Unlink DeepSpeed CPU all-reduce buffers that no process maps any more: a training run the
    tests kill on purpose cannot release its own, and /dev/shm is RAM."""
    shm = Path("/dev/shm")
    leftovers = list(shm.glob("deepspeed_allreduce_buffer_*"))
    if not leftovers:
        return
    mapped = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            mapped.update(line.split()[-1] for line in maps.read_text().splitlines() if "/dev/shm/deepspeed" in line)
        except OSError:
            continue
    for leftover in leftovers:
        if str(leftover) not in mapped:
            leftover.unlink(missing_ok=True)


def write_notebook(path, params_src: str, *body: str, tags: tuple[str, ...] = (), head=None) -> None:
    """A tiny stage notebook for the runner's tests: ``head`` (default: a cell importing
    ``record_metrics``), the ``parameters`` cell ``params_src``, then one code cell per ``body``
    source, each tagged ``tags``; run by the ``python3`` kernel."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    nb.cells = [
        head
        if head is not None
        else nbformat.v4.new_code_cell("from goalrm_core.pipeline.records import record_metrics"),
        nbformat.v4.new_code_cell(params_src, metadata={"tags": ["parameters"]}),
        *(nbformat.v4.new_code_cell(src, metadata={"tags": list(tags)} if tags else {}) for src in body),
    ]
    nbformat.write(nb, str(path))
