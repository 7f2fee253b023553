"""Adapters (every known format, detection, bad input), Nemo-Skills folders, the paper/gpu-check/
real-cpu profiles and their command lines. Fast: tiny fixtures written here; nothing runs at 7B."""

import gzip
import json
import re
import shlex
from pathlib import Path

import pytest

from goalrm_core.data import adapters
from goalrm_core.data.adapters import (
    AdapterError,
    adapt_row,
    convert_generation_folder,
    detect_format,
    list_generation_folder,
    load_adapted,
    load_generations,
    load_helpsteer,
    load_pairs,
    load_questions,
    read_generation_folder,
)
from goalrm_core.data.io import ArtifactError, read_jsonl
from goalrm_core.data.preferences import PreferenceDataError
from goalrm_core.data.questions import preference_pairs, split_by_question
from goalrm_core.data.schema import GENERATION_FIELDS
from goalrm_core.pipeline.profile_files import load_profile

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
needs_shared = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data is absent")


def write_jsonl(path, rows, gz=False):
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def gen(q, sol, pred, exp, ok, **extra):
    return {
        "question": q,
        "generated_solution": sol,
        "predicted_answer": pred,
        "expected_answer": exp,
        "is_correct": ok,
        **extra,
    }


HELPSTEER = {
    "prompt": "p",
    "response": "r",
    "helpfulness": 3,
    "correctness": 4,
    "coherence": 4,
    "complexity": 1,
    "verbosity": 2,
}
SOLUTIONS = {
    "question": "2+2?",
    "ground_truth": "2+2=<<2+2=4>>4\nA: 4",
    "small_model": {"is_correct": False, "solution": "2+2=5\nA: 5"},
    "big_model": {"is_correct": True, "solution": "2+2=4\nA: 4"},
}


# ------------------------------------------------------------------------------------ each format


def test_openmath_pairs_and_prompt_pairs(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [{"question": "q", "correct": "c", "incorrect": "i", "extra": 1}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"prompt": "q", "chosen": "c", "rejected": "i"}])
    assert load_pairs(a).rows == [{"question": "q", "correct": "c", "incorrect": "i"}]
    data = load_pairs(b)
    assert data.format == "prompt_pairs" and data.rows == [{"question": "q", "correct": "c", "incorrect": "i"}]


def test_hh_dialogues_split_and_unsplittable_ones_are_counted(tmp_path, caplog):
    shared = "\n\nHuman: hi\n\nAssistant: hello\n\nHuman: help?"
    rows = [
        {"chosen": shared + "\n\nAssistant: sure", "rejected": shared + "\n\nAssistant: no"},
        {"chosen": "\n\nHuman: no assistant turn", "rejected": "\n\nHuman: none"},
        {"chosen": "\n\nHuman: a\n\nAssistant: x", "rejected": "\n\nHuman: b\n\nAssistant: y"},
    ]
    path = write_jsonl(tmp_path / "hh.jsonl.gz", rows, gz=True)
    with caplog.at_level("WARNING"):
        data = load_pairs(path)
    assert data.format == "hh_rlhf"
    assert data.rows == [{"question": shared + "\n\nAssistant:", "correct": " sure", "incorrect": " no"}]
    report = data.report
    assert (report.n_read, report.n_used, report.n_skipped) == (3, 1, 2)
    assert report.n_skipped_no_assistant_turn == 1 and report.n_skipped_no_shared_prefix == 1
    assert report.skipped_rows == [f"{path}:2", f"{path}:3"]
    assert "2 skipped" in caplog.text  # reported, never silent


def test_hh_source_where_every_row_is_skipped_raises(tmp_path):
    path = write_jsonl(tmp_path / "hh.jsonl", [{"chosen": "no turn", "rejected": "none"}])
    with pytest.raises(AdapterError, match="every row .* was skipped"):
        load_pairs(path)


def test_nemo_skills_generations_keep_extra_fields(tmp_path):
    path = write_jsonl(tmp_path / "output-greedy.jsonl", [gen("q", "s", 3, 3, True, error_message="")])
    data = load_generations(path)
    assert data.format == "nemo_skills"
    assert list(data.rows[0])[:5] == list(GENERATION_FIELDS) and data.rows[0]["error_message"] == ""


