# The official examples/run_scripts/print_baseline_metrics.sh: the official metrics.py printout
# (goalrm metrics --official) of eval_basline_rm.sh's scores.
set -x

python ./examples/metrics.py \
    --model_name "baseline_reward_model" \
    --eval_results_dir ./examples/data/baseline_rm_eval_data \
    --filter_threshold 0.0 \
    --benchmarks gsm8k math gsm-hard mawps asdiv algebra222 svamp \
    --vanilla
