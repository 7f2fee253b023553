"""Dense scoring of generations: reward, per-token values and per-token Q-values, batched.

The RM reads each generation through ``forward.iter_read`` (length buckets, the training input:
template, response + " " + EOS); the Q-values are ``goal_state.q_values`` of its response states.
Rows come back in the input order. Command line: ``goalrm eval-rm`` (:mod:`goalrm_core.cli.eval_rm`)
with the official ``eval_rm.py`` flags. Its ``--filter_threshold`` scores nothing differently: the
official ``eval_rm.py`` (at HEAD 46e3a96) parses it and never uses it; the threshold acts in the
official ``metrics.py`` (Q-filtered majority voting over the sampled generations), which is
``goalrm metrics --filter_threshold`` here. eval-rm records it in ``<save_dir>/eval_rm.json`` with its
other settings.
"""

from __future__ import annotations

import os
import runpy
import shutil
from contextlib import nullcontext
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from goalrm_core.data import manifest
from goalrm_core.data.adapters import benchmark_dir, generation_files
from goalrm_core.data.io import (
    ArtifactError,
    atomic_write_json,
    check_label,
    check_not_an_input,
    check_output_dir,
    read_jsonl,
    write_jsonl,
    writer_lock,
)
from goalrm_core.data.rundir import eval_settings_path, official_all_rows, rm_name, scored_path
from goalrm_core.data.schema import SCORED_GENERATION_FIELDS
from goalrm_core.flags import safe_path_part
from goalrm_core.inference.forward import (
    ReadSpec,
    iter_read,
    keep_feature_cache,
    load_for_reading,
    open_feature_cache,
)
from goalrm_core.inference.goal_state import check_goal_state_owner, load_goal_state, q_values
from goalrm_core.model.reward_model import RewardModel, load_rm_tokenizer
from goalrm_core.model.templates import apply_template
from goalrm_core.model.top_layers import FeatureCache
from goalrm_core.train.distributed import join_process_group, launcher_world


def score_generations(
    model: RewardModel,
    tokenizer,
    rows: Sequence[dict],
    template: str,
    goal: torch.Tensor | None = None,
    max_len: int = 2048,
    batch_size: int = 32,
    bucket: bool = True,
    progress: bool = True,
    desc: str = "score",
    *,
    encoding: str,
    readout: str,
    after_row: Callable[[int], None] | None = None,
    feature_cache: FeatureCache | None = None,
) -> list[dict]:
    """Copy of each row with ``reward``, ``partial_rewards``, ``num_actions`` and, given a goal, ``cosine_sim``
    (``encoding``, ``readout`` and ``feature_cache``: see ``inference.forward``). ``after_row`` is called with the
    number of rows scored so far, after each."""
    prompts = [apply_template(template, r["question"]) for r in rows]
    responses = [r["generated_solution"] for r in rows]
    spec = ReadSpec(
        encoding=encoding,
        readout=readout,
        max_len=max_len,
        batch_size=batch_size,
        bucket=bucket,
        progress=progress,
        desc=desc,
        feature_cache=feature_cache,
    )
    scored: list[dict | None] = [None] * len(rows)
    for done, (i, s) in enumerate(iter_read(model, tokenizer, prompts, responses, spec), start=1):
        out = dict(
            rows[i],
            reward=s.reward,
            partial_rewards=s.partial_rewards.tolist(),
            num_actions=s.num_actions,
            truncated=s.truncated,
        )
        if goal is not None:
            out["cosine_sim"] = q_values(s.response_hidden, goal).tolist()
        scored[i] = out
        if after_row is not None:
            after_row(done)
    return scored


def check_finite_scores(rows: Sequence[dict], source: str) -> None:
    """Scores must be real numbers: a NaN or inf reward, partial reward or Q-value is an error."""
    for i, row in enumerate(rows):
        for key in ("reward", "partial_rewards", "cosine_sim"):
            if key in row and not np.isfinite(np.asarray(row[key], dtype=np.float64)).all():
                raise ValueError(
                    f"{source}: generation {i + 1} got a NaN or inf {key}; the reward model is broken "
                    f"(non-finite or overflowing weights), so nothing was written for it"
                )


