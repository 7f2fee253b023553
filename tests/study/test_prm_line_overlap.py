"""scripts/prm_line_overlap.py: the share of a bench's first wrong lines a training pair already showed wrong."""

import importlib.util
import io
import json
import tarfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "prm_line_overlap.py"


def load():
    spec = importlib.util.spec_from_file_location("prm_line_overlap", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sample(question, text, correct, step):
    return {"question": question, "generated_solution": text, "is_correct": correct, "first_error_step": step}


def test_counts_first_wrong_lines_seen_in_training_and_shared_questions(tmp_path):
    m = load()
    pairs = [
        {"question": "1 +2 +3", "correct": "1+2=3\n3+3=6\n#6", "incorrect": "1+2=3\n3+3=7\n#7"},
        {"question": "4 +4", "correct": "4+4=8\n#8", "incorrect": "4+4=9\n#9"},
    ]
    samples = [
        sample("5 +3 +3", "5+3=8\n8+3=1\n#1", True, None),
        sample("2 +1 +3", "2+1=3\n3+3=7\n#7", False, 1),  # wrong line seen in training
        sample("4 +5", "4+5=1\n#1", False, 0),  # wrong line never seen
        sample("4 +4", "4+4=9\n#9", False, 0),
    ]  # seen, and a shared question
    got = m.overlap(samples, pairs)
    assert got["incorrect_with_first_error"] == 3
    assert got["first_error_line_seen_in_training"] == 2
    assert got["distinct_first_error_lines"] == 3
    assert got["shared_questions"] == 1
    # end to end from a snapshot: the json and the table are written
    snap = tmp_path / "data-x.tar.gz"
    with tarfile.open(snap, "w:gz") as tar:
        for name, rows in (("data/generations/toy-id/samples.jsonl", samples), ("data/preference/train.jsonl", pairs)):
            data = "".join(json.dumps(r) + "\n" for r in rows).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert m.main([str(snap), "--out", str(tmp_path / "out")]) == 0
    assert json.loads((tmp_path / "out.json").read_text())["first_error_line_seen_in_training"] == 2
    assert "| questions shared by the benchmark and the training pairs | 1 |" in (tmp_path / "out.md").read_text()
