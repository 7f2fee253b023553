"""Batched sampling from a causal LM, with the policy's own token log-probabilities.

The log-probabilities (under the untempered policy) feed the reference scorers of the evaluation:
a reader must see where the RMs stand against what the policy already knows for free.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from goalrm_core.data.encoding import left_pad


@dataclass
class Completion:
    text: str
    num_tokens: int  # generated tokens, EOS included when the policy stopped by itself
    mean_logprob: float
    min_logprob: float
    finished: bool  # ended with EOS before max_new_tokens


@torch.no_grad()
def sample_completions(
    model,
    tokenizer,
    prompts: list[str],
    n: int = 1,
    temperature: float = 1.0,
    greedy: bool = False,
    max_new_tokens: int = 96,
    batch_size: int = 256,
    seed: int = 0,
    progress: bool = True,
    desc: str = "generate",
) -> list[list[Completion]]:
    """``n`` completions per prompt (prompts repeated in place), deterministic given ``seed``."""
    model.eval()
    flat = [p for p in prompts for _ in range(n)]
    out: list[Completion] = []
    eos = tokenizer.eos_token_id
    for start in tqdm(range(0, len(flat), batch_size), desc=desc, disable=not progress, mininterval=2):
        chunk = flat[start:start + batch_size]
        ids, mask = left_pad([tokenizer(p, add_special_tokens=False)["input_ids"] for p in chunk], tokenizer.pad_token_id)
        torch.manual_seed(seed * 1_000_003 + start)
        gen = model.generate(
            input_ids=ids, attention_mask=mask, do_sample=not greedy,
            temperature=temperature if not greedy else None,
            max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id, eos_token_id=eos,
            return_dict_in_generate=True, output_logits=True,
        )
        new_tokens = gen.sequences[:, ids.shape[1]:]
        logprobs = torch.stack(gen.logits, dim=1).float().log_softmax(-1)
        token_lp = logprobs.gather(-1, new_tokens.unsqueeze(-1)).squeeze(-1)
        for row in range(new_tokens.shape[0]):
            toks = new_tokens[row].tolist()
            length = toks.index(eos) + 1 if eos in toks else len(toks)
            lp = token_lp[row, :length]
            text_ids = toks[:length - 1] if toks[length - 1] == eos else toks[:length]
            out.append(Completion(
                text=tokenizer.decode(text_ids, skip_special_tokens=True),
                num_tokens=length,
                mean_logprob=lp.mean().item(),
                min_logprob=lp.min().item(),
                finished=eos in toks,
            ))
    return [out[i * n:(i + 1) * n] for i in range(len(prompts))]