def _equivalent_command(
    completions_data_path,
    reward_model_path,
    save_dir,
    benchmarks,
    goal_state_path,
    vanilla,
    template,
    encoding,
    readout,
    max_len,
    max_samples,
    goal_rows="one",
) -> str:
    """The ``goalrm eval-rm`` command line of a call from Python (a notebook), for the manifest."""
    argv = [
        "--completions_data_path",
        completions_data_path,
        "--reward_model_path",
        reward_model_path,
        "--save_dir",
        save_dir,
        "--benchmarks",
        *benchmarks,
        *(["--vanilla"] if vanilla else ["--goal_state_path", goal_state_path]),
        "--template",
        template,
        "--encoding",
        encoding,
        "--readout",
        readout,
        "--max_len",
        max_len,
        "--max_samples",
        max_samples,
        *(["--goal_rows", goal_rows] if goal_rows != "one" else []),
    ]
    return manifest.command_line("goalrm eval-rm", argv)


SHARDS = ".shards"  # a hidden sub-folder of the RM's output folder: no reader takes it for results


def rank_note(world: int, rank: int) -> str:
    """`` (rank r)`` in the lines of one process of data-parallel scoring; nothing for one process."""
    return f" (rank {rank})" if world > 1 else ""


def _process_group(device: str) -> tuple[int, int, str]:
    """(rank, world size, device) of this process: one process, or one of the ``torchrun`` /
    ``deepspeed`` launcher's processes (they set RANK and WORLD_SIZE), each on its own GPU."""
    world = launcher_world()
    if world == 1:
        return 0, 1, device
    import torch.distributed as dist  # lazy: only data-parallel scoring needs the process group

    if not dist.is_initialized():
        join_process_group(dist.init_process_group, "nccl" if torch.cuda.is_available() else "gloo")
    if device == "auto" and torch.cuda.is_available():
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    return dist.get_rank(), dist.get_world_size(), device


def _barrier(world: int) -> None:
    if world > 1:
        import torch.distributed as dist  # lazy: see _process_group

        dist.barrier()


def _shard_path(out_dir: Path, bench: str, split: str, rank: int, world: int) -> Path:
    return out_dir / SHARDS / bench / split / f"rank{rank}-of-{world}.jsonl"


