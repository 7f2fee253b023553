# The official examples/run_scripts/get_representation.sh: the goal state of the goal-conditioned RM,
# saved as ./examples/data/representation/contrastive_reward_model_goal_state_embedding.npy.
set -x

python ./examples/get_representation.py \
    --dataset-path ./examples/data/preference_ranking_dataset \
    --reward-model-path ./ckpt/contrastive_reward_model \
    --save-dir ./examples/data/representation
