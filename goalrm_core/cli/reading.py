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
