"""Reward-model training through a DeepSpeed engine (ZeRO 0-3), on GPUs or on CPU over gloo.

The command line is :mod:`goalrm_core.cli.train_rm` (parse → :func:`preflight` →
``Trainer(cfg).fit()``); the official code's command lines run it::

    python -m goalrm_core.train.trainer --pretrain PATH --dataset pairs.jsonl ...        # one process
    deepspeed --num_gpus 2 --module goalrm_core.train.trainer --pretrain PATH ...         # N processes
    goalrm train-rm --pretrain PATH ...

The pieces live beside the trainer: the flags in
:mod:`~goalrm_core.train.config`, process group / DeepSpeed engine / RNG state in
:mod:`~goalrm_core.train.distributed`, optimiser groups and schedule in :mod:`~goalrm_core.train.optim`,
data loading and order in :mod:`~goalrm_core.train.batching`, metric sinks in :mod:`~goalrm_core.train.sinks`.

Every run goes through ``deepspeed.initialize``; a plain ``python -m`` run sets up a one-process
group itself (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT with a free port). On CPU DeepSpeed uses its
CPU accelerator and gloo, and bf16 and ZeRO 0-3 all work. The optimiser is torch's AdamW, so no
optimiser op (CPU Adam) is compiled; DeepSpeed does compile its small CPU shared-memory comm op on
the first run in a Python environment (30-60 s, cached in ~/.cache/torch_extensions/env-<hash of sys.prefix>, see
distributed.own_extensions_dir).

What a run writes:

* ``--save_path``: the RM in the HF layout (``save_reward_model``, atomic) + ``train_summary.json``; with
  ``--lora_rank`` the adapters merged into the backbone (:mod:`goalrm_core.train.lora`), an ordinary checkpoint;
* ``--metrics_path`` (default ``<save_path>.metrics.jsonl``): train rows every ``--logging_steps``,
  eval rows every ``--eval_steps`` and at the end;
* ``--ckpt_path`` (default ``<save_path>.checkpoints``, beside the RM, never inside it): DeepSpeed
  checkpoints every ``--save_steps``, with the data position and every rank's RNG states.

Resuming (``--load_checkpoint``) continues the same schedule: the data order of an epoch is a
function of (seed, epoch), the learning rate of (step, total steps), and the contrastive sampler's
generator state is restored, so stopping after a checkpoint and resuming ends with the weights of
an uninterrupted run. ``--stop_after_steps N`` simulates such a stop (a preemption): it checkpoints
after step N and exits without the final save, while ``--max_steps`` still sets the schedule.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import runpy
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from goalrm_core.data.io import atomic_write_json
from goalrm_core.data.rundir import train_summary_path
from goalrm_core.model.diagnostics import HIDDEN_STATS
from goalrm_core.model.encoding import PreferenceCollator
from goalrm_core.model.objective import BatchLoss, reward_model_loss
from goalrm_core.model.reward_model import describe_tensors, nonfinite_tensors, save_reward_model
from goalrm_core.train.batching import epoch_batches, item_length, load_items, load_tokenizer
from goalrm_core.train.config import TrainRMConfig
from goalrm_core.train.distributed import (
    all_reduce,
    build_engine,
    checkpoint_tag,
    deepspeed_config,
    device_name,
    extensions_dir_hint,
    init_distributed,
    load_checkpoint_file,
    quiet_deepspeed_logs,
    rng_states,
    set_cpu_threads,
    set_rng_states,
)
from goalrm_core.train.fingerprint import read_fingerprint, refusal, run_fingerprint, write_fingerprint
from goalrm_core.train.lora import merged_state_dict, trainable_parameters
from goalrm_core.train.preflight import default_paths, preflight  # noqa: F401  (preflight: train-rm's entry point and tests import it here)
from goalrm_core.train.progress_file import ProgressWriter, short_duration
from goalrm_core.train.sinks import MetricSinks

# The objective's own lists: the terms whose non-finite value stops a run, and what a metrics row
# reports, train and eval alike.
CHECKED_TERMS, ROW_TERMS = BatchLoss.CHECKED_TERMS, BatchLoss.TERMS


# What Trainer.checkpoint writes beside DeepSpeed's state, and resume reads back.
CLIENT_KEYS = ("step", "rng", "schedule")
SCHEDULE_KEYS = ("train_batch_size", "total_steps", "train_pairs", "world_size")


def _missing_client_keys(client) -> list[str]:
    """The keys of a checkpoint's client state that :meth:`Trainer.resume` needs and it lacks."""
    if not isinstance(client, dict):
        return list(CLIENT_KEYS)
    missing = [k for k in CLIENT_KEYS if k not in client]
    schedule = client.get("schedule")
    if isinstance(schedule, dict):
        missing += [f"schedule.{k}" for k in SCHEDULE_KEYS if k not in schedule]
    elif "schedule" in client:
        missing.append("schedule (not a mapping)")
    if "rng" in client and not (isinstance(client["rng"], list) and client["rng"]):
        missing.append("rng (no state per rank)")
    return missing


