# llama7b contrastive RM training (helpful-harmless)
# The official examples/run_scripts/train_naturallanguage_rm.sh: the same command line, run by goalrm's examples/train_rm.py.
# Fill in the <...> placeholders first, as with the official script. Run from the project's root;
# `bash examples/run_scripts/train_naturallanguage_rm.sh slurm` only sets the command (see examples/slurm_train_rm.sh).
set -x

# Do training
read -r -d '' training_commands <<EOF
./examples/train_rm.py \
     --logging_steps 1 \
     --eval_steps 1000 \
     --train_batch_size 64 \
     --micro_train_batch_size 1 \
     --pretrain meta-llama/Meta-Llama-3-8B-Instruct \
     --bf16 \
     --max_epochs 1 \
     --max_len 4096 \
     --zero_stage 3 \
     --learning_rate 1e-5 \
     --dataset Anthropic/hh-rlhf \
     --dataset_probs 1.0 \
     --contrastive_loss \
     --contrastive_loss_beta 0.5 \
     --unsim_samples 16 \
     --flash_attn \
     --gradient_checkpointing \
     --use_wandb <your wandb key> \
     --s3_save_path <your s3 save path> \
     --seed 0
EOF

if [[ ${1} != "slurm" ]]; then
     deepspeed $training_commands
fi
