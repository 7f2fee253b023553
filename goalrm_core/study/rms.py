"""The two reward models the study compares, and the benchmark and generations its headline reads, named once.

These names are what the code passes around, what the run directory's folders are called
(``models/baseline-seed0``) and what tables and plots show. The trainer knows them only as its
``reward_model_strategy``.
"""

BASELINE = "baseline"
GOAL_CONDITIONED = "goal-conditioned"
RMS = (BASELINE, GOAL_CONDITIONED)

#: name -> the trainer's ``--reward_model_strategy``
STRATEGY = {BASELINE: "vanilla", GOAL_CONDITIONED: "contrastive"}

#: the in-distribution benchmark, which the headline figures and the sweep page read
ID_BENCH = "toy-id"
#: which generations the headline tables read -> how the pages describe them: "greedy", or
#: "sample0" (sample_index 0 of the sampled ones)
HEADLINE_SETS = {"greedy": "one greedy solution per question", "sample0": "one sampled solution per question"}
