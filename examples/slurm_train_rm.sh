#!/usr/bin/env bash
# Goal-conditioned RM training on a SLURM cluster with the DeepSpeed launcher (the official code's contrastive
# command line). Submit from the repository root:
#
#   sbatch examples/slurm_train_rm.sh <preference-pairs.jsonl> [wandb-key]
#
# DeepSpeed's launcher reaches the other nodes over passwordless ssh (pdsh), started from the first
# node of the allocation; each node runs one process per GPU. Adjust the #SBATCH lines to the cluster.
#SBATCH --job-name=goalrm-train-rm
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=64
#SBATCH --time=24:00:00
#SBATCH --output=logs/%x-%j.out
set -euo pipefail

DATASET=${1:?usage: sbatch examples/slurm_train_rm.sh <preference-pairs.jsonl> [wandb-key]}
WANDB_KEY=${2:-offline}                       # "offline" keeps wandb local (it never blocks training)
PRETRAIN=${PRETRAIN:-nvidia/OpenMath-CodeLlama-7b-Python-hf}
SAVE_PATH=${SAVE_PATH:-./ckpt/contrastive_reward_model}
GPUS_PER_NODE=${SLURM_GPUS_ON_NODE:-8}
mkdir -p logs

# One "host slots=N" line per node of the allocation: DeepSpeed's hostfile format.
HOSTFILE=$(mktemp "${TMPDIR:-/tmp}/hostfile.${SLURM_JOB_ID:-local}.XXXX")
trap 'rm -f "$HOSTFILE"' EXIT
scontrol show hostnames "$SLURM_JOB_NODELIST" | while read -r host; do
    echo "$host slots=$GPUS_PER_NODE"
done > "$HOSTFILE"
MASTER_ADDR=$(head -n 1 "$HOSTFILE" | cut -d' ' -f1)
MASTER_PORT=${MASTER_PORT:-$((20000 + ${SLURM_JOB_ID:-0} % 20000))}
echo "hostfile:"; cat "$HOSTFILE"

# The official code's flags. For preemptible partitions add e.g. "--save_steps 50 --load_checkpoint": a
# requeued job then resumes from <save_path>.checkpoints with the same data order and schedule.
deepspeed --hostfile "$HOSTFILE" \
    --num_nodes "$SLURM_NNODES" --num_gpus "$GPUS_PER_NODE" \
    --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" \
    --module goalrm_core.train_rm \
    --save_path "$SAVE_PATH" \
    --save_steps -1 \
    --logging_steps 1 \
    --eval_steps -1 \
    --train_batch_size 64 \
    --micro_train_batch_size 1 \
    --pretrain "$PRETRAIN" \
    --bf16 \
    --max_epochs 1 \
    --max_len 2048 \
    --zero_stage 3 \
    --learning_rate 9e-6 \
    --dataset "$DATASET" \
    --dataset_probs 1.0 \
    --contrastive_loss_beta 0.5 \
    --unsim_samples 16 \
    --flash_attn \
    --gradient_checkpointing \
    --use_wandb "$WANDB_KEY" \
    --wandb_project goalrm \
    --wandb_group contrastive \
    --reward_model_strategy contrastive \
    --contrastive_strategy cosine \
    --value_head_strategy linear \
    --source_state_percentile 0 \
    --goal_state_percentile 0
