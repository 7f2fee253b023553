"""A new contrastive strategy with one hyperparameter is three hand-edited files: its scoring function
(``model/strategies.py``), its hyperparameter (``train/config.py``) and its test. Everything else (the trainer's
flags and checks, the profile's ``rm:`` key of the same name and its rule, notebook 02's parameters, which the
runner hands every ``rm`` key) follows; no profile, not even the demo, needs to name it.

The test does exactly that in a copy of the project and then trains one step of a tiny RM with the new
strategy along the path a report takes: a profile on the demo resolves and passes the checks, notebook
02's parameters carry the value into its recipe, and ``goalrm train-rm`` runs the config's flags; the
new similarity function records the hyperparameter it was handed and the states it was asked to compare,
which under the official ``all`` pairing are every drawn source with every drawn goal of a row (a strategy
returns similarities; the loss does the pairing).
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from goalrm_core.paths import project_root
from goalrm_core.tasks.toymath.tiny_run import make_tiny_run

ROOT = project_root()
# The hand edits, as a contributor would write them.
STRATEGY = """

@contrastive_strategy("cosine_scaled", "sigma(scale * cos)", options=("contrastive_scale",))
def _cosine_scaled(source, goal, contrastive_scale):
    import os

    if os.environ.get("SCALE_SEEN"):  # this test's probe: the value the objective handed over, and the states
        with open(os.environ["SCALE_SEEN"], "a") as seen:
            seen.write(f"{contrastive_scale} {tuple(source.shape[:2])} {tuple(goal.shape[:2])}\\n")
    return contrastive_scale * cosine_matrix(source, goal)
"""
FIELD = (
    '    contrastive_scale: float = _help("cosine_scaled: the factor on each cosine.", 1.0, '
    'range=Range(float, "> 0"))\n'
)
HAND_EDITED = ("goalrm_core/model/strategies.py", "goalrm_core/train/config.py", "tests/test_extension.py")

# Run in the copy: generate, resolve, check, build the config as notebook 02 does, train through the command line.
SCRIPT = r"""
import json, sys
from pathlib import Path

import goalrm_core
assert Path(goalrm_core.__file__).resolve().is_relative_to(Path.cwd().resolve()), goalrm_core.__file__
from goalrm_core.cli import main
from goalrm_core.pipeline.notebook_params import declared_parameters
from goalrm_core.pipeline.profile_checks import check_settings
from goalrm_core.pipeline.profile_files import load_profile
from goalrm_core.pipeline.runner import discover_stages, inspect_stages, stage_parameters
from goalrm_core.study.training import notebook_recipe, rm_config

assert main(["sync-notebooks", "--check"]) == 0                            # the notebooks need no edit
assert "contrastive_scale" not in declared_parameters(Path("notebooks/02_training.ipynb"))

declared = inspect_stages(discover_stages(Path("notebooks")))
settings = load_profile("scaled")                                          # base: demo + the new strategy
assert settings["contrastive_scale"] == 3.0 and settings["n_samples"] == load_profile("demo")["n_samples"]
assert check_settings(settings, declared, "params/scaled.yaml") == []     # a known key, no warning
try:
    check_settings({**settings, "contrastive_scale": 0.0}, declared, "params/scaled.yaml")
except ValueError as e:
    assert "contrastive_scale must be a finite number > 0, got 0.0" in str(e), e
else:
    raise AssertionError("a scale out of range passed")

