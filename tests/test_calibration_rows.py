"""Calibration rows are one seed each of a recipe, averaged by recipe name: rows of one name that ran another
recipe (other settings, pairs, task or scoring) are refused in one line naming the file, both lines and what
differs, by the table (scripts/calibration_table.py) and before training by the writer (scripts/calibrate_rm.py)."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def table():
    sys.path.insert(0, str(ROOT / "scripts"))
    import calibration_table

    return calibration_table


def row(seed, lr=2e-4, **over):
    return {
        "name": "base",
        "strategy": "baseline",
        "seed": seed,
        "run_dir": "runs/demo",
        "bench": "toy-id",
        "headline": "sample0",
        "recipe": {"max_steps": 600, "learning_rate": lr},
        "task": {"modulus": 10},
        "auroc": 0.8,
        **over,
    }


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_recipe_name_reused_with_other_settings_is_refused_naming_both_lines(table, tmp_path):
    path = write(tmp_path / "rm.jsonl", [row(0), row(1), row(0, strategy="goal-conditioned"), row(2, lr=5e-4)])
    line = table.recipe_conflict(table._read(path), path)
    assert line == (
        f"{path}: recipe 'base' (baseline, runs/demo) was recorded at line 1 with recipe learning_rate=0.0002, "
        f"but line 4 has recipe learning_rate=0.0005; one recipe name is one recipe: give the new one another --name"
    )
    # another strategy or run folder under the same name is another recipe's rows, and an older row without a field is
    # not compared
    assert (
        table.recipe_conflict(
            table._read(
                write(
                    path,
                    [row(0), row(1, run_dir="runs/other", lr=5e-4), {k: v for k, v in row(2).items() if k != "task"}],
                )
            ),
            path,
        )
        is None
    )
    other_pairs = table._read(
        write(
            path,
            [row(0, data={"source": "policy", "n_pairs": 6328}), row(1, data={"source": "policy", "n_pairs": 6000})],
        )
    )
    assert "with data n_pairs=6328, but line 2 has data n_pairs=6000;" in table.recipe_conflict(other_pairs, path)


def test_the_writer_refuses_a_new_row_before_it_trains(table, tmp_path):
    path = write(tmp_path / "rm.jsonl", [row(0)])
    assert "but this run has recipe learning_rate=0.0005;" in table.recipe_conflict(
        table._read(path), path, new=row(1, lr=5e-4)
    )
    assert table.recipe_conflict(table._read(path), path, new=row(1)) is None


def test_the_table_script_refuses_in_one_line(table, tmp_path, monkeypatch, capsys):
    write(tmp_path / "rm.jsonl", [row(0), row(1, lr=5e-4)])
    monkeypatch.setattr(table, "DIR", tmp_path)
    assert table.main() == 2 and not (tmp_path / "README.md").exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"calibration_table.py: error: {tmp_path / 'rm.jsonl'}: recipe 'base'"
    ), err


def test_a_row_missing_a_field_its_table_reads_is_refused_naming_file_line_and_field(
    table, tmp_path, monkeypatch, capsys
):
    """(53) a calibration row without a field (or with it null) is never dropped by a groupby nor averaged as NaN:
    the page is not written, and the one line names the file, the line and the field."""
    import shutil

    for name in table.REQUIRED:  # the committed tables, as they are
        if (table.DIR / name).exists():
            shutil.copy(table.DIR / name, tmp_path / name)
    monkeypatch.setattr(table, "DIR", tmp_path)
    assert table.render()  # the committed rows have every field
    rows = [json.loads(line) for line in (tmp_path / "rm.jsonl").read_text().splitlines() if line.strip()]
    for broken, says in [
        ({k: v for k, v in rows[1].items() if k != "eval_accuracy"}, "field 'eval_accuracy' is missing"),
        ({**rows[1], "run_dir": None}, "field 'run_dir' is null"),
    ]:
        write(tmp_path / "rm.jsonl", [rows[0], broken, *rows[2:]])
        assert table.main() == 2 and not (tmp_path / "README.md").exists()
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"calibration_table.py: error: {tmp_path / 'rm.jsonl'}:2: {says}"), (
            err
        )
    (tmp_path / "rm.jsonl").write_text(json.dumps(rows[0]) + "\n{oops\n")
    assert table.main() == 2
    assert f"{tmp_path / 'rm.jsonl'}:2: not a JSON row" in capsys.readouterr().err