def test_gsm8k_questions_parse_the_final_answer(tmp_path):
    path = write_jsonl(
        tmp_path / "gsm8k.jsonl",
        [
            {"question": "q1", "answer": "80,000+50,000=<<80000+50000=130000>>130,000\n#### 70,000"},
            {"question": "q2", "answer": "so\n#### -3"},
        ],
    )
    rows = load_questions(path).rows
    assert [r["expected_answer"] for r in rows] == [70000, -3]
    assert rows[0]["reference_solution"].endswith("#### 70,000")


def test_gsm8k_model_solutions_become_one_generation_per_solution(tmp_path):
    path = write_jsonl(tmp_path / "solutions.jsonl", [SOLUTIONS])
    data = load_generations(path)
    assert data.format == "gsm8k_solutions" and data.report.n_read == 1 and len(data) == 2
    first, second = data.rows
    assert first == {
        "question": "2+2?",
        "generated_solution": "2+2=5\nA: 5",
        "predicted_answer": 5,
        "expected_answer": 4,
        "is_correct": False,
        "model": "small_model",
        "sample_index": 0,
    }
    assert second["is_correct"] is True and second["predicted_answer"] == second["expected_answer"] == 4


def test_helpsteer_rows_are_validated(tmp_path):
    path = write_jsonl(tmp_path / "helpsteer.jsonl", [HELPSTEER, {**HELPSTEER, "verbosity": 2.0}])
    rows = load_helpsteer(path).rows
    assert rows[0] == HELPSTEER and rows[1]["verbosity"] == 2
    bad = write_jsonl(tmp_path / "bad.jsonl", [HELPSTEER, {**HELPSTEER, "coherence": 7}])
    with pytest.raises(AdapterError, match=r"bad\.jsonl:2: field 'coherence' must be an integer 0-4"):
        load_helpsteer(bad)


def test_parquet_and_json_array_sources(tmp_path):
    import pandas as pd

    pd.DataFrame([HELPSTEER]).to_parquet(tmp_path / "h.parquet")
    assert load_adapted(tmp_path / "h.parquet").format == "helpsteer"
    (tmp_path / "g.json").write_text(json.dumps([{"question": "q", "answer": "#### 1"}]))
    assert load_adapted(tmp_path / "g.json").rows[0]["expected_answer"] == 1


# ------------------------------------------------------------------------------------ bad input


def test_unknown_format_lists_every_known_format(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"text": "hello"}])
    with pytest.raises(AdapterError) as err:
        load_adapted(path)
    message = str(err.value)
    assert f"{path}:1" in message and "unknown format" in message
    for name in adapters.FORMATS:
        assert name in message


def test_row_missing_fields_names_file_row_and_expected_fields(tmp_path):
    path = write_jsonl(
        tmp_path / "pairs.jsonl",
        [{"question": "q", "correct": "c", "incorrect": "i"}, {"question": "q", "correct": "c"}],
    )
    with pytest.raises(AdapterError) as err:
        load_pairs(path)
    message = str(err.value)
    assert f"{path}:2" in message and "missing field(s) ['incorrect']" in message
    assert "question, correct, incorrect" in message and "generated_solution" in message  # every format's fields


def test_generation_row_missing_a_field_hints_the_closest_format():
    row = {"question": "q", "generated_solution": "s", "expected_answer": 1, "is_correct": True}
    with pytest.raises(AdapterError, match=r"closest: nemo_skills, missing \['predicted_answer'\]"):
        detect_format(row, "f.jsonl:7")


def test_ambiguous_rows_ask_for_an_explicit_format():
    row = {**gen("q", "s", 1, 1, True), "answer": "#### 1"}
    with pytest.raises(AdapterError, match="ambiguous format.*gsm8k"):
        detect_format(row)
    assert adapt_row(row, fmt="nemo_skills")[0]["is_correct"] is True


