"""The bad-input corpus: every case in ``cases.yaml`` runs through the real command line
in a subprocess, and must exit with its code, say its message on stderr, and leave nothing behind.

A case names its command (``argv``), how its input is built (``inputs``: a list of steps, below),
its expected exit code (``exit``, 2 unless given) and a fragment of its stderr (``stderr``);
optionally ``stdout`` (what it may print: "" for nothing), ``env`` (extra environment), ``fault``
(``[name, value]``: a fault of ``tests/faults.py`` put in the command's process), ``leaves``
(files a failed run may leave under ``{out}``, such as its log) and ``topic`` (the subject of its
section of ``cases.yaml``). The stderr fragment is matched with runs of whitespace as one space.

Inputs. The shared artifacts are built once per session from the tiny models of ``conftest.py``
and never written to by a case: ``{rm}`` (a tiny RM), ``{other_rm}`` (the same architecture,
trained otherwise: another config hash), ``{policy}``, ``{goal}`` (a goal state of ``{rm}``),
``{pairs}`` (preference pairs), ``{gens}`` (a folder of generations, benchmark ``toy``),
``{eval}`` (``{gens}`` scored by ``{rm}`` with goalrm eval-rm: ``{eval}/rm/toy/...``), ``{other_scored}``
(one scored file of ``{other_rm}``), ``{rm_goal}`` and ``{other_goal}`` (get-representation's
folders of each RM), ``{questions}``. Each case has a
folder of its own, ``{in}``, which its ``inputs`` steps fill (paths relative to it):

* ``copy: [artifact, dest]``: a copy of a shared artifact;
* ``write: [dest, text]``: a text file;
* ``set: [file, line, field, value]``: set a field on one line of a JSONL file (``value`` as YAML gives it);
* ``drop: [file, line, field]``: remove a field from one line;
* ``repeat: [file, times]``: the file's content ``times`` over (a bad concatenation);
* ``delete: path``;
* ``truncate: [file, fraction]``: keep the first ``fraction`` of the file's bytes;
* ``npy: [dest, fill, columns]``: a (1, columns) array of ``zeros``, ``ones`` or ``nan``;
* ``weights: [rm folder, value]``: every value-head weight of a copied RM set to ``value`` (nan, 3e38 …);
* ``rawset: [file, line, field, text]``: set a field on one JSONL line to the raw JSON text ``text``
  (``1e400``, a 400-digit integer, ``NaN``: what a JSON writer of another program may put there);
* ``dupkey: [file, line, field, text]``: give ``field`` a second time on one line, with the raw value ``text``;
* ``gzip: [file, dest]``: ``dest``, the gzip of a copied ``file``;
* ``jset: [file, key, value]`` / ``jdel: [file, key]``: set or remove a key of a JSON file (``config.json``,
  ``goalrm.json``);
* ``swap_tokens: rm folder``: a tokenizer of the same size whose ids of two letters are swapped;
* ``lock: dest``: a writer's lock held by a live process (the test's own), as a running goalrm command leaves it.

``npy`` fills: ``zeros``, ``ones``, ``nan``, ``tiny`` (1e-29), ``complex`` (1+1j) and ``strings``.

Nothing left behind: ``{out}`` (where a case's command would write) must hold nothing afterwards
(but its ``leaves``), and ``{in}`` must hold exactly what it held before the command ran.

Each case is a process of its own; the ``goalrm`` fixture forks them from a server that has done
the imports once (see ``forkserver.py``), which keeps the corpus to a minute or two on two cores.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch
import yaml
from safetensors.torch import load_file, save_file
from transformers import LlamaModel

from goalrm_core.cli.get_representation import main as get_representation
from goalrm_core.data.io import write_jsonl
from goalrm_core.inference.scoring import eval_rm
from goalrm_core.model.reward_model import RewardModel, save_reward_model

HERE = Path(__file__).resolve().parent
TREE = HERE.parents[1]  # the checkout under test: subprocesses import goalrm_core from here
CASES = yaml.safe_load((HERE / "cases.yaml").read_text())
TOPICS = {
    "labels",
    "counts",
    "non-finite",
    "finished-or-absent",
    "corrupt-scores",
    "ranges",
    "output-paths",
    "messages",
}
# (file modes are not a refusal: tests/data/test_damaged_files.py)

PAIRS = [
    {"question": "1 +2", "correct": "1+2=3\n#3", "incorrect": "1+2=4\n#4"},
    {"question": "4 -1", "correct": "4-1=3\n#3", "incorrect": "4-1=5\n#5"},
    {"question": "2 +2 -1", "correct": "2+2=4\n4-1=3\n#3", "incorrect": "2+2=4\n4-1=2\n#2"},
    {"question": "7 -3", "correct": "7-3=4\n#4", "incorrect": "7-3=3\n#3"},
]
GENERATIONS = {
    "greedy": [
        {
            "question": "1 +2",
            "generated_solution": "1+2=3\n#3",
            "predicted_answer": 3,
            "expected_answer": 3,
            "is_correct": True,
        },
        {
            "question": "9 -3",
            "generated_solution": "9-3=5\n#5",
            "predicted_answer": 5,
            "expected_answer": 6,
            "is_correct": False,
        },
        {"question": "7", "generated_solution": "#7", "predicted_answer": 7, "expected_answer": 7, "is_correct": True},
        {
            "question": "4 +4",
            "generated_solution": "4+4=9\n#9",
            "predicted_answer": 9,
            "expected_answer": 8,
            "is_correct": False,
        },
    ],
    "samples": [
        {"question": q, "generated_solution": s, "predicted_answer": a, "expected_answer": e, "is_correct": a == e}
        for q, e in (("1 +2", 3), ("9 -3", 6))
        for s, a in ((f"{q.replace(' ', '')}={e}\n#{e}", e), (f"{q.replace(' ', '')}={e + 1}\n#{e + 1}", e + 1))
    ],
}


@pytest.fixture(scope="session")
def shared(tmp_path_factory, tiny_config, tokenizer, tiny_policy_dir) -> dict[str, Path]:
    """The shared artifacts of every case (see the module docstring), built once."""
    root = tmp_path_factory.mktemp("bad-input-artifacts")
    torch.manual_seed(0)
    rm = save_reward_model(
        RewardModel(LlamaModel(tiny_config)).eval(), root / "rm", tokenizer, training_args={"seed": 0}
    )
    torch.manual_seed(1)
    other = save_reward_model(
        RewardModel(LlamaModel(tiny_config)).eval(), root / "other_rm", tokenizer, training_args={"seed": 1}
    )
    goal = root / "goal_state.npy"
    np.save(goal, np.random.default_rng(0).normal(size=(1, tiny_config.hidden_size)).astype(np.float32))
    write_jsonl(root / "pairs.jsonl", PAIRS)
    write_jsonl(root / "questions.jsonl", [{"question": g["question"]} for g in GENERATIONS["greedy"]])
    for split, rows in GENERATIONS.items():
        write_jsonl(root / "gens" / "toy" / f"{split}.jsonl", rows)
    eval_rm(
        root / "gens",
        rm,
        root / "eval",
        ["toy"],
        goal,
        template="toymath",
        encoding="split",
        readout="eos",
        progress=False,
    )
    eval_rm(
        root / "gens",
        other,
        root / "eval-other",
        ["toy"],
        vanilla=True,
        template="toymath",
        encoding="split",
        readout="eos",
        progress=False,
    )
    for name, model in (("rm_goal", rm), ("other_goal", other)):
        assert (
            get_representation(
                [
                    f"--dataset-path={root / 'pairs.jsonl'}",
                    f"--reward-model-path={model}",
                    f"--save-dir={root / name}",
                    "--template=toymath",
                ]
            )
            == 0
        )
    return {
        "rm": rm,
        "other_rm": other,
        "policy": Path(tiny_policy_dir),
        "goal": goal,
        "pairs": root / "pairs.jsonl",
        "gens": root / "gens",
        "eval": root / "eval",
        "questions": root / "questions.jsonl",
        "rm_goal": root / "rm_goal",
        "other_goal": root / "other_goal",
        "other_scored": root / "eval-other" / "other_rm" / "toy" / "all" / "output-metrics-dense.jsonl",
    }


@pytest.fixture(scope="session")
def goalrm(tmp_path_factory):
    """``goalrm(argv, cwd, env, fault) -> (exit code, stdout, stderr)``: one fresh process per command line,
    forked from ``forkserver.py`` (the imports paid once); ``GOALRM_CORPUS_FRESH=1`` starts each as
    ``python -m goalrm_core.cli`` instead, which is the same code path, seconds slower per case."""
    logs = tmp_path_factory.mktemp("bad-input-logs")
    if os.environ.get("GOALRM_CORPUS_FRESH", "") not in ("", "0"):

        def fresh(argv, cwd, env, fault=None):
            command = [str(TREE / "tests" / "faults.py"), *map(str, fault)] if fault else ["-m", "goalrm_core.cli"]
            done = subprocess.run(
                [sys.executable, *command, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
            )
            return done.returncode, done.stdout, done.stderr

        yield fresh
        return
    server = subprocess.Popen(
        [sys.executable, str(HERE / "forkserver.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(TREE), "TOKENIZERS_PARALLELISM": "false"},
    )
    assert json.loads(server.stdout.readline()) == {"ready": True}
    count = 0

    def forked(argv, cwd, env, fault=None):
        nonlocal count
        count += 1
        out, err = logs / f"{count}.out", logs / f"{count}.err"
        request = {
            "argv": argv,
            "cwd": str(cwd),
            "env": env,
            "stdout": str(out),
            "stderr": str(err),
            "timeout": 300,
            "fault": fault,
        }
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        reply = server.stdout.readline()
        assert reply, "the fork server died"
        return json.loads(reply)["exit"], out.read_text(), err.read_text()

    yield forked
    server.stdin.close()
    server.wait(timeout=30)


def _jsonl_edit(path: Path, line: int, edit) -> None:
    lines = path.read_text().splitlines()
    row = json.loads(lines[line - 1])
    edit(row)
    lines[line - 1] = json.dumps(row)
    path.write_text("".join(f"{x}\n" for x in lines))


def _set_head_weights(folder: Path, value: float) -> None:
    weights = folder / "model.safetensors"
    tensors = load_file(weights)
    head = [name for name in tensors if name.startswith("score.")]
    assert head, f"no value head in {weights}"
    for name in head:
        tensors[name] = torch.full_like(tensors[name], value)
    save_file(tensors, weights, metadata={"format": "pt"})


def build_inputs(steps: list[dict], folder: Path, shared: dict[str, Path]) -> None:
    """Run a case's ``inputs`` steps in its folder (see the module docstring)."""
    for step in steps:
        ((op, args),) = step.items()
        if op == "copy":
            src, dest = shared[args[0]], folder / args[1]
            dest.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if src.is_dir() else shutil.copyfile)(src, dest)
        elif op == "write":
            (folder / args[0]).parent.mkdir(parents=True, exist_ok=True)
            (folder / args[0]).write_text(args[1])
        elif op == "set":
            _jsonl_edit(folder / args[0], args[1], lambda row, args=args: row.__setitem__(args[2], args[3]))
        elif op == "drop":
            _jsonl_edit(folder / args[0], args[1], lambda row, args=args: row.pop(args[2]))
        elif op == "repeat":
            path = folder / args[0]
            path.write_text(path.read_text() * args[1])
        elif op == "delete":
            path = folder / args
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        elif op == "truncate":
            path = folder / args[0]
            path.write_bytes(path.read_bytes()[: int(path.stat().st_size * args[1])])
        elif op == "npy":
            dest, fill, columns = folder / args[0], args[1], args[2]
            dest.parent.mkdir(parents=True, exist_ok=True)
            if fill == "strings":
                np.save(dest, np.full((1, columns), "x"))
            elif fill == "complex":
                np.save(dest, np.full((1, columns), 1 + 1j, dtype=np.complex64))
            else:
                np.save(
                    dest,
                    np.full(
                        (1, columns), {"zeros": 0.0, "ones": 1.0, "nan": np.nan, "tiny": 1e-29}[fill], dtype=np.float32
                    ),
                )
        elif op in ("rawset", "dupkey"):
            path, line, key, text = folder / args[0], args[1], args[2], str(args[3])
            lines = path.read_text().splitlines()
            row = json.loads(lines[line - 1])
            if op == "rawset":
                row[key] = "@@RAW@@"
                lines[line - 1] = json.dumps(row).replace('"@@RAW@@"', text)
            else:
                lines[line - 1] = json.dumps(row)[:-1] + f", {json.dumps(key)}: {text}}}"
            path.write_text("".join(f"{x}\n" for x in lines))
        elif op == "gzip":
            (folder / args[1]).write_bytes(
                gzip.compress(
                    (folder / args[0]).read_bytes() if (folder / args[0]).exists() else shared[args[0]].read_bytes()
                )
            )
        elif op in ("jset", "jdel"):
            path = folder / args[0]
            data = json.loads(path.read_text())
            data.pop(args[1]) if op == "jdel" else data.__setitem__(args[1], args[2])
            path.write_text(json.dumps(data, indent=2))
        elif op == "swap_tokens":
            path = folder / args / "tokenizer.json"
            data = json.loads(path.read_text())
            vocab = data["model"]["vocab"]
            vocab["a"], vocab["b"] = vocab["b"], vocab["a"]
            path.write_text(json.dumps(data))
        elif op == "lock":
            me = psutil.Process()
            (folder / args).write_text(
                json.dumps(
                    {
                        "pid": me.pid,
                        "started": me.create_time(),
                        "host": socket.gethostname(),
                        "command": "goalrm (the corpus's own process)",
                    }
                )
                + "\n"
            )
        elif op == "weights":
            _set_head_weights(folder / args[0], float(args[1]))
        else:
            raise ValueError(f"unknown input step {op!r}")


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (relative path -> sha256), so a case can show it changed nothing."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def expand(value: str, places: dict[str, str]) -> str:
    for name, path in places.items():
        value = value.replace("{" + name + "}", path)
    return value


