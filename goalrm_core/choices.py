"""The named choices of the library's flags and profile keys, defined here once in a module that
imports nothing, so a command declares and checks its flags, and a profile is checked, without
loading torch. The modules that act on a choice import it from here (``model.encoding.ENCODINGS`` is
this ``ENCODINGS``). The contrastive strategies are registered apart, with their scoring functions
(``model.strategies``, also torch-free at import)."""

from __future__ import annotations

#: how prompt + response become token ids (``model.encoding``)
ENCODINGS = ("official", "split")
#: where an RM's reward is read (``inference.forward``)
READOUTS = ("eos", "last_token")
#: what the reward is: the value at the last token (the paper's, the official code's) or the mean of the
#: values over the response's tokens (a read-out that sees the whole response; not in the paper)
REWARD_POOLS = ("last", "mean")
#: how a goal state is formed (``inference.goal_state``)
GOAL_METHODS = ("mean_last", "random_response", "random_token", "mean_all_tokens")
#: a goal state file of several rows: refused (``one``, the default: one goal per file, as
#: get-representation writes it) or averaged over its rows (``mean``, the official eval_rm.py)
GOAL_ROWS = ("one", "mean")
#: the RM's value head (``model.reward_model``)
VALUE_HEAD_STRATEGIES = ("linear", "mlp")
#: the MLP head: goalrm's (every layer with a bias, PyTorch's default init) or the official code's
#: (the last layer bias-free; weights drawn from N(0, 1/(h+1)), N(0, 1/(h/2+1)) twice, N(0, 1/(h+1)))
MLP_HEADS = ("goalrm", "official")
#: the folder format an RM is saved in (``model.reward_model``)
CHECKPOINT_FORMATS = ("goalrm", "official")
#: where a percentile draws contrastive positions from (the official code: ``earliest``)
PERCENTILE_WINDOWS = ("earliest", "latest")
#: which (source, goal) pairs the contrastive term averages over (the official code: ``all``)
PAIR_FORMS = ("all", "matched")
#: which states the contrastive term passes no gradient through (the paper's: ``none``; ``goal``: a stabiliser)
STOP_GRADIENTS = ("none", "goal")
#: the official metrics.py's hard-coded question counts of the two benchmarks it votes on
#: (``goalrm metrics --official --dataset_len 0``)
OFFICIAL_DATASET_LEN: dict[str, int] = {"gsm8k": 1319, "math": 5000}