def test_explicit_format_and_kind_checks(tmp_path):
    assert detect_format({"prompt": "p", "chosen": "a", "rejected": "b"}) == "prompt_pairs"
    hh = adapt_row(
        {"prompt": "ignored", "chosen": "\n\nHuman: a\n\nAssistant: x", "rejected": "\n\nHuman: a\n\nAssistant: y"},
        fmt="hh_rlhf",
    )
    assert hh == [{"question": "\n\nHuman: a\n\nAssistant:", "correct": " x", "incorrect": " y"}]
    with pytest.raises(AdapterError, match="unknown format 'nope'"):
        adapt_row({}, fmt="nope")
    questions = write_jsonl(tmp_path / "q.jsonl", [{"question": "q", "answer": "#### 1"}])
    with pytest.raises(AdapterError, match="holds questions .* but pairs were asked for"):
        load_pairs(questions)
    with pytest.raises(AdapterError, match="format 'gsm8k' gives questions, not pairs"):
        load_pairs(questions, fmt="gsm8k")
    with pytest.raises(AdapterError, match="has no '#### N'"):
        adapt_row({"question": "q", "answer": "42"})
    with pytest.raises(AdapterError, match="is_correct.*true/false"):
        adapt_row(gen("q", "s", 1, 1, "yes"))
    with pytest.raises(AdapterError, match="no model solution"):
        adapt_row({"question": "q", "ground_truth": "A: 1"})
    assert isinstance(AdapterError("x"), PreferenceDataError)


def test_missing_file_and_offline_hub_name_fail_clearly(tmp_path, monkeypatch):
    with pytest.raises(PreferenceDataError, match="not found"):
        load_pairs(tmp_path / "missing.jsonl")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(PreferenceDataError, match="Hub is unreachable"):
        load_pairs("nvidia/OpenMathInstruct-1")


# ------------------------------------------------------------------------------------ pairs, splits


def test_generation_pairs_and_question_split():
    rows = [gen(q, f"{q}{i}", i, 0, i == 0) for q in ("a", "b", "c") for i in range(3)]
    rows.append(gen("d", "d0", 0, 0, True))  # no incorrect solution: no pair
    pairs = preference_pairs(rows, pairs_per_question=0)
    assert len(pairs) == 6 and all(p["correct"].endswith("0") and not p["incorrect"].endswith("0") for p in pairs)
    assert len(preference_pairs(rows, pairs_per_question=1)) == 3
    train, held = split_by_question(rows, 0.5, seed=1)
    assert {r["question"] for r in train}.isdisjoint({r["question"] for r in held}) and len(train) + len(held) == len(
        rows
    )


# ------------------------------------------------------------------------------------ generation folders


def nemo_folder(root: Path, bench: str = "gsm8k", n_samples: int = 2) -> Path:
    d = root / bench
    d.mkdir(parents=True)
    questions = [("q1", 1), ("q2", 2)]
    write_jsonl(d / "output-greedy.jsonl", [gen(q, f"greedy {q}", a, a, True) for q, a in questions])
    for k in range(n_samples):
        write_jsonl(d / f"output-rs{k}.jsonl", [gen(q, f"rs{k} {q}", a + k, a, k == 0) for q, a in questions])
    return d


def test_nemo_skills_folder_listed_validated_and_converted(tmp_path):
    src = tmp_path / "nemo"
    nemo_folder(src, "gsm8k", n_samples=11)  # rs10 sorts after rs2 (numeric, not lexicographic)
    nemo_folder(src, "svamp", n_samples=1)
    listed = list_generation_folder(src, check="all")
    assert list(listed) == ["gsm8k", "svamp"]  # the official code's benchmark order
    assert listed["gsm8k"].layout == "nemo-skills" and listed["gsm8k"].n_greedy == 2 and listed["gsm8k"].n_samples == 22
    assert [p.name for p in listed["gsm8k"].samples][-2:] == ["output-rs9.jsonl", "output-rs10.jsonl"]

    out = tmp_path / "ours"
    summary = convert_generation_folder(src, out)
    assert summary["gsm8k"] == {"layout": "nemo-skills", "greedy": 2, "samples": 22, "converted": True}
    samples = read_jsonl(out / "gsm8k" / "samples.jsonl", required=GENERATION_FIELDS)
    assert [r["question"] for r in samples] == ["q1"] * 11 + ["q2"] * 11  # question by question
    assert [r["sample_index"] for r in samples[:11]] == list(range(11))
    assert list_generation_folder(out)["gsm8k"].layout == "goalrm"
    assert convert_generation_folder(out, out)["gsm8k"]["converted"] is False  # already our layout
    assert len(read_generation_folder(src, "svamp", "samples")) == 2


