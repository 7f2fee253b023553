"""The training data of a run: preference rows loaded and tokenised once, and the order in which
micro-batches visit them (a function of seed and epoch only, so a resumed run sees the same order)."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from goalrm_core.data.preferences import (
    HH_RLHF,
    chat_splitter,
    dataset_sources,
    held_out_split,
    load_preference_rows,
    official_eval_rows,
    split_train_eval,
)
from goalrm_core.model.encoding import encode_preference_rows
from goalrm_core.train.config import SPECIAL_TOKENS, TrainRMConfig


def load_tokenizer(cfg: TrainRMConfig):
    """The tokenizer of ``--pretrain`` with the official special-token overrides (``--bos_token`` …) and a pad
    token other than EOS that text never holds (:func:`~goalrm_core.model.tokenization.distinct_pad_token`:
    its own, else its unknown token, else a reserved special token; EOS only when it has none of them), so
    that ``AutoModelForSequenceClassification``, which ends a sequence at its last token that is not the pad
    id, reads the saved RM's reward where goalrm does, also when the text ends with EOS. Padded positions are
    masked: the pad id changes no reward. A ``--pad_token`` given is kept as it is. An override must be a
    token the backbone has an embedding for: one it lacks is a one-line error naming the flag."""
    from transformers import AutoConfig, AutoTokenizer  # lazy: the flags are checked before transformers loads

    from goalrm_core.model.tokenization import distinct_pad_token

    overrides = {name: getattr(cfg, name) for name in SPECIAL_TOKENS if getattr(cfg, name)}
    tokenizer = AutoTokenizer.from_pretrained(cfg.pretrain, **overrides)
    if not cfg.pad_token and (tokenizer.pad_token_id is None or tokenizer.pad_token_id == tokenizer.eos_token_id):
        vocab_size = getattr(AutoConfig.from_pretrained(cfg.pretrain), "vocab_size", None)
        pad = distinct_pad_token(tokenizer, vocab_size)
        if pad is not None:
            tokenizer.pad_token = pad
    if overrides:
        vocab_size = AutoConfig.from_pretrained(cfg.pretrain).vocab_size
        for name, token in overrides.items():
            token_id = tokenizer.convert_tokens_to_ids(token)
            if token not in tokenizer.get_vocab() or not isinstance(token_id, int) or not 0 <= token_id < vocab_size:
                raise ValueError(
                    f"--{name} {token!r} is not a token of the tokenizer of --pretrain {cfg.pretrain} that the "
                    f"backbone has an embedding for (id {token_id}, vocabulary {vocab_size}); give one of its tokens"
                )
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_items(cfg: TrainRMConfig, tokenizer, say: Callable[[str], None]) -> tuple[list[dict], list[dict], dict]:
    """(train items, eval items, counts for the summary) from ``--dataset`` / ``--eval_dataset``.

    Rows that are all HH-RLHF dialogues switch a math template (``nemo``, the default, or ``math``) to
    ``hh`` (``cfg`` is updated, so the saved training args say what ran). ``--prompt_key``/``--chosen_key``/
    ``--rejected_key``, ``--apply_chat_template`` and ``--input_template`` apply as in the official code.
    The held-out pairs: ``--eval_dataset``, else as ``--eval_source`` says."""
    reports: list = []
    read = dict(
        hh_format=cfg.hh_format,
        keys=(cfg.prompt_key, cfg.chosen_key, cfg.rejected_key) if cfg.chosen_key else None,
        chat=chat_splitter(tokenizer) if cfg.apply_chat_template else None,
    )
    rows = load_preference_rows(cfg.dataset, cfg.dataset_probs, cfg.seed, cfg.max_samples, reports=reports, **read)
    held_out = (
        [held_out_split(source) for source in dataset_sources(cfg.dataset)]
        if cfg.eval_source == "test_split"
        else [None]
    )
    if cfg.eval_dataset:
        train_rows = rows
        eval_rows = load_preference_rows(cfg.eval_dataset, "", cfg.seed, 0, split="eval", reports=reports, **read)
    elif cfg.eval_source == "official":
        train_rows = rows
        eval_rows, notes = official_eval_rows(cfg.dataset, **read)
        eval_rows = eval_rows[: cfg.max_samples] if cfg.max_samples else eval_rows
        say(f"data: evaluating as the official code does (--eval_source official): {'; '.join(notes)}")
    elif all(held_out):
        say(
            f"data: evaluating on the sources' own {'/'.join(dict.fromkeys(held_out))} split (--eval_source test_split)"
        )
        train_rows = rows
        eval_rows = load_preference_rows(
            cfg.dataset, cfg.dataset_probs, cfg.seed, 0, split="test", reports=reports, **read
        )
    else:
        train_rows, eval_rows = split_train_eval(rows, cfg.eval_split, cfg.seed)
    for report in reports:
        say(f"data: {report.summary()}")
    if cfg.template in ("math", "nemo") and all(set(r.shapes) == {HH_RLHF} for r in reports):
        # The official code's HH script passes no template: a whole dialogue already holds its prompt.
        cfg.template = "hh"
        say(hh_switch_line(cfg.apply_chat_template))
    train_items, train_stats = encode_preference_rows(
        tokenizer, train_rows, cfg.template, cfg.max_len, cfg.encoding, cfg.input_template
    )
    eval_items, eval_stats = (
        encode_preference_rows(tokenizer, eval_rows, cfg.template, cfg.max_len, cfg.encoding, cfg.input_template)
        if eval_rows
        else ([], None)
    )
    say(f"tokenised train: {train_stats.summary()}")
    if eval_stats is not None:
        say(f"tokenised eval: {eval_stats.summary()}")
    if not train_items:
        raise ValueError(
            f"no training pairs left after tokenisation with --max_len {cfg.max_len}: {train_stats.summary()}"
        )
    stats = {
        "train_pairs": len(train_items),
        "eval_pairs": len(eval_items),
        "train_truncated": train_stats.n_truncated,
        "train_dropped": train_stats.n_dropped,
        "eval_truncated": eval_stats.n_truncated if eval_stats else 0,
        "eval_dropped": eval_stats.n_dropped if eval_stats else 0,
        "skipped_rows": sum(r.n_skipped for r in reports),
    }
    return train_items, eval_items, stats


def hh_switch_line(chat_template: bool) -> str:
    """What the trainer says when whole conversations switch a math template to ``hh``: HH-RLHF dialogues, or,
    with ``--apply_chat_template``, conversations the tokenizer's chat template rendered (no HH-RLHF text).

    >>> print(hh_switch_line(True))
    data: every row is a chat conversation (rendered with the tokenizer's chat template, --apply_chat_template); using --template hh (the conversation up to the reply is the prompt)
    """  # noqa: E501  (the doctest's expected output is one printed line, 181 columns, that cannot be wrapped)
    if chat_template:
        return (
            "data: every row is a chat conversation (rendered with the tokenizer's chat template, "
            "--apply_chat_template); using --template hh (the conversation up to the reply is the prompt)"
        )
    return "data: every row is an HH-RLHF dialogue; using --template hh (the dialogue is the prompt)"


def item_length(item: dict) -> int:
    return max(len(item["chosen_ids"]), len(item["rejected_ids"]))


def epoch_batches(
    lengths: Sequence[int], epoch: int, seed: int, per_pass: int, n_passes: int, group_by_length: bool
) -> list[list[int]]:
    """The data order of one epoch: ``n_passes`` global micro-batches of ``per_pass`` item indices
    (rank r takes slice ``[r*micro:(r+1)*micro]`` of each). A function of (seed, epoch) only.

    With ``group_by_length`` the shuffled order is cut into chunks of 50 passes, each chunk sorted by
    length and cut into passes, and the passes of a chunk shuffled: similar lengths share a padded
    batch (across ranks too), while the order stays random at the chunk scale.

    >>> lengths = [1, 9, 2, 8, 3, 7]
    >>> batches = epoch_batches(lengths, epoch=0, seed=0, per_pass=2, n_passes=3, group_by_length=True)
    >>> sorted(sorted(lengths[i] for i in b) for b in batches)
    [[1, 2], [3, 7], [8, 9]]
    """
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(lengths))[: per_pass * n_passes].tolist()
    if not group_by_length:
        return [order[i * per_pass : (i + 1) * per_pass] for i in range(n_passes)]
    chunk = 50 * per_pass
    batches = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start : start + chunk], key=lambda i: -lengths[i])
        passes = [part[i : i + per_pass] for i in range(0, len(part), per_pass)]
        batches.extend(passes[j] for j in rng.permutation(len(passes)).tolist())
    return batches