def test_the_corpus_covers_every_topic():
    ids = [case["id"] for case in CASES]
    assert len(ids) >= 40 and len(set(ids)) == len(ids)
    assert {case.get("topic") for case in CASES} - {None} == TOPICS
    for case in CASES:
        assert set(case) <= {"id", "topic", "argv", "inputs", "exit", "stderr", "stdout", "env", "fault", "leaves"}, (
            case["id"]
        )
        assert case["argv"][0] in ("train-rm", "get-representation", "eval-rm", "metrics", "decode"), case["id"]
        assert case["stderr"], case["id"]


@pytest.mark.bad_inputs
@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_bad_input_is_refused_through_the_command_line(case, shared, goalrm, tmp_path):
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    build_inputs(case.get("inputs", []), folder, shared)
    places = {**{name: str(path) for name, path in shared.items()}, "in": str(folder), "out": str(out)}
    argv = [expand(str(a), places) for a in case["argv"]]
    before = snapshot(folder)
    env = {k: v for k, v in os.environ.items() if k != "GOALRM_DEBUG"}
    env.update(
        {
            "PYTHONPATH": str(TREE),
            "TOKENIZERS_PARALLELISM": "false",
            **{k: str(v) for k, v in case.get("env", {}).items()},
        }
    )
    code, stdout, stderr = goalrm(argv, tmp_path, env, case.get("fault"))
    expected_exit = case.get("exit", 2)
    report = f"exit {code}\nstdout:\n{stdout[-2000:]}\nstderr:\n{stderr[-3000:]}"
    assert code == expected_exit, report
    assert expand(case["stderr"], places) in " ".join(stderr.split()), report
    if expected_exit != 0:
        assert "Traceback" not in stderr, report
    if "stdout" in case:
        assert stdout == case["stdout"], report
    left = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) if out.exists() else []
    assert set(left) <= set(case.get("leaves", [])), f"{out} holds {left} after the command failed"
    assert snapshot(folder) == before, f"the command changed its input folder\n{report}"