def test_generation_folder_errors_name_what_is_wrong(tmp_path):
    src = tmp_path / "nemo"
    nemo_folder(src)
    with pytest.raises(ArtifactError, match="benchmark folder .*math is missing; benchmarks in .*: gsm8k"):
        list_generation_folder(src, ["math"])
    (src / "asdiv").mkdir()
    write_jsonl(src / "asdiv" / "output-rs0.jsonl", [gen("q", "s", 1, 1, True)])
    with pytest.raises(ArtifactError, match="no greedy generations"):
        list_generation_folder(src, ["asdiv"])
    write_jsonl(src / "gsm8k" / "output-rs1.jsonl", [gen("q", "s", 1, 1, True), {"question": "q"}])
    with pytest.raises(AdapterError, match=r"output-rs1\.jsonl:2: missing field"):
        list_generation_folder(src, ["gsm8k"], check="all")
    with pytest.raises(ArtifactError, match="generations folder not found"):
        list_generation_folder(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ArtifactError, match="no benchmark folders"):
        list_generation_folder(tmp_path / "empty")


# ------------------------------------------------------------------------------------ real shared data (optional)


@needs_shared
def test_real_shared_files_have_the_expected_shapes():
    gsm = load_questions(SHARED_DATA / "gsm8k_test.jsonl", limit=50)
    assert gsm.format == "gsm8k" and all(isinstance(r["expected_answer"], int) for r in gsm.rows)
    sols = load_generations(SHARED_DATA / "gsm8k_example_model_solutions.jsonl", limit=50)
    assert sols.format == "gsm8k_solutions" and len(sols) == 200
    assert {r["model"] for r in sols.rows} == {
        "6b_finetuning",
        "6b_verification",
        "175b_finetuning",
        "175b_verification",
    }
    # the file's own is_correct agrees with comparing the parsed answers
    assert all((r["predicted_answer"] == r["expected_answer"]) == r["is_correct"] for r in sols.rows)
    assert [r["expected_answer"] for r in sols.rows[::4]] == [r["expected_answer"] for r in gsm.rows]
    hh = load_pairs(SHARED_DATA / "hh_rlhf_harmless_base_test.jsonl.gz")
    assert hh.format == "hh_rlhf" and hh.report.n_read == 2312 and hh.report.n_skipped + len(hh) == 2312
    assert all(r["question"].endswith("\n\nAssistant:") for r in hh.rows[:50])


# ------------------------------------------------------------------------------------ profiles and command lines


def test_paper_profiles_load_and_build_their_command_lines():
    from goalrm_core.recipes.paper import paper_commands, paper_script, paper_train_command

    math_profile, hh_profile = load_profile("paper-math"), load_profile("paper-hh")
    assert math_profile["learning_rate"] == pytest.approx(9e-6) and hh_profile["learning_rate"] == pytest.approx(1e-5)
    cmd = paper_train_command("paper-math", "goal-conditioned", num_gpus=8)
    assert Path(cmd[0]).name == "deepspeed" and cmd[cmd.index("--num_gpus") + 1] == "8"
    assert cmd[cmd.index("--pretrain") + 1] == "nvidia/OpenMath-CodeLlama-7b-Python-hf"
    expected = {
        "--zero_stage": "3",
        "--train_batch_size": "64",
        "--micro_train_batch_size": "1",
        "--max_len": "2048",
        "--learning_rate": "9e-06",
        "--contrastive_loss_beta": "0.5",
        "--unsim_samples": "16",
        "--sim_samples": "16",
        "--value_head_strategy": "linear",
        "--source_state_percentile": "0.0",
        "--goal_state_percentile": "0.0",
        "--reward_model_strategy": "contrastive",
        "--save_path": "./ckpt/contrastive_reward_model",
    }
    assert {flag: cmd[cmd.index(flag) + 1] for flag in expected} == expected
    assert {"--bf16", "--flash_attn", "--gradient_checkpointing"} <= set(cmd)

    hh = paper_train_command("paper-hh", "baseline", hostfile="hosts", num_nodes=2)
    assert hh[hh.index("--hostfile") + 1] == "hosts" and hh[hh.index("--num_nodes") + 1] == "2"
    for flag, value in (
        ("--pretrain", "meta-llama/Meta-Llama-3-8B-Instruct"),
        ("--dataset", "Anthropic/hh-rlhf"),
        ("--max_len", "4096"),
        ("--eval_steps", "1000"),
        ("--learning_rate", "1e-05"),
        ("--seed", "0"),
    ):
        assert hh[hh.index(flag) + 1] == value

    steps = paper_commands("paper-math")
    assert list(steps)[:3] == ["train-vanilla", "train-contrastive", "get-representation"]
    eval_cmd = steps["eval-rm-contrastive"]
    assert eval_cmd[eval_cmd.index("--benchmarks") + 1 : eval_cmd.index("--goal_state_path")] == list(
        adapters.NEMO_SKILLS_BENCHMARKS
    )
    assert "--vanilla" in steps["eval-rm-vanilla"] and list(paper_commands("paper-hh")) == [
        "train-vanilla",
        "train-contrastive",
    ]
    assert paper_script("paper-math").count("\ndeepspeed --num_gpus 8 --module goalrm_core.train.trainer") == 2
    # scoring is data-parallel over the node's GPUs by default (one shard per process), one process when asked
    assert paper_script("paper-math").count("\ntorchrun --nproc_per_node 8 -m goalrm_core.cli eval-rm ") == 2
    assert Path(paper_commands("paper-math", num_gpus=1)["eval-rm-vanilla"][0]).name.startswith("python")

    # every train-rm flag a profile produces is one the trainer accepts (the command parses)
    from goalrm_core.cli.train_rm import parse_args

    cfg = parse_args(cmd[cmd.index("goalrm_core.train.trainer") + 1 :])
    assert cfg.contrastive and cfg.zero_stage == 3 and cfg.bf16 and cfg.flash_attn
    assert not cfg.group_by_length and "--no-group_by_length" in hh  # the official data order in both paper profiles

    # scoring and the goal state in the checkpoint's bf16 with flash-attn, and the official figures, as the official
    # scripts
    from goalrm_core.cli.eval_rm import build_parser as eval_rm_parser
    from goalrm_core.cli.metrics import build_parser as metrics_parser

    scoring = eval_rm_parser().parse_args(
        steps["eval-rm-contrastive"][steps["eval-rm-contrastive"].index("eval-rm") + 1 :]
    )
    assert (
        scoring.bf16
        and scoring.flash_attn
        and scoring.max_len == 0
        and {"--bf16", "--flash_attn"} <= set(steps["get-representation"])
    )
    assert metrics_parser().parse_args(steps["metrics-contrastive-official"][4:]).official