STEP_FOLDER = re.compile(r"global_step(\d+)")


def rotate_checkpoints(ckpt_dir: str | os.PathLike, newest: str, max_num: int, max_mem_gb: float) -> list[Path]:
    """Checkpoint rotation as the official code does it (``--max_ckpt_num``, ``--max_ckpt_mem``): the oldest
    step folders of ``ckpt_dir`` go while, with ``newest``, there are more than ``max_num``, or the older ones
    hold more than ``max_mem_gb`` GB. The official code removes them before a save; here they go after
    ``newest`` is written, so a failed save still leaves the last good checkpoint. Only step folders
    (``global_step<N>``, oldest = lowest step) are touched. Returns the folders removed."""
    older = sorted(
        (p for p in Path(ckpt_dir).iterdir() if p.is_dir() and p.name != newest and STEP_FOLDER.fullmatch(p.name)),
        key=lambda p: int(STEP_FOLDER.fullmatch(p.name).group(1)),
    )
    size = {p: sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) for p in older}
    removed = []
    while older and (len(older) + 1 > max_num or sum(size[p] for p in older) > max_mem_gb * 1024**3):
        victim = older.pop(0)
        shutil.rmtree(victim)
        removed.append(victim)
    return removed


def steps_due(step: int, every: int, accumulation: int, total_steps: int, unit: str = "optimizer") -> bool:
    """Whether an event every ``every`` steps runs after optimiser step ``step`` (see :meth:`Trainer.due`).

    >>> (
    ...     [s for s in range(1, 9) if steps_due(s, 3, 1, 8)],
    ...     [s for s in range(1, 9) if steps_due(s, 12, 4, 8, "micro_batch")],
    ... )
    ([3, 6], [3, 6])
    >>> [s for s in range(1, 5) if steps_due(s, 3, 4, 4, "micro_batch")]  # of 16: 3 not run, 6, 9, 12 and 15 once
    [1, 2, 3]
    """
    if unit == "optimizer":
        return step % every == 0
    first, last = step * accumulation, min(step * accumulation + accumulation - 1, total_steps * accumulation)
    return (last // every) * every >= first


class TrainingError(RuntimeError):
    """Training cannot continue (a non-finite loss, a checkpoint that does not match the run)."""


# ---------------------------------------------------------------------------------------------
# before anything slow: the command line, its paths, and the errors that need no model or data
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# named meters
# ---------------------------------------------------------------------------------------------


@dataclass
class Meter:
    """Running float64 sums of named values, summed over every rank in one all-reduce.

    >>> m = Meter(("loss", "micro_batches"))
    >>> m.add({"loss": 0.5, "micro_batches": 1.0}); m.add({"loss": 0.25, "micro_batches": 1.0})
    >>> m.sums
    {'loss': 0.75, 'micro_batches': 2.0}
    """

    names: tuple[str, ...]
    sums: dict[str, float] = field(init=False)

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.sums = dict.fromkeys(self.names, 0.0)

    def add(self, values: dict[str, float]) -> None:
        for name in self.names:
            self.sums[name] += values[name]

    def add_tensors(self, values: dict[str, torch.Tensor]) -> None:
        """Add 0-d tensors, with one device-to-host copy for all of them."""
        host = torch.stack([values[name].float() for name in self.names]).double().cpu().tolist()
        self.add(dict(zip(self.names, host)))

    def reduced(self) -> dict[str, float]:
        """The sums over every rank (this rank's meter is left as it was)."""
        total = all_reduce(torch.tensor([self.sums[name] for name in self.names], dtype=torch.float64))
        return dict(zip(self.names, total.tolist()))


def to_device(batch: dict, device) -> dict:
    return {k: v.to(device) for k, v in batch.items()}


# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _op_build_named():
    """An error while DeepSpeed sets up (it builds its ops into the torch extensions folder on first use) says so
    in one line when that folder is not writable (a read-only cache), instead of the compiler's or the file's error
    alone."""
    try:
        yield
    except Exception as e:
        hint = extensions_dir_hint()
        if hint is None or isinstance(e, TrainingError):
            raise
        detail = " ".join(str(e).split())[:300] or type(e).__name__
        raise TrainingError(f"{type(e).__name__}: {detail}; {hint}") from e


class Trainer:
    """One reward-model training run on a DeepSpeed engine: ``Trainer(cfg).fit()``.

    Building it loads and tokenises the data first (bad rows or paths fail before any process
    group exists), then sets up the process group, the engine and, with ``--load_checkpoint``, the
    resumed position. :meth:`fit` runs the optimiser steps (:meth:`train_step`), evaluating
    (:meth:`evaluate`), logging and checkpointing (:meth:`checkpoint`) on the way, and ends with
    :meth:`save`.
    """

    def __init__(self, cfg: TrainRMConfig):
        self.started = time.time()
        self.cfg = cfg
        self.ckpt_dir, self.metrics_path = default_paths(cfg)
        self.launched_rank = int(os.environ.get("RANK", "0"))
        self.fingerprint = run_fingerprint(cfg)  # what makes this run this run: written beside each checkpoint
        if cfg.load_checkpoint:
            self.check_resumable()
        self.tokenizer = load_tokenizer(cfg)
        self.train_items, self.eval_items, self.data_stats = load_items(cfg, self.tokenizer, self.say)
        if len(self.train_items) < cfg.train_batch_size:
            raise ValueError(
                f"{len(self.train_items)} training pairs are fewer than one --train_batch_size {cfg.train_batch_size}; "
                f"lower --train_batch_size or add data"
            )

        quiet_deepspeed_logs()
        set_cpu_threads()
        with _op_build_named():
            self.rank, _local_rank, self.world = init_distributed()
        ds_config = deepspeed_config(cfg, self.world)
        self.gas = ds_config["gradient_accumulation_steps"]
        self.steps_per_epoch = len(self.train_items) // cfg.train_batch_size
        self.total_steps = self.steps_per_epoch * cfg.max_epochs
        if cfg.max_steps > 0:
            self.total_steps = min(self.total_steps, cfg.max_steps)
        self.say(
            f"train: {len(self.train_items)} pairs, {self.steps_per_epoch} steps/epoch, {self.total_steps} steps; "
            f"world {self.world} x micro {cfg.micro_train_batch_size} x accumulation {self.gas} = batch "
            f"{cfg.train_batch_size}; ZeRO-{cfg.zero_stage}, {'bf16' if cfg.bf16 else 'fp32'}, device {device_name()}"
        )
        with _op_build_named():
            self.engine = build_engine(cfg, ds_config, self.total_steps)
        if cfg.lora_rank > 0:
            trainable, total = trainable_parameters(self.engine.module)
            self.say(
                f"LoRA rank {cfg.lora_rank}, alpha {cfg.lora_alpha} on {cfg.target_modules or 'every linear layer'}"
                f"{' of a 4-bit NF4 backbone' if cfg.load_in_4bit else ''}: "
                f"{trainable} of {total} parameters train (the adapters and the value head)"
            )
        self.generator = torch.Generator().manual_seed(cfg.seed + self.rank)
        self.collate = PreferenceCollator(self.tokenizer.pad_token_id)
        self.lengths = [item_length(it) for it in self.train_items]

        self.step = 0
        self.resumed_from: int | None = None
        if cfg.load_checkpoint:
            self.resume()
        self.feature_cache_s: float | None = None
        if cfg.train_top_layers and cfg.feature_cache != "off":
            self.cache_features()
        self.sinks = MetricSinks(cfg, self.metrics_path, enabled=self.rank == 0, resume=self.resumed_from is not None)
        if self.rank == 0 and self.resumed_from is not None:
            self.sinks.drop_rows_after(self.resumed_from)

        self.window = Meter(ROW_TERMS + ("micro_batches", "tokens"))  # since the last train row
        # --log_hidden_stats: the state diagnostics of the micro-batches of each optimiser step a train row follows
        self.hidden_window = Meter(HIDDEN_STATS + ("micro_batches",))
        self.hidden_stats_due = False  # whether the micro-batches of the step under way compute them
        self.window_time = 0.0  # seconds in training micro-steps since the last train row (eval/checkpoints excluded)
        self.train_tokens, self.train_time = 0.0, 0.0
        self.non_finite = dict.fromkeys(CHECKED_TERMS, False)
        self.lr = 0.0

    def say(self, msg: str) -> None:
        if self.launched_rank == 0:
            print(msg, flush=True)

    def cache_features(self) -> None:
        """``--train_top_layers``: run the frozen layers once over every training and eval text (eval mode, no
        gradients, batched by length; :class:`~goalrm_core.model.top_layers.FeatureCache`) and collate their output
        into each batch, so that every step, training and evaluation, runs the top layers only."""
        from goalrm_core.model.top_layers import FeatureCache, FeatureCollator, decoder_layers

        t0 = time.time()
        model, folder = self.engine.module, self.cfg.feature_cache_dir
        cache = FeatureCache.load(folder, model, model.feature_layer) if folder else FeatureCache(model.feature_layer)
        texts = [
            text for it in (*self.train_items, *self.eval_items) for text in (it["chosen_ids"], it["rejected_ids"])
        ]
        cache.fill(model, texts, self.tokenizer.pad_token_id, progress=self._cache_progress())
        top = len(decoder_layers(model.backbone))
        frozen = "embeddings" + (f" and layers 0-{cache.layer - 1}" if cache.layer else "")
        self.say(
            f"feature cache: {len(cache) - cache.read} texts, {cache.tokens} tokens through the frozen {frozen} in "
            f"{cache.seconds:.1f} s ({cache.tokens / max(cache.seconds, 1e-9):.0f} "
            f"tokens/s){f', {cache.read} read from {cache.path(folder)}' if cache.read else ''}; each step runs the "
            f"top {top - cache.layer} of {top} layers"
        )
        if folder and cache.tokens and self.rank == 0:  # new texts: kept for the next run of this backbone
            self.say(f"feature cache: {len(cache)} texts kept in {cache.save(folder)}")
        self.collate = FeatureCollator(self.collate, cache)
        self.feature_cache_s = time.time() - t0

    def _cache_progress(self, every_s: float = 60.0):
        """The feature cache pass's progress, said at most every ``every_s`` seconds and at its end: texts and
        tokens done, tokens/s and an ETA from the tokens left (the pass runs longest texts first)."""
        said = [time.perf_counter()]

        def report(p) -> None:
            now = time.perf_counter()
            if now - said[0] < every_s and p.texts < p.total_texts:
                return
            said[0] = now
            rate = p.tokens / max(now - p.started, 1e-9)
            left = (p.total_tokens - p.tokens) / rate if rate > 0 else 0.0
            self.say(
                f"feature cache: {p.texts} of {p.total_texts} texts, {p.tokens:,} of {p.total_tokens:,} tokens "
                f"({rate:.0f} tokens/s), ETA {short_duration(left)}"
            )

        return report

    # ---- checkpoints ---------------------------------------------------------------------------

    def check_resumable(self) -> None:
        """Refuse, before the model or the data loads, to resume a checkpoint another run wrote: another strategy,
        loss, learning rate, backbone, dataset or seed (:mod:`goalrm_core.train.fingerprint`). One --ckpt_path
        shared by two runs (the official ./ckpt/checkpoints_rm) never resumes the wrong one."""
        ckpt_dir = self.ckpt_dir
        if not (ckpt_dir / "latest").is_file():
            return
        tag = checkpoint_tag(ckpt_dir)
        saved = read_fingerprint(ckpt_dir / tag)
        if saved is None:
            self.say(
                f"warning: --load_checkpoint: {ckpt_dir / tag} records no run fingerprint (written before goalrm kept "
                "one): resuming without checking that it is this run's"
            )
            return
        refused = refusal(ckpt_dir / tag, saved, self.fingerprint)
        if refused:
            raise TrainingError(refused)

    def resume(self) -> None:
        """Load the latest checkpoint of ``--ckpt_path``, if there is one, and continue from its step."""
        cfg, ckpt_dir = self.cfg, self.ckpt_dir
        if not (ckpt_dir / "latest").is_file():
            self.say(f"--load_checkpoint: no checkpoint in {ckpt_dir}; starting from scratch")
            return
        tag = checkpoint_tag(ckpt_dir)
        # every file DeepSpeed reads goes through the weights-only loader (DeepSpeed's own unpickles anything)
        self.engine.checkpoint_engine.load = load_checkpoint_file
        path, client = self.engine.load_checkpoint(
            str(ckpt_dir), tag=tag, load_optimizer_states=True, load_lr_scheduler_states=True
        )
        if path is None:
            raise TrainingError(f"{ckpt_dir}: the latest checkpoint could not be loaded")
        missing = _missing_client_keys(client)
        if missing:
            raise TrainingError(
                f"{path}: not a goalrm training checkpoint (its client state lacks {', '.join(missing)}); "
                f"resume only from a --ckpt_path this trainer wrote, or start without --load_checkpoint"
            )
        expected = {
            "train_batch_size": cfg.train_batch_size,
            "total_steps": self.total_steps,
            "train_pairs": len(self.train_items),
        }
        saved = {k: client["schedule"].get(k) for k in expected}
        if saved != expected:
            raise TrainingError(
                f"{path}: the checkpoint was written by a run with {saved}, this run has {expected}; "
                f"resume with the same data, --train_batch_size, --max_epochs and --max_steps"
            )
        if client["schedule"]["world_size"] != self.world:
            self.say(
                f"warning: checkpoint written with world size {client['schedule']['world_size']}, resuming with "
                f"{self.world}: the data order per step differs"
            )
        self.step = int(client["step"])
        states = client["rng"]
        set_rng_states(states[self.rank % len(states)], self.generator)
        self.resumed_from = self.step
        self.say(f"resumed from {path} at step {self.step}")

    def checkpoint(self) -> None:
        """A DeepSpeed checkpoint of this step, with the data position and every rank's RNG states."""
        all_states = [None] * self.world
        dist.all_gather_object(all_states, rng_states(self.generator))
        client = {
            "step": self.step,
            "epoch": self.step // self.steps_per_epoch,
            "micro_batch_in_epoch": (self.step % self.steps_per_epoch) * self.gas,
            "rng": all_states,
            "schedule": {
                "train_batch_size": self.cfg.train_batch_size,
                "total_steps": self.total_steps,
                "train_pairs": len(self.train_items),
                "world_size": self.world,
                "seed": self.cfg.seed,
            },
        }
        tag = f"global_step{self.step}"
        try:
            if self.rank == 0:  # first, so no step folder that `latest` names lacks it
                write_fingerprint(self.ckpt_dir / tag, self.fingerprint)
            self.engine.save_checkpoint(str(self.ckpt_dir), tag=tag, client_state=client)
        except (
            OSError,
            RuntimeError,
        ) as e:  # a full disk or a folder gone read-only: torch's writer raises RuntimeError
            good = self._last_good_checkpoint()
            if self.rank == 0 and (self.ckpt_dir / tag).is_dir() and not good.endswith(tag):
                shutil.rmtree(self.ckpt_dir / tag, ignore_errors=True)  # the half-written step folder resumes nothing
            detail = " ".join(str(e).split())[:200] or type(e).__name__
            raise TrainingError(
                f"{self.ckpt_dir / tag}: the checkpoint of step {self.step} could not be written ({detail}); "
                f"free space in {self.ckpt_dir} (or give another --ckpt_path) and resume with --load_checkpoint "
                f"from the last good checkpoint: {good}"
            ) from None
        self.say(f"checkpoint: {self.ckpt_dir / tag}")
        if self.rank == 0:
            for old in rotate_checkpoints(self.ckpt_dir, tag, self.cfg.max_ckpt_num, self.cfg.max_ckpt_mem):
                self.say(
                    f"checkpoint rotation (--max_ckpt_num {self.cfg.max_ckpt_num}, --max_ckpt_mem "
                    f"{self.cfg.max_ckpt_mem} GB): "
                    f"removed {old}"
                )

    def _last_good_checkpoint(self) -> str:
        latest = (self.ckpt_dir / "latest").read_text().strip() if (self.ckpt_dir / "latest").is_file() else None
        return f"{self.ckpt_dir / latest if latest else 'none written'}"

    # ---- training ------------------------------------------------------------------------------

    def compute_loss(self, batch: dict) -> BatchLoss:
        """The objective (:func:`~goalrm_core.model.objective.reward_model_loss`) on one training micro-batch, after
        the :attr:`step` optimiser steps taken (the contrastive warm-up reads it), with the state diagnostics when
        the step under way ends with a train row (:attr:`hidden_stats_due`)."""
        return reward_model_loss(
            self.engine, batch, self.cfg, self.generator, steps_taken=self.step, hidden_stats=self.hidden_stats_due
        )

    def train_step(self, micro_batches: Sequence[Sequence[int]], epoch: int) -> None:
        """One optimiser step over ``micro_batches`` (global micro-batches of item indices; this
        rank takes its slice of each). A non-finite loss on any rank stops every rank before the
        update; so does an update DeepSpeed skipped for non-finite gradients."""
        micro, engine = self.cfg.micro_train_batch_size, self.engine
        self.hidden_stats_due = self.cfg.log_hidden_stats and self.row_due(self.step + 1)
        for global_batch in micro_batches:
            t0 = time.time()
            chunk = global_batch[self.rank * micro : (self.rank + 1) * micro]
            batch = to_device(self.collate([self.train_items[j] for j in chunk]), engine.device)
            out = self.compute_loss(batch)
            self._check_finite(out)
            engine.backward(out.loss)
            self.window.add_tensors(
                {
                    **out.terms(),
                    "micro_batches": torch.ones((), device=engine.device),
                    "tokens": batch["attention_mask"].sum(),
                }
            )
            if out.hidden_stats is not None:
                self.hidden_window.add_tensors(
                    {**out.hidden_stats, "micro_batches": torch.ones((), device=engine.device)}
                )
            if engine.is_gradient_accumulation_boundary():
                self._stop_on_non_finite_loss(epoch)
                self.lr = engine.get_lr()[0]
            engine.step()
            self.train_time += time.time() - t0
            self.window_time += time.time() - t0
        if not engine.was_step_applied():
            raise TrainingError(
                f"non-finite gradients at optimiser step {self.step + 1} (the loss was finite): DeepSpeed skipped "
                f"the update. Last good checkpoint: {self._last_good_checkpoint()} "
                f"(untouched). Lower --learning_rate or --max_norm."
            )
        self.step += 1

    def _check_finite(self, out: BatchLoss) -> None:
        for term in CHECKED_TERMS:
            if not torch.isfinite(getattr(out, term)).all():
                self.non_finite[term] = True

    def _stop_on_non_finite_loss(self, epoch: int) -> None:
        flags = all_reduce(
            torch.tensor([float(self.non_finite[t]) for t in CHECKED_TERMS]), "max"
        )  # every rank stops together
        if flags.any():
            terms = [t for t, f in zip(CHECKED_TERMS, flags.tolist()) if f]
            raise TrainingError(
                f"non-finite {' and '.join(terms)} at optimiser step {self.step + 1} (epoch {epoch}); "
                f"stopped before the update. Last good checkpoint: {self._last_good_checkpoint()} (untouched). "
                f"Lower --learning_rate or check the data."
            )

    def log_train_row(self) -> dict:
        """The mean of each term since the last train row, over every rank's micro-batches."""
        sums = self.window.reduced()
        n = max(sums["micro_batches"], 1.0)
        row = {
            "step": self.step,
            "split": "train",
            **{term: sums[term] / n for term in ROW_TERMS},
            "lr": self.lr,
            "tokens_per_s": sums["tokens"] / max(self.window_time, 1e-9),
        }
        if self.cfg.contrastive:
            row["contrastive_beta"] = self.cfg.contrastive_beta_at(self.step - 1)  # that of the row's last step
        if self.cfg.log_hidden_stats:
            hidden = self.hidden_window.reduced()
            seen = hidden["micro_batches"]
            row.update({name: hidden[name] / seen if seen else None for name in HIDDEN_STATS})
            self.hidden_window.reset()
        self.train_tokens += sums["tokens"]
        self.sinks.log(row)
        self.window.reset()
        self.window_time = 0.0
        return row

    def fit(self) -> dict | None:
        """Train to the end of the schedule and save; returns the summary (on rank 0, else None).
        With ``--stop_after_steps`` it checkpoints and stops early instead, saving nothing."""
        cfg = self.cfg
        bar = tqdm(
            total=self.total_steps,
            initial=self.step,
            disable=self.rank != 0,
            desc="train-rm",
            dynamic_ncols=True,
            mininterval=1.0,
        )
        # the step and total for whoever watches ($GOALRM_PROGRESS_FILE: the report runner's line, notebook 02's bars)
        progress = (
            ProgressWriter.from_environment(self.total_steps, self.step) if self.rank == 0 else ProgressWriter(None, 0)
        )
        progress.update(self.step, force=True)
        last_eval: dict | None = None
        last_eval_step = -1
        self.engine.train()
        batches, batches_epoch = [], -1
        while self.step < self.total_steps:
            epoch, step_in_epoch = divmod(self.step, self.steps_per_epoch)
            if epoch != batches_epoch:
                per_pass = cfg.micro_train_batch_size * self.world
                batches = epoch_batches(
                    self.lengths, epoch, cfg.seed, per_pass, self.steps_per_epoch * self.gas, cfg.group_by_length
                )
                batches_epoch = epoch
            self.train_step(batches[step_in_epoch * self.gas : (step_in_epoch + 1) * self.gas], epoch)
            bar.update(1)
            progress.update(self.step)
            if self.row_due(self.step):
                row = self.log_train_row()
                bar.set_postfix(loss=f"{row['loss']:.4f}", acc=f"{row['accuracy']:.2f}")
            epoch_end = (
                cfg.step_unit == "micro_batch" and cfg.eval_steps == -1 and self.step % self.steps_per_epoch == 0
            )
            if (cfg.eval_steps > 0 and self.due(cfg.eval_steps)) or epoch_end:
                last_eval, last_eval_step = self.log_eval_row(), self.step
            saved = cfg.save_steps > 0 and self.due(cfg.save_steps)
            if saved:
                self.checkpoint()
            if cfg.stop_after_steps > 0 and cfg.stop_after_steps <= self.step < self.total_steps:
                if not saved:
                    self.checkpoint()
                bar.close()
                progress.finish(self.step)
                self.sinks.close()
                self.say(
                    f"stopped after step {self.step} (--stop_after_steps); resume with --load_checkpoint --ckpt_path "
                    f"{self.ckpt_dir}"
                )
                return None
        bar.close()
        progress.update(self.step, force=True)
        if last_eval_step != self.step:
            last_eval = self.log_eval_row()
        summary = self.save(last_eval)
        progress.finish(self.step)
        return summary

    def row_due(self, step: int) -> bool:
        """Whether a train row follows optimiser step ``step`` (every ``--logging_steps``, and the last step)."""
        every = max(self.cfg.logging_steps, 1)
        return steps_due(step, every, self.gas, self.total_steps, self.cfg.step_unit) or step == self.total_steps

    def due(self, every: int) -> bool:
        """Whether an event every ``every`` steps (``--step_unit``) falls after the optimiser step just taken.
        In micro-batches (the official trainer's counter, from 1): micro-batch m sees the weights of optimiser
        step floor(m / accumulation), so the event at m runs after that step; events the official code runs
        more than once with the same weights (``every`` < the accumulation) run once, and one due before the
        first optimiser step is not run."""
        return steps_due(self.step, every, self.gas, self.total_steps, self.cfg.step_unit)

    # ---- evaluation ----------------------------------------------------------------------------

    def log_eval_row(self) -> dict | None:
        """Evaluate on the held-out pairs (if any) and log an eval row."""
        if not self.eval_items:
            return None
        t0 = time.time()
        result = self.evaluate(self.eval_items)
        row = {"step": self.step, "split": "eval", **{k: result[k] for k in ROW_TERMS}}
        row.update(lr=self.engine.get_lr()[0], tokens_per_s=None, eval_s=round(time.time() - t0, 3))
        self.sinks.log(row)
        self.say(f"eval step {self.step}: accuracy {result['accuracy']:.3f}, loss {result['loss']:.4f}")
        return result

    @torch.no_grad()
    def evaluate(self, items: list[dict]) -> dict:
        """Accuracy, losses (the MEAN of per-batch losses) and reward mean/std over ``items``.

        Every rank runs the same number of forward passes (ZeRO-3 gathers parameters collectively): a
        rank whose shard is shorter repeats a batch and discards it.
        """
        engine, cfg, rank, world = self.engine, self.cfg, self.rank, self.world
        engine.eval()
        micro = cfg.micro_train_batch_size
        mine = items[rank::world]
        n_batches = math.ceil(math.ceil(len(items) / world) / micro)
        generator = torch.Generator().manual_seed(cfg.seed + 7919 * (rank + 1))  # fixed: eval never moves training RNG
        meter = Meter(
            BatchLoss.LOSS_TERMS
            + ("batches", "correct", "pairs", "chosen_sum", "rejected_sum", "reward_sum", "reward_sq_sum")
        )
        for b in range(n_batches):
            chunk = mine[b * micro : (b + 1) * micro]
            out = reward_model_loss(engine, to_device(self.collate(chunk or items[:1]), engine.device), cfg, generator)
            if not chunk:
                continue
            chosen, rejected = out.chosen_reward.double().cpu(), out.rejected_reward.double().cpu()
            rewards = torch.cat([chosen, rejected])
            losses = out.terms()
            meter.add(
                {
                    **{term: losses[term].item() for term in BatchLoss.LOSS_TERMS},
                    "batches": 1.0,
                    "correct": float((chosen > rejected).sum().item()),
                    "pairs": float(len(chunk)),
                    "chosen_sum": chosen.sum().item(),
                    "rejected_sum": rejected.sum().item(),
                    "reward_sum": rewards.sum().item(),
                    "reward_sq_sum": (rewards**2).sum().item(),
                }
            )
        sums = meter.reduced()
        engine.train()
        n_b, n_pairs = max(sums["batches"], 1.0), max(sums["pairs"], 1.0)
        mean = sums["reward_sum"] / (2 * n_pairs)
        var = max(sums["reward_sq_sum"] / (2 * n_pairs) - mean**2, 0.0)
        return {
            **{term: sums[term] / n_b for term in BatchLoss.LOSS_TERMS},
            "accuracy": sums["correct"] / n_pairs,
            "chosen_reward": sums["chosen_sum"] / n_pairs,
            "rejected_reward": sums["rejected_sum"] / n_pairs,
            "reward_mean": mean,
            "reward_std": math.sqrt(var * (2 * n_pairs) / max(2 * n_pairs - 1, 1)),
            "pairs": int(sums["pairs"]),
        }

    # ---- the final save ------------------------------------------------------------------------

    def save(self, last_eval: dict | None) -> dict | None:
        """Store the reward statistics on the model, save the RM (rank 0) and its train_summary.json."""
        cfg = self.cfg
        stats = last_eval
        if stats is None:  # no held-out pairs: reward statistics from a training sample
            stats = self.evaluate(self.train_items[:256])
        self.engine.module.set_reward_normalization(
            stats["reward_mean"], stats["reward_std"], enabled=cfg.normalize_reward
        )
        self.save_model()
        self.sinks.close()
        if self.rank != 0:
            return None
        self.sinks.finish()  # the new RM is in place: its log now replaces the earlier one
        wall = time.time() - self.started
        summary = {
            "steps": self.step,
            "total_steps": self.total_steps,
            "resumed_from_step": self.resumed_from,
            "wall_s": round(wall, 3),
            "train_s": round(self.train_time, 3),
            "tokens_per_s": self.train_tokens / self.train_time if self.train_time > 0 else None,
            "eval_accuracy": last_eval["accuracy"] if last_eval else None,
            "eval_loss": last_eval["loss"] if last_eval else None,
            "eval_preference_loss": last_eval["preference_loss"] if last_eval else None,
            "eval_contrastive_loss": last_eval["contrastive_loss"] if last_eval else None,
            "reward_mean": stats["reward_mean"],
            "reward_std": stats["reward_std"],
            "strategy": cfg.reward_model_strategy,
            "contrastive_strategy": cfg.contrastive_strategy if cfg.contrastive else None,
            "value_head_strategy": cfg.value_head_strategy,
            "template": cfg.template,
            "zero_stage": cfg.zero_stage,
            "lora_rank": cfg.lora_rank,
            "train_top_layers": cfg.train_top_layers,
            "feature_cache_s": None if self.feature_cache_s is None else round(self.feature_cache_s, 3),
            "world_size": self.world,
            "bf16": bool(cfg.bf16),
            "device": device_name(),
            **self.data_stats,
            "save_path": str(cfg.save_path),
            "metrics_path": str(self.metrics_path),
            "ckpt_path": str(self.ckpt_dir),
        }
        atomic_write_json(train_summary_path(cfg.save_path), summary)
        self.say(f"saved {cfg.save_path} ({self.step} steps, {wall:.1f} s)")
        return summary

    def save_model(self) -> None:
        """Gather the full weights (ZeRO-3: collectively, layer by layer) and save on rank 0 only; with
        ``--lora_rank`` the adapters are merged into the backbone's weights first (:func:`merged_state_dict`; a 4-bit
        backbone dequantised before)."""
        engine, cfg, rank = self.engine, self.cfg, self.rank
        if cfg.zero_stage == 3:
            state_dict = engine._zero3_consolidated_16bit_state_dict()
            if (
                rank == 0
            ):  # on CPU a gathered weight can be a view of a larger buffer, which safetensors refuses to save
                state_dict = {
                    k: v if v.untyped_storage().nbytes() == v.numel() * v.element_size() else v.clone()
                    for k, v in state_dict.items()
                }
        else:
            # ZeRO 1-2 keep parameters as views of flat buffers: copy each, so they save as separate tensors.
            state_dict = (
                {k: v.detach().cpu().clone() for k, v in engine.module.state_dict().items()} if rank == 0 else None
            )
        if rank == 0:  # LoRA: each adapter merged into its layer, so the RM saves as one trained without LoRA
            state_dict = merged_state_dict(engine.module, state_dict)
        bad = nonfinite_tensors(state_dict) if rank == 0 else []
        if all_reduce(
            torch.tensor([float(bool(bad))], device=engine.device), "max"
        ).item():  # every rank stops together
            raise TrainingError(
                f"NaN or inf weights after training ({describe_tensors(bad) if bad else 'found on rank 0'}); "
                f"nothing was saved to {cfg.save_path}. Lower --learning_rate / --head_learning_rate."
            )
        failed = ""
        if rank == 0:
            earlier = Path(cfg.save_path).exists()
            try:
                save_reward_model(
                    engine.module,
                    cfg.save_path,
                    self.tokenizer,
                    training_args=cfg.to_dict(),
                    state_dict=state_dict,
                    save_format=cfg.save_format,
                )
            except (
                Exception
            ) as e:  # a full disk or a folder gone read-only (safetensors and torch raise their own errors)
                detail = (
                    e.strerror if isinstance(e, OSError) and e.strerror else " ".join(str(e).split())[:200]
                ) or type(e).__name__
                failed = (
                    f"--save_path {cfg.save_path}: the RM could not be written ({detail}); "
                    f"{'the earlier RM there and its metrics log are kept' if earlier else 'nothing was saved'}. Free "
                    "space (or give another --save_path) and resume with --load_checkpoint from the last good "
                    f"checkpoint: {self._last_good_checkpoint()}"
                )
        if all_reduce(
            torch.tensor([float(bool(failed))], device=engine.device), "max"
        ).item():  # every rank stops together
            raise TrainingError(failed or f"--save_path {cfg.save_path}: rank 0 could not write the RM")
        dist.barrier()


if __name__ == "__main__":  # python -m / deepspeed --module goalrm_core.train.trainer: the command line
    runpy.run_module("goalrm_core.cli.train_rm", run_name="__main__", alter_sys=True)