# what papermill hands notebook 02
params = stage_parameters("scaled", settings, declared["02_training"], Path("r"), "02_training")
assert params["contrastive_scale"] == 3.0
cfg = rm_config(notebook_recipe(params), sys.argv[1], "goal-conditioned", 0)
assert (cfg.contrastive_strategy, cfg.contrastive_scale) == ("cosine_scaled", 3.0)
argv = cfg.to_argv()
assert argv[argv.index("--contrastive_scale") + 1] == "3.0"
assert main(["train-rm", *argv]) == 0
print(json.dumps(json.loads(Path(cfg.save_path, "train_summary.json").read_text())))
"""


def _copy_project(to):
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("goalrm_core", "params", "notebooks"):
        shutil.copytree(ROOT / folder, to / folder, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", to / "pyproject.toml")


def _edit(path, anchor, text, after=True):
    source = path.read_text()
    assert source.count(anchor) == 1, f"{path}: the anchor {anchor!r} moved; update this test"
    path.write_text(source.replace(anchor, anchor + text if after else text + anchor))


def test_a_new_strategy_with_a_hyperparameter_is_three_files_and_trains(tmp_path):
    project = tmp_path / "project"
    _copy_project(project)
    # the two edits besides this test
    (project / HAND_EDITED[0]).write_text((project / HAND_EDITED[0]).read_text() + STRATEGY)
    config = project / HAND_EDITED[1]
    _edit(
        config,
        next(line + "\n" for line in config.read_text().splitlines() if line.startswith("    contrastive_loss_beta:")),
        FIELD,
    )
    # a profile that uses it (not one of the files to edit: any profile may now choose it)
    (project / "params" / "scaled.yaml").write_text(
        "base: demo\nrm:\n  contrastive_strategy: cosine_scaled\n  contrastive_scale: 3.0\n"
        "  max_steps: 1\n  train_batch_size: 2\n  micro_train_batch_size: 2\n"
        "  eval_steps: -1\n  sim_samples: 2\n  unsim_samples: 3\n"
        "  contrastive_pairs: all\n"
    )
    run = make_tiny_run(tmp_path / "run").root  # a tiny policy and pairs (goalrm tiny-run)
    seen = tmp_path / "seen.txt"
    env = {**os.environ, "PYTHONPATH": str(project), "OMP_NUM_THREADS": "1", "SCALE_SEEN": str(seen)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(run)], cwd=project, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 1 and summary["strategy"] == "contrastive"
    # the scoring function got the profile's value, and under the official `all` pairing every row's 2 positive
    # sources with its 2 goals and its 3 negative sources with its 3 goals: the loss pairs them, not the strategy
    assert set(seen.read_text().splitlines()) == {"3.0 (2, 2) (2, 2)", "3.0 (2, 3) (2, 3)"}, seen.read_text()
    # the other files a strategy used to need are untouched, the notebooks too
    for name in (
        "goalrm_core/choices.py",
        "goalrm_core/model/losses.py",
        "goalrm_core/study/recipe.py",
        "goalrm_core/pipeline/profile_rules.py",
        "params/demo.yaml",
        "params/smoke.yaml",
        "notebooks/02_training.ipynb",
    ):
        assert (project / name).read_text() == (ROOT / name).read_text(), name


# ----------------------------------------------------------------- the recipe of docs/design.md, as written

DESIGN = ROOT / "docs" / "design.md"
# Run in the copy: each `goalrm` command of the recipe's bash block, as the command line runs it.
RECIPE_SCRIPT = r"""
import json, shlex, sys
from pathlib import Path

import goalrm_core
assert Path(goalrm_core.__file__).resolve().is_relative_to(Path.cwd().resolve()), goalrm_core.__file__
from goalrm_core.cli import main

for line in json.loads(sys.argv[1]):
    argv = shlex.split(line)
    assert argv[0] == "goalrm", line
    assert main(argv[1:]) == 0, line
"""


def design_recipe(text):
    """docs/design.md's "Adding a loss variant": (the strategy's code of edit 1, the field of edit 2, the
    ``goalrm`` command lines of the bash block, their continuations joined)."""
    section = text.split("### Adding a loss variant", 1)[1].split("\n### ", 1)[0]
    code = re.search(r"(?ms)^1\. .*?```python\n(.*?)^ *```", section).group(1)
    field = re.search(r"(?ms)^2\. .*?`(\w+: \w+ = _help\(.*?\))`", section).group(1)
    block = re.search(r"(?ms)^```bash\n(.*?)^```", section).group(1).replace("\\\n", " ")
    return textwrap.dedent(code), field, [line.strip() for line in block.splitlines() if line.strip()]


def test_the_design_recipe_s_commands_train_one_step_of_its_strategy(tmp_path):
    """The recipe's edits 1 and 2, then its two commands as written (the folder /tmp/tiny moved under tmp):
    `goalrm tiny-run` makes the folder and `goalrm train-rm` trains one step of the new strategy on it."""
    code, field, commands = design_recipe(DESIGN.read_text(encoding="utf-8"))
    assert [shlex.split(line)[:2] for line in commands] == [["goalrm", "tiny-run"], ["goalrm", "train-rm"]], commands
    train = shlex.split(commands[1])
    strategy = train[train.index("--contrastive_strategy") + 1]
    assert train[train.index("--reward_model_strategy") + 1] == "contrastive"
    assert f'"{strategy}"' in code and "--max_steps" in train and train[train.index("--max_steps") + 1] == "1"
    project = tmp_path / "project"
    _copy_project(project)
    strategies = project / "goalrm_core" / "model" / "strategies.py"
    strategies.write_text(strategies.read_text() + "\n\n" + code)
    config = project / "goalrm_core" / "train" / "config.py"
    _edit(
        config,
        next(line + "\n" for line in config.read_text().splitlines() if line.startswith("    contrastive_loss_beta:")),
        f"    {field}\n",
    )
    folder = tmp_path / "tiny"
    lines = [line.replace("/tmp/tiny", str(folder)) for line in commands]
    env = {**os.environ, "PYTHONPATH": str(project), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", RECIPE_SCRIPT, json.dumps(lines)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    save_path = Path(shlex.split(lines[1])[shlex.split(lines[1]).index("--save_path") + 1])
    assert save_path.is_relative_to(folder)
    summary = json.loads((save_path / "train_summary.json").read_text())
    assert (summary["steps"], summary["strategy"], summary["contrastive_strategy"]) == (1, "contrastive", strategy)