def _merge_shards(out_dir: Path, bench: str, split: str, world: int, n_rows: int) -> list[dict]:
    """Rank r scored rows r, r + world, ...: put them back in the input order."""
    shards = [read_jsonl(_shard_path(out_dir, bench, split, r, world)) for r in range(world)]
    return [shards[i % world][i // world] for i in range(n_rows)]


def eval_rm(
    completions_data_path: str | Path,
    reward_model_path: str | Path,
    save_dir: str | Path,
    benchmarks: Sequence[str],
    goal_state_path: str | Path | None = None,
    vanilla: bool = False,
    *,
    template: str,
    encoding: str,
    readout: str,
    batch_size: int = 32,
    max_len: int = 2048,
    max_samples: int = 0,
    progress: bool = True,
    filter_threshold: float | None = None,
    bf16: bool = False,
    flash_attn: bool = False,
    device: str = "auto",
    command: str | None = None,
    goal_rows: str = "one",
    feature_cache_dir: str | Path | None = None,
) -> dict[str, dict[str, int]]:
    """Score every benchmark's greedy and sampled generations into
    ``save_dir/<rm_name>/<bench>/{greedy,all}/output-metrics-dense.jsonl`` (the official layout: ``all/``
    holds the greedy rows, then the samples pass by pass; ``rm_name`` is the RM folder's name), and what ran into
    ``save_dir/<rm_name>/eval_rm.json``.
    ``filter_threshold`` is only recorded there: it is applied by ``goalrm metrics`` (see the module
    docstring). ``encoding`` and ``readout``: see ``inference.forward``; ``device`` ``auto`` is the GPU
    when there is one; ``goal_rows``: see ``inference.goal_state.GOAL_ROWS``; ``feature_cache_dir``: the folder of
    the frozen layers' states an RM trained with ``--train_top_layers`` reads and adds to
    (``inference.forward.open_feature_cache``; its scores are the full forward's to float rounding).

    Finished or absent: every input is read and checked before scoring starts; the RM's folder is
    marked in progress before its first file is written, and its manifest (``data.manifest``: the
    command, the RM and its config hash, the goal state, the settings, every file with its row count)
    is written last; a run that fails or is killed before its first file leaves the folder as it was.
    ``command`` is what the manifest names as the writer (default: the equivalent ``goalrm eval-rm``
    command line)."""
    out_dir = _check_eval_args(
        completions_data_path,
        reward_model_path,
        save_dir,
        benchmarks,
        goal_state_path,
        batch_size=batch_size,
        max_len=max_len,
        max_samples=max_samples,
    )

    # one writer at a time: a second eval-rm on this RM folder is refused while this one runs (rank 0 holds the lock)
    first = os.environ.get("RANK", "0").strip() in ("0", "")
    with (
        writer_lock(out_dir, f"--save_dir {save_dir}: its RM folder", command or "goalrm eval-rm")
        if first
        else nullcontext()
    ):
        # read: every generation file (and so its checks) before the model is even loaded
        inputs, work = read_generations(completions_data_path, benchmarks, max_samples)
        rank, world, device = _process_group(device)
        model, tokenizer, goal, goal_record = _load_reader(
            reward_model_path, goal_state_path, vanilla, goal_rows, bf16=bf16, flash_attn=flash_attn, device=device
        )
        if not vanilla:
            inputs.append(Path(goal_state_path))
        settings = {
            "vanilla": vanilla,
            "template": template,
            "encoding": encoding,
            "readout": readout,
            "bf16": bf16,
            "max_len": int(max_len),
            "max_samples": int(max_samples),
            "benchmarks": list(benchmarks),
            "filter_threshold": filter_threshold,
        }
        if goal_rows != "one":
            settings["goal_rows"] = goal_rows
        if feature_cache_dir is not None:
            settings["feature_cache_dir"] = str(feature_cache_dir)
        command = command or _equivalent_command(
            completions_data_path,
            reward_model_path,
            save_dir,
            benchmarks,
            goal_state_path,
            vanilla,
            template,
            encoding,
            readout,
            max_len,
            max_samples,
            goal_rows,
        )

        # score and write: in this process, or data-parallel (rank 0 merges and writes)
        source = f"reward model {reward_model_path}"
        cache = open_feature_cache(model, feature_cache_dir, source + rank_note(world, rank))
        spec = ReadSpec(
            encoding=encoding,
            readout=readout,
            max_len=max_len,
            batch_size=batch_size,
            progress=progress,
            feature_cache=cache,
        )
        score, truncated = _scorer(
            model,
            tokenizer,
            template,
            goal,
            spec,
            source,
            rank_note(world, rank),
        )
        written = _score_all(work, out_dir, command, score, rank, world)
        if rank == 0:  # the other ranks' new texts are computed again by the next RM
            keep_feature_cache(cache, feature_cache_dir, source)
        if written is None:  # a data-parallel rank but 0: rank 0 wrote everything
            return {bench: {} for bench in benchmarks}
        counts, outputs = written
        counts = {bench: counts.get(bench, {}) for bench in benchmarks}

        # finish: the settings, then the manifest that marks the folder complete
        _finish(
            out_dir,
            counts,
            outputs,
            truncated,
            world,
            command=command,
            inputs=inputs,
            reward_model_path=reward_model_path,
            goal_state_path=None if vanilla else str(goal_state_path),
            goal_record=goal_record,
            settings=settings,
        )
        _barrier(world)
        return counts


def _check_eval_args(
    completions_data_path, reward_model_path, save_dir, benchmarks, goal_state_path, *, batch_size, max_len, max_samples
) -> Path:
    """eval-rm's checks before anything is read: the numbers, the benchmark names and the output
    folder; returns the RM's output folder."""
    for name, value, low in (("batch_size", batch_size, 1), ("max_len", max_len, 0), ("max_samples", max_samples, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"--{name} must be an integer >= {low}, got {value!r}")
    for bench in benchmarks:
        safe_path_part(bench, "--benchmarks: benchmark")
    check_output_dir(save_dir, "--save_dir")
    out_dir = Path(save_dir) / rm_name(reward_model_path)
    check_not_an_input(
        out_dir,
        f"--save_dir {save_dir}: its RM folder",
        [
            ("--completions_data_path", completions_data_path),
            ("--reward_model_path", reward_model_path),
            ("--goal_state_path", goal_state_path),
        ],
    )
    return out_dir


def _load_reader(
    reward_model_path, goal_state_path, vanilla: bool, goal_rows: str, *, bf16: bool, flash_attn: bool, device: str
) -> tuple:
    """(model, tokenizer, goal, goal record): the RM as its reading flags ask, and unless ``vanilla``
    its goal state, checked to be this RM's (:func:`check_goal_state_owner`)."""
    model = load_for_reading(reward_model_path, bf16, flash_attn, device)
    tokenizer = load_rm_tokenizer(reward_model_path, model)
    if vanilla:
        return model, tokenizer, None, {}
    if goal_state_path is None:
        raise ValueError("--goal_state_path is required unless --vanilla is given")
    goal = load_goal_state(goal_state_path, model.config.hidden_size, goal_rows)
    return model, tokenizer, goal, check_goal_state_owner(goal_state_path, reward_model_path)


def _scorer(
    model, tokenizer, template: str, goal, spec: ReadSpec, source: str, rank_note: str
) -> tuple[Callable, dict[str, int]]:
    """(``score(rows, desc, show)``, the inputs it cut at ``max_len`` per file group): scores rows as
    ``spec`` says (a bar only when ``show``), refusing non-finite scores as ``source``'s."""
    truncated: dict[str, int] = {}  # inputs cut at max_len, per file group (this process's share when data-parallel)

    def score(rows: list[dict], desc: str, show: bool) -> list[dict]:
        scored = score_generations(
            model,
            tokenizer,
            rows,
            template,
            goal,
            spec.max_len,
            spec.batch_size,
            progress=spec.progress and show,
            desc=desc,
            encoding=spec.encoding,
            readout=spec.readout,
            feature_cache=spec.feature_cache,
        )
        check_finite_scores(scored, f"{source}, {desc}{rank_note}")
        truncated[desc] = truncated.get(desc, 0) + sum(bool(r["truncated"]) for r in scored)
        return scored

    return score, truncated


def _score_all(work: Work, out_dir: Path, command: str, score, rank: int, world: int) -> tuple[dict, dict] | None:
    """(counts, outputs) of scoring and writing every split: in this process, or data-parallel, where
    rank 0 merges and writes and the other ranks get None once it is done."""
    if world == 1:
        return _score_and_write(work, out_dir, command, score)
    _score_shards(work, out_dir, command, score, rank, world)
    if rank != 0:
        _barrier(world)  # rank 0 merges, then every process ends together
        return None
    return _merge_and_write(work, out_dir, world)


def _finish(
    out_dir: Path,
    counts: dict,
    outputs: dict,
    truncated: dict[str, int],
    world: int,
    *,
    command: str,
    inputs: list[Path],
    reward_model_path,
    goal_state_path: str | None,
    goal_record: dict,
    settings: dict,
) -> None:
    """Write ``eval_rm.json`` (the settings and what was scored), then the manifest that marks the
    folder complete."""
    atomic_write_json(
        eval_settings_path(out_dir),
        {
            "reward_model_path": str(reward_model_path),
            "goal_state_path": goal_state_path,
            **settings,
            "filter_threshold_applied_by": "goalrm metrics --filter_threshold (Q-filtered majority voting); scoring "
            "keeps every generation",
            "scored": counts,
            "truncated_at_max_len": {k: v for k, v in truncated.items() if v}
            if world == 1
            else "see each row's truncated field",
        },
    )
    outputs[eval_settings_path(out_dir).name] = None
    manifest.finish(
        out_dir,
        outputs,
        command=command,
        inputs=inputs,
        producer={
            "reward_model_path": str(reward_model_path),
            "config_hash": manifest.config_hash(reward_model_path),
            **goal_record,
            **settings,
            "processes": world,
            "truncated_at_max_len": sum(truncated.values()) if world == 1 else None,
        },
    )


Work = list[tuple[str, str, list[dict]]]  # (benchmark, split, rows) per generation file group


def read_generations(
    completions_data_path: str | Path, benchmarks: Sequence[str], max_samples: int = 0
) -> tuple[list[Path], Work]:
    """(every file read, ``(bench, split, rows)`` per split) of the benchmarks' generation folders,
    each row checked; at most ``max_samples`` rows per split (0 = all)."""
    root = Path(completions_data_path)
    dirs = {bench: benchmark_dir(root, bench) for bench in benchmarks}  # every folder found before any is read
    inputs: list[Path] = []
    work: Work = []
    for bench, bench_path in dirs.items():
        found = _readable_generation_files(bench, bench_path)
        n_rows = 0
        for split, files in found.items():
            rows = [r for f in files for r in read_jsonl(f, required=SCORED_GENERATION_FIELDS, check=check_label)]
            inputs += files
            n_rows += len(rows)
            work.append((bench, split, rows[:max_samples] if max_samples else rows))
        if n_rows == 0:  # it would be scored as nothing and reported as nothing
            names = ", ".join(str(f) for fs in found.values() for f in fs)
            raise ArtifactError(
                f"--benchmarks {bench}: its generation file(s) {names} hold no rows; nothing of it could be scored"
            )
    return inputs, work


GENERATION_FILE_NAMES = "greedy.jsonl and/or samples.jsonl (or the official output-greedy.jsonl, output-rs*.jsonl)"


def _readable_generation_files(bench: str, bench_path: Path) -> dict[str, list[Path]]:
    """The benchmark's generation files by split; an :class:`ArtifactError` naming the benchmark and its
    folder when that folder cannot be listed or holds none of them (a benchmark asked for is never
    silently scored as nothing)."""
    if not os.access(bench_path, os.R_OK | os.X_OK):
        raise ArtifactError(
            f"--benchmarks {bench}: its folder {bench_path} cannot be read (permission denied); "
            f"nothing of it could be scored"
        )
    try:
        present = sorted(p.name for p in bench_path.iterdir())
    except OSError as e:
        raise ArtifactError(
            f"--benchmarks {bench}: its folder {bench_path} cannot be read ({e.strerror or e}); "
            f"nothing of it could be scored"
        ) from None
    found = generation_files(bench_path)
    if not any(found.values()):
        raise ArtifactError(
            f"--benchmarks {bench}: {bench_path} holds no generation file ({GENERATION_FILE_NAMES}); "
            f"it holds {', '.join(present[:8]) + (' …' if len(present) > 8 else '') if present else 'nothing'}"
        )
    for files in found.values():
        for f in files:
            if not f.is_file() or not os.access(f, os.R_OK):
                raise ArtifactError(
                    f"--benchmarks {bench}: {f} cannot be read "
                    f"({'not a file' if not f.is_file() else 'permission denied'}); "
                    f"nothing of it could be scored"
                )
    return found


def _score_and_write(work: Work, out_dir: Path, command: str, score) -> tuple[dict, dict]:
    """One process: score each split and write it at once. The folder is marked unfinished just
    before its first file is written (a run stopped before that leaves it as it was)."""
    counts: dict[str, dict[str, int]] = {}
    outputs: dict[str, int | None] = {}
    greedy: dict[str, list[dict]] = {}
    for bench, split, rows in work:
        if not rows:
            continue
        scored = score(rows, f"{bench}/{split}", True)
        if not outputs:
            manifest.begin(out_dir, command)
        _write_split(out_dir, bench, split, scored, greedy, counts, outputs)
    if not outputs:
        manifest.begin(out_dir, command)
    return counts, outputs


def _score_shards(work: Work, out_dir: Path, command: str, score, rank: int, world: int) -> None:
    """Data-parallel: rank r scores rows r, r + world, ... of every split into a shard under
    ``.shards/``; a shard already written (by an interrupted run of the same world size) is kept."""
    if rank == 0:
        manifest.begin(out_dir, command)
    _barrier(world)
    for bench, split, rows in work:
        shard = _shard_path(out_dir, bench, split, rank, world)
        if rows and not shard.exists():
            write_jsonl(shard, score(rows[rank::world], f"{bench}/{split}", rank == 0))
    _barrier(world)


def _merge_and_write(work: Work, out_dir: Path, world: int) -> tuple[dict, dict]:
    """Rank 0, after every shard is written: each split's shards in input order, then no shards."""
    counts: dict[str, dict[str, int]] = {}
    outputs: dict[str, int | None] = {}
    greedy: dict[str, list[dict]] = {}
    for bench, split, rows in work:
        if rows:
            _write_split(
                out_dir, bench, split, _merge_shards(out_dir, bench, split, world, len(rows)), greedy, counts, outputs
            )
    shutil.rmtree(out_dir / SHARDS)
    return counts, outputs


def _write_split(
    out_dir: Path,
    bench: str,
    split: str,
    scored: list[dict],
    greedy: dict[str, list[dict]],
    counts: dict,
    outputs: dict,
) -> None:
    """Write one scored split: ``greedy/`` as scored, ``all/`` in the official layout (the greedy rows, then the
    samples pass by pass: :func:`~goalrm_core.data.rundir.official_all_rows`). ``counts`` gets the rows
    scored, ``outputs`` (the manifest's) the rows written."""
    path = scored_path(out_dir, bench, split)
    if split == "greedy":
        greedy[bench] = scored
    written = official_all_rows(greedy.get(bench, []), scored) if split == "all" else scored
    outputs[path.relative_to(out_dir).as_posix()] = write_jsonl(path, written)
    counts.setdefault(bench, {})[split] = len(scored)


if (
    __name__ == "__main__"
):  # data-parallel: `torchrun --nproc_per_node N -m goalrm_core.inference.scoring <eval-rm flags>`
    runpy.run_module("goalrm_core.cli.eval_rm", run_name="__main__", alter_sys=True)
