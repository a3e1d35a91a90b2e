#!/usr/bin/env bash
# KernelGen end to end, from one or more experiment directories to an SFT dataset (experiments/kernelgen/README.md):
#   kernelgen (correct kernels) -> reasoning (one model call per kernel) -> sft --recipe kernelgen
#
#   scripts/reproduce_kernelgen.sh [--check] WORK_DIR EXPERIMENT_DIR...
#
# The reasoning model is $REASONING_MODEL (else $MODEL_NAME), served at $ACCRL_MODEL_HOST when that is set.
# Options of the steps: $KERNELGEN_ARGS ("--per-definition 20"), $REASONING_ARGS ("--concurrency 8"),
# $SFT_ARGS. Run it again after Ctrl-C or a kill: no finished model call is repeated. --check changes
# nothing: it checks the configuration and prints what the reasoning step would call and cost.
source "$(dirname "$0")/data_steps.sh"
data_steps_args reproduce_kernelgen.sh REASONING_MODEL "$@"

kernels="$work/kernels"
if [[ $check == 1 ]]; then
    kernels=$(mktemp -d)
    trap 'rm -rf "$kernels"' EXIT
fi
start=$(date +%s)
# shellcheck disable=SC2086
$PTXBENCH data kernelgen "${sources[@]}" --output "$kernels" ${KERNELGEN_ARGS:-}
if [[ $check == 1 ]]; then
    # shellcheck disable=SC2086
    $PTXBENCH data reasoning "$kernels" --output "$work/reasoning" --model "$model" --dry-run ${REASONING_ARGS:-}
    echo "check: OK (nothing was written under $work)"
    exit 0
fi
# shellcheck disable=SC2086
$PTXBENCH data reasoning "$kernels" --output "$work/reasoning" --model "$model" ${REASONING_ARGS:-}
# shellcheck disable=SC2086
$PTXBENCH data sft "$work/reasoning" --recipe kernelgen --output "$work/sft" ${SFT_ARGS:-}
echo "kernelgen: $work/sft (sft.parquet, sft.jsonl, README.md) in $(( $(date +%s) - start )) s"
