"""The flags of how an RM reads text and where it runs, shared by ``goalrm eval-rm`` and
``goalrm get-representation``: declared from :mod:`goalrm_core.choices`, so ``--help`` and a bad
flag answer before torch is imported."""

from __future__ import annotations

from goalrm_core.choices import ENCODINGS, READOUTS


def add_reading_arguments(p, script: str) -> None:
    """The flags of how an RM reads text and where it runs, shared by ``eval-rm`` and
    ``get-representation`` (``script``: the official script whose behaviour the defaults follow)."""
    p.add_argument(
        "--encoding",
        default="official",
        choices=ENCODINGS,
        help="official: template + response tokenised in one call (the tokenizer's BOS); split: apart.",
    )
    p.add_argument(
        "--readout",
        default="last_token",
        choices=READOUTS,
        help=f"last_token: at the response's last token (the official {script}); eos: at an EOS after response + ' ' "
        "(the training input).",
    )
    p.add_argument(
        "--bf16", action="store_true", help=f"Run the RM in bfloat16 (as the official {script} does on its GPU)."
    )
    p.add_argument("--flash_attn", action="store_true", help="Use flash-attn 2 (CUDA + the flash-attn package).")
    p.add_argument("--device", default="auto", help="auto (the GPU when there is one), cpu, cuda, cuda:N.")
    p.add_argument(
        "--feature_cache_dir",
        help="A folder of frozen layers' states (train-rm's --feature_cache_dir): an RM trained with "
        "--train_top_layers N runs only its top N layers, its norm and its head on the states its frozen layers "
        "give each text, read from there when an RM of the same frozen weights kept them, else computed once and "
        "kept there for the next one (one file per backbone identity: the frozen weights, dtype, config and layer; "
        "another backbone's file is never read). The scores are the full forward's to float rounding. An RM that "
        "trained every layer is scored by the full forward, with a notice.",
    )
