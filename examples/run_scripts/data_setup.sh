# The official examples/run_scripts/data_setup.sh: the base model's generations (Nemo-Skills'
# codellama-7b test predictions) into ./examples/data/base_model_generation/<benchmark>/, and the
# preference ranking dataset (a datasets.save_to_disk folder) into ./examples/data/preference_ranking_dataset/.
# Run from the project's root. OPENMATH_PREDICTIONS_URL and PREFERENCE_RANKING_URL name other copies of
# the two archives (curl reads file:// too); the second is fetched only when
# ./examples/data/preference_ranking_dataset.zip (committed in the official repository) is absent.
set -x

OPENMATH_PREDICTIONS_URL=${OPENMATH_PREDICTIONS_URL:-https://openmath-test-predictions.s3.amazonaws.com/openmath-test-predictions.zip}
PREFERENCE_RANKING_URL=${PREFERENCE_RANKING_URL:-https://github.com/vaskarnathscale/goal-conditioned-rm/raw/main/examples/data/preference_ranking_dataset.zip}

mkdir -p ./examples/data/base_model_generation/
curl -fL "$OPENMATH_PREDICTIONS_URL" --output ./examples/data/openmath-test-predictions.zip || exit 1

for benchmark in algebra222 asdiv gsm-hard gsm8k math mawps svamp; do
    unzip -o -j ./examples/data/openmath-test-predictions.zip "openmath-test-predictions/codellama-7b/${benchmark}/*" \
        -d ./examples/data/base_model_generation/${benchmark} || exit 1
done
rm ./examples/data/openmath-test-predictions.zip

if [[ ! -f ./examples/data/preference_ranking_dataset.zip ]]; then
    curl -fL "$PREFERENCE_RANKING_URL" --output ./examples/data/preference_ranking_dataset.zip || exit 1
fi
mkdir -p ./examples/data/preference_ranking_dataset/
unzip -o ./examples/data/preference_ranking_dataset.zip -d ./examples/data/ || exit 1
