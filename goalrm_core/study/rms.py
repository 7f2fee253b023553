"""The two reward models the study compares, named once.

These names are what the code passes around, what the run directory's folders are called
(``models/baseline-seed0``) and what tables and plots show. The trainer knows them only as its
``reward_model_strategy``.
"""

BASELINE = "baseline"
GOAL_CONDITIONED = "goal-conditioned"
RMS = (BASELINE, GOAL_CONDITIONED)

#: name -> the trainer's ``--reward_model_strategy``
STRATEGY = {BASELINE: "vanilla", GOAL_CONDITIONED: "contrastive"}