def test_gpu_check_profile_is_about_1b_and_its_command_uses_zero3_bf16_flash(tmp_path):
    from goalrm_core.recipes.paper import gpu_check_command, llama_parameter_count

    profile = load_profile("gpu-check")
    n = llama_parameter_count(
        profile["backbone_hidden_size"],
        profile["backbone_layers"],
        profile["backbone_vocab_size"],
        profile["backbone_intermediate_size"],
        profile["backbone_heads"],
    )
    assert 0.8e9 < n < 1.3e9
    cmd = gpu_check_command(run_dir=str(tmp_path / "gc"))
    assert Path(cmd[0]).name == "deepspeed" and cmd[cmd.index("--zero_stage") + 1] == "3"
    assert {"--bf16", "--flash_attn", "--gradient_checkpointing"} <= set(cmd)
    assert cmd[cmd.index("--pretrain") + 1] == str(tmp_path / "gc" / "data" / "backbone")


def test_gpu_check_dry_run_lists_each_strategy_then_the_4bit_lora_step(tmp_path):
    from goalrm_core.recipes.paper import FOUR_BIT_STEP, run_gpu_check

    steps = run_gpu_check(dry_run=True, run_dir=str(tmp_path / "gc"))
    assert list(steps) == [*load_profile("gpu-check")["strategies"], FOUR_BIT_STEP]  # nothing ran, nothing written
    assert not (tmp_path / "gc").exists()
    four_bit = shlex.split(steps[FOUR_BIT_STEP])
    assert {"--load_in_4bit", "--bf16"} <= set(four_bit) and four_bit[four_bit.index("--lora_rank") + 1] == "16"
    assert (
        four_bit[four_bit.index("--zero_stage") + 1] == "2"
        and four_bit[four_bit.index("--reward_model_strategy") + 1] == "vanilla"
    )
    assert four_bit[four_bit.index("--save_path") + 1] == str(tmp_path / "gc" / "models" / FOUR_BIT_STEP)
    for strategy in load_profile("gpu-check")["strategies"]:  # the others stay as they were: ZeRO-3, no LoRA
        cmd = shlex.split(steps[strategy])
        assert "--load_in_4bit" not in cmd and "--lora_rank" not in cmd and cmd[cmd.index("--zero_stage") + 1] == "3"


