"""The two reward models the study compares, and the benchmark and generations its headline reads, named once.

These names are what the code passes around, what the run directory's folders are called
(``models/baseline-seed0``) and what tables and plots show. The trainer knows them only as its
``reward_model_strategy``.
"""

BASELINE = "baseline"
GOAL_CONDITIONED = "goal-conditioned"
RMS = (BASELINE, GOAL_CONDITIONED)

#: A step-verifier arm beside the two (profile key ``prm_arm``): a process reward model trained on the exact
#: per-token labels alone (correct before a rejected solution's first error, wrong from it on), with the same
#: base, pairs and step budget; read by its per-token value (partial reward), never in the paper's comparison.
PRM = "prm"
PRM_LABEL = "exact-label PRM"

#: name -> the trainer's ``--reward_model_strategy``
STRATEGY = {BASELINE: "vanilla", GOAL_CONDITIONED: "contrastive", PRM: "vanilla"}
#: name -> trainer settings that make the RM what it is, over the profile's recipe
OVERRIDES = {PRM: {"preference_loss_coef": 0.0, "dense_loss_coef": 1.0}}


def step_arms(prm_arm: bool) -> list[str]:
    """The step-verifier arms a profile trains beside the two RMs (``prm_arm``)."""
    return [PRM] if prm_arm else []


#: the in-distribution benchmark, which the headline figures and the sweep page read
ID_BENCH = "toy-id"
#: which generations the headline tables read -> how the pages describe them: "greedy", or
#: "sample0" (sample_index 0 of the sampled ones)
HEADLINE_SETS = {"greedy": "one greedy solution per question", "sample0": "one sampled solution per question"}
