"""The notebooks' parameters cells are the demo profile, and every notebook profile sets every key."""

import json
import shutil

import pytest

from goalrm_core.paths import project_root
from goalrm_core.pipeline import notebook_params as nbp
from goalrm_core.pipeline.profile_files import load_profile

NOTEBOOKS = project_root() / "notebooks"
NOTEBOOK_PROFILES = ("demo", "smoke", "multidigit")


def declared():
    out = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        cell = nbp._parameters_cell(json.loads(path.read_text()), path)
        out[path.stem] = {k: None for k in nbp.declared_keys("".join(cell["source"]), path)}
    return out


def test_committed_cells_are_generated_from_demo_yaml(capsys):
    assert nbp.sync_notebooks(NOTEBOOKS, load_profile("demo"), write=False) == [], "run `goalrm sync-notebooks`"
    # --check says what it checked when all is well, rather than nothing
    assert nbp.main(["--check", "--notebooks-dir", str(NOTEBOOKS)]) == 0
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith(
            f"the parameters cells of the {len(nbp.stage_notebooks(NOTEBOOKS))} "
            "notebooks in " + str(NOTEBOOKS) + "/ match params/demo.yaml (names and values)"
        )
    )


@pytest.mark.parametrize("profile", NOTEBOOK_PROFILES)
def test_every_notebook_profile_sets_every_declared_key(profile):
    assert nbp.missing_keys(load_profile(profile), declared()) == []
    assert isinstance(load_profile(profile)["torch_threads"], int) and load_profile(profile)["torch_threads"] >= 1


def test_interactive_defaults_never_point_into_reports():
    for name, _params in declared().items():
        cell = nbp._parameters_cell(json.loads((NOTEBOOKS / f"{name}.ipynb").read_text()), NOTEBOOKS / name)
        source = "".join(cell["source"])
        assert 'reports_dir = "reports/' not in source and "runs/interactive/demo" in source


def test_drift_is_detected_and_rewritten(tmp_path):
    copy = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, copy)
    changed = dict(load_profile("demo"), n_samples=3)
    assert [p.name for p in nbp.sync_notebooks(copy, changed, write=False)] == ["01_data.ipynb"]
    nbp.sync_notebooks(copy, changed, write=True)
    assert "n_samples = 3\n" in (copy / "01_data.ipynb").read_text().replace("\\n", "\n")
    assert nbp.sync_notebooks(copy, changed, write=False) == []
    lacking = {k: v for k, v in load_profile("demo").items() if k != "n_samples"}
    with pytest.raises(ValueError, match="n_samples"):
        nbp.sync_notebooks(copy, lacking, write=False)


def test_a_cell_that_is_not_flat_literals_is_refused(tmp_path):
    with pytest.raises(ValueError, match="line 1"):
        nbp.declared_keys("x, y = 1, 2\n", tmp_path / "n.ipynb")
    with pytest.raises(ValueError, match="not Python"):
        nbp.declared_keys("x = (\n", tmp_path / "n.ipynb")
    # a value that is code, not a literal, would run in the kernel before any check: refused up front
    with pytest.raises(
        ValueError,
        match=r"n\.ipynb: line 2 of the parameters cell: seed = __import__\('os'\)\.getpid\(\) is not a literal$",
    ):
        nbp.declared_keys("n = -1\nseed = __import__('os').getpid()\n", tmp_path / "n.ipynb")
    with pytest.raises(ValueError, match=r"x = \[1, 1, 1, .{40,}… is not a literal$"):
        nbp.declared_keys("x = [" + "1, " * 100 + "y]\n", tmp_path / "n.ipynb")
    assert nbp.declared_keys(
        'a = -1.5\nb = [0, 1]\nc = "x"\nd = None\ne = {"k": (1, 2)}\n', tmp_path / "n.ipynb"
    ) == list("abcde")


def test_declared_parameters_are_what_papermill_reports():
    """The checks before a kernel starts read each notebook's parameters without papermill; they read
    what papermill's own inspection reports (name, annotation, default text)."""
    import papermill as pm

    from goalrm_core.pipeline.notebook_params import declared_parameters

    fields = ("name", "inferred_type_name", "default")
    for path in sorted((project_root() / "notebooks").glob("0[0-9]_*.ipynb")):
        ours, theirs = declared_parameters(path), pm.inspect_notebook(str(path))
        assert list(ours) == list(theirs), path.name
        assert {k: [v[f] for f in fields] for k, v in ours.items()} == {
            k: [v[f] for f in fields] for k, v in theirs.items()
        }, path.name


def test_sync_writes_names_a_new_trainer_setting_reaches_notebook_02_and_comments_stay(tmp_path):
    """A trainer setting the profile gives that no notebook declares is added to the training
    notebook's cell (by name); a comment written in a cell stays above its key; a key no notebook
    reads and the trainer does not know is added nowhere."""
    copy = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, copy)
    path = copy / "02_training.ipynb"
    notebook = json.loads(path.read_text())
    cell = nbp._parameters_cell(notebook, path)
    cell["source"] = (
        "".join(cell["source"]).replace("max_steps = ", "# the step budget\nmax_steps = ").splitlines(keepends=True)
    )
    path.write_text(json.dumps(notebook))
    profile = dict(load_profile("demo"), l2=0.25, not_a_setting=1)
    assert [p.name for p in nbp.sync_notebooks(copy, profile, write=True)] == ["02_training.ipynb"]
    source = "".join(nbp._parameters_cell(json.loads(path.read_text()), path)["source"])
    assert source.endswith("l2 = 0.25\n") and "not_a_setting" not in source
    assert "# the step budget\nmax_steps = 400\n" in source
    assert nbp.sync_notebooks(copy, profile, write=False) == []
    assert all("not_a_setting" not in p.read_text() for p in copy.glob("*.ipynb"))


def test_a_truncated_notebook_is_named(tmp_path):
    copy = tmp_path / "nbs"
    shutil.copytree(NOTEBOOKS, copy)
    broken = copy / "02_training.ipynb"
    broken.write_text(broken.read_text()[:3000])
    with pytest.raises(ValueError, match=r"02_training\.ipynb: not a readable notebook \(Unterminated string"):
        nbp.sync_notebooks(copy, load_profile("demo"), write=False)
    with pytest.raises(ValueError, match=r"02_training\.ipynb: not a readable notebook"):
        nbp.declared_parameters(broken)