def test_random_llama_and_gpu_check_data_are_written_locally(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from goalrm_core.recipes.paper import llama_parameter_count, prepare_gpu_check

    small = dict(
        backbone_hidden_size=32,
        backbone_layers=2,
        backbone_heads=4,
        backbone_intermediate_size=64,
        backbone_vocab_size=128,
        n_pairs=16,
        bf16=False,
        run_dir=str(tmp_path / "gc"),
    )
    paths = prepare_gpu_check(**small)
    model = AutoModelForCausalLM.from_pretrained(paths["backbone"])
    tokenizer = AutoTokenizer.from_pretrained(paths["backbone"])
    assert model.config.vocab_size == 128 >= len(tokenizer)
    assert (model.config.pad_token_id, model.config.eos_token_id) == (tokenizer.pad_token_id, tokenizer.eos_token_id)
    assert sum(p.numel() for p in model.parameters()) == llama_parameter_count(32, 2, 128, 64, 4)
    ids = tokenizer("1+2=3", return_tensors="pt")["input_ids"]
    assert torch.isfinite(model(ids).logits).all()
    pairs = read_jsonl(paths["train"], required=("question", "correct", "incorrect")) + read_jsonl(paths["eval"])
    assert len(pairs) == 16 and all(p["correct"] != p["incorrect"] for p in pairs)
    with pytest.raises(ValueError, match="smaller than the tokenizer"):
        prepare_gpu_check(**{**small, "backbone_vocab_size": 10})


@pytest.mark.parametrize(
    "change, message",
    [
        ({"ckpt_dirr": "x"}, "key 'ckpt_dirr' is not read by the command-line profiles; did you mean ckpt_dir?"),
        ({"backbone_layers": 0}, "backbone_layers must be an integer >= 1, got 0"),
        ({"max_steps": -1}, "max_steps must be an integer >= 0 (0 = the epochs), got -1"),
        ({"rm_steps": 10}, "key 'rm_steps' is now rm.max_steps"),
        ({"bf16": "yes"}, "key 'bf16' must be true or false, got 'yes'"),
        ({"benchmarks": "gsm8k"}, "key 'benchmarks' must be a list of names, got 'gsm8k'"),
        (
            {"train_batch_size": 63},
            "rm.train_batch_size (63) must be a multiple of rm.micro_train_batch_size x rm_processes (1 x 8)",
        ),
    ],
)
def test_a_command_line_profile_is_checked_whole_before_a_command_is_built(change, message):
    """Every key of a command-line profile is a trainer setting, a notebook key that means the same, or
    one of COMMAND_LINE_KEYS; a typo or a bad value stops the command in one line, naming where it came from."""
    from goalrm_core.pipeline.profile_files import COMMAND_LINE_PROFILES
    from goalrm_core.recipes.paper import paper_script
    from goalrm_core.recipes.profile_keys import check_command_line_profile, command_line_profile

    for name in COMMAND_LINE_PROFILES:
        assert command_line_profile(name) == load_profile(name)
    with pytest.raises(ValueError) as caught:
        command_line_profile("paper-math", **change)
    assert str(caught.value) == f"the call's changes: {message}"
    with pytest.raises(ValueError, match="^params/paper-math.yaml: " + re.escape(message)):
        check_command_line_profile({**load_profile("paper-math"), **change}, "params/paper-math.yaml")
    assert paper_script("paper-math").count("deepspeed") >= 2  # the profile as committed builds its script


def test_real_cpu_profile_and_commands(tmp_path):
    from goalrm_core.cli.train_rm import parse_args
    from goalrm_core.recipes.paper import command_text, real_cpu_commands

    profile = load_profile("real-cpu")
    assert profile["n_hh_pairs"] > 0 and profile["zero_stage"] == 0
    cmds = real_cpu_commands(run_dir=str(tmp_path / "rc"))
    assert list(cmds) == [
        "train-hh-baseline",
        "train-hh-goal",
        "train-gsm8k-baseline",
        "train-gsm8k-goal",
        "get-representation",
        "eval-rm-gsm8k-baseline",
        "metrics-gsm8k-baseline",
        "eval-rm-gsm8k-goal",
        "metrics-gsm8k-goal",
    ]
    train = cmds["train-hh-goal"]
    cfg = parse_args(train[train.index("goalrm_core.train.trainer") + 1 :])
    assert cfg.contrastive and cfg.template == "hh" and cfg.max_steps == profile["max_steps"]
    assert command_text(cmds["eval-rm-gsm8k-goal"]).startswith("goalrm eval-rm --completions_data_path")
    assert command_text(train).startswith("goalrm train-rm ")


@needs_shared
def test_real_cpu_prepare_writes_the_project_layout(tmp_path):
    from goalrm_core.recipes.paper import real_cpu_paths, real_cpu_prepare

    run = tmp_path / "rc"
    manifest = real_cpu_prepare(run_dir=str(run), n_hh_pairs=20, backbone_hidden_size=16, backbone_layers=1)
    p = real_cpu_paths(run)
    assert manifest["scale"] == "CPU-scale" and manifest["hh"]["train"] + manifest["hh"]["eval"] == 20
    assert manifest["hh"]["skipped"] == 9 and manifest["hh"]["read"] == 2312
    held = list_generation_folder(p["generations"], ["gsm8k"], check="all")["gsm8k"]
    assert (
        held.layout == "goalrm"
        and held.n_greedy == manifest["gsm8k"]["held_out_solutions"] == 4 * manifest["gsm8k"]["held_out_questions"]
    )
    train_questions = {r["question"] for r in read_jsonl(p["gsm8k_train"]) + read_jsonl(p["gsm8k_eval"])}
    assert train_questions.isdisjoint(
        {r["question"] for r in read_jsonl(held.greedy)}
    )  # no question leaks into the scored set
    assert read_jsonl(p["benchmark"], required=("question", "expected_answer"))


def test_real_cpu_prepare_without_the_data_names_the_missing_file(tmp_path):
    from goalrm_core.recipes.paper import real_cpu_prepare

    with pytest.raises(ArtifactError, match="hh_rlhf_harmless_base_test.jsonl.gz: not found"):
        real_cpu_prepare(run_dir=str(tmp_path / "rc"), data_dir=str(tmp_path))


@needs_shared
def test_real_cpu_prepare_refuses_a_max_len_that_eval_rm_would_reject(tmp_path):
    from goalrm_core.recipes.paper import real_cpu_prepare

    with pytest.raises(ValueError, match="raise gsm8k_max_len"):
        real_cpu_prepare(
            run_dir=str(tmp_path / "rc"), n_hh_pairs=10, gsm8k_max_len=300, backbone_hidden_size=16, backbone_layers=1
        )


def test_the_recipes_files_lie_in_the_run_directory_layout(tmp_path):
    """real-cpu and the GPU check place their files through `RunDir`, where they have always lain."""
    from goalrm_core.recipes.paper import gpu_check_paths, real_cpu_paths

    run = tmp_path / "rc"
    rel = {k: v.relative_to(run).as_posix() for k, v in real_cpu_paths(run).items() if k != "run"}
    assert rel == {
        "backbone": "data/backbone",
        "manifest": "data/manifest.json",
        "hh_train": "data/preference/hh/train.jsonl",
        "hh_eval": "data/preference/hh/eval.jsonl",
        "gsm8k_train": "data/preference/gsm8k/train.jsonl",
        "gsm8k_eval": "data/preference/gsm8k/eval.jsonl",
        "generations": "data/generations",
        "benchmark": "data/benchmarks/gsm8k/test.jsonl",
        "models": "models",
        "representations": "representations",
        "eval": "eval",
        "logs": "logs",
        "summary": "real_cpu_summary.json",
    }
    assert {k: v.relative_to(run).as_posix() for k, v in gpu_check_paths(run).items()} == {
        "backbone": "data/backbone",
        "train": "data/preference/train.jsonl",
        "eval": "data/preference/eval.jsonl",
        "models": "models",
        "logs": "logs",
    }


def test_pair_shapes_and_pair_formats_are_one_set_of_names():
    """A pair row is counted once, under the name of its format, whether the adapters or the
    trainer's reader normalise it."""
    from goalrm_core.data.preferences import SourceReport, normalise_row

    rows = {
        "openmath_pairs": {"question": "q", "correct": "a", "incorrect": "b"},
        "prompt_pairs": {"prompt": "q", "chosen": "a", "rejected": "b"},
        "hh_rlhf": {"chosen": "\n\nHuman: q\n\nAssistant: a", "rejected": "\n\nHuman: q\n\nAssistant: b"},
    }
    assert set(rows) == set(adapters.formats_of_kind("pairs"))
    for fmt, row in rows.items():
        adapted, read = SourceReport(source="a"), SourceReport(source="b")
        adapters.adapt_row(row, report=adapted)
        normalise_row(row, "row", read)
        assert adapted.shapes == read.shapes == {fmt: 1}
