#!/usr/bin/env bash
# Fixit end to end, from one or more experiment directories to an SFT dataset (experiments/fixit/README.md):
#   failures -> repair (one model turn per failure, evaluated by FIBServe) -> pairs -> sft --recipe fixit
#
#   scripts/reproduce_fixit.sh [--check] WORK_DIR EXPERIMENT_DIR...
#
# The repair model is $REPAIR_MODEL (else $MODEL_NAME), served at $ACCRL_MODEL_HOST when that is set; the
# evaluation service is $SERVICE_URL, else an embedded FIBServe. Options of the steps: $FAILURES_ARGS (e.g.
# "--per-cell 50 --limit 500"), $REPAIR_ARGS ("--concurrency 8"), $PAIRS_ARGS ("--require-architecture"),
# $SFT_ARGS ("--max-tokens 16384"). Run it again after Ctrl-C or a kill: no finished model call is repeated.
# --check changes nothing: it checks the configuration and prints what the repair step would call and cost.
source "$(dirname "$0")/data_steps.sh"
data_steps_args reproduce_fixit.sh REPAIR_MODEL "$@"

if [[ $check == 1 ]]; then
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    # shellcheck disable=SC2086
    $PTXBENCH data failures "${sources[@]}" --output "$scratch/failures" ${FAILURES_ARGS:-}
    # shellcheck disable=SC2086
    $PTXBENCH data repair "$scratch/failures" --output "$work/repairs" --model "$model" --dry-run ${REPAIR_ARGS:-}
    echo "check: OK (nothing was written under $work)"
    exit 0
fi

start=$(date +%s)
# shellcheck disable=SC2086
$PTXBENCH data failures "${sources[@]}" --output "$work/failures" ${FAILURES_ARGS:-}
# shellcheck disable=SC2086
$PTXBENCH data repair "$work/failures" --output "$work/repairs" --model "$model" ${REPAIR_ARGS:-}
# shellcheck disable=SC2086
$PTXBENCH data pairs "$work/repairs" --output "$work/pairs" ${PAIRS_ARGS:-}
# shellcheck disable=SC2086
$PTXBENCH data sft "$work/pairs" --recipe fixit --output "$work/sft" ${SFT_ARGS:-}
echo "fixit: $work/sft (sft.parquet, sft.jsonl, README.md) in $(( $(date +%s) - start )) s"
