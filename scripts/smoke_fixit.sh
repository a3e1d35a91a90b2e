#!/usr/bin/env bash
# Fixit smoke test against a real model endpoint (experiments/fixit/README.md).
#
#   scripts/smoke_fixit.sh --check          checks dependencies and configuration; changes nothing
#   scripts/smoke_fixit.sh --run [WORK_DIR] a tiny live run: a 2-turn experiment on vector_add_f32 (Triton), then
#                                           reproduce_fixit.sh on it (at most 2 failures repaired)
#
# The model is $MODEL_NAME: a litellm name with its key variable, or a served id with ACCRL_MODEL_HOST=host:port.
# The same model writes the kernels and repairs them (REPAIR_MODEL overrides the repair model). The service is
# $SERVICE_URL, else an embedded FIBServe (vector_add_f32 runs on a CPU under the Triton interpreter).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
PTXBENCH=${PTXBENCH:-"uv run --frozen --project $root ptxbench"}
mode=${1:-}
failed=0
ok() { echo "OK   $1"; }
fail() { echo "FAIL $1"; failed=1; }

preflight() {
    if $PTXBENCH data --help >/dev/null 2>&1; then ok "ptxbench data"; else fail "ptxbench data (run: uv sync --all-packages)"; fi
    if [[ -n "${MODEL_NAME:-}" ]]; then ok "MODEL_NAME=$MODEL_NAME"; else fail "MODEL_NAME is not set"; fi
    if [[ -n "${ACCRL_MODEL_HOST:-}" ]]; then
        if curl -fsS --max-time 10 "http://$ACCRL_MODEL_HOST/v1/models" | grep -q "\"${MODEL_NAME:-}\""; then
            ok "endpoint $ACCRL_MODEL_HOST serves $MODEL_NAME"
        else
            fail "endpoint $ACCRL_MODEL_HOST does not answer /v1/models with $MODEL_NAME"
        fi
    fi
    if [[ -n "${SERVICE_URL:-}" ]]; then
        if curl -fsS --max-time 10 "$SERVICE_URL/health" >/dev/null; then ok "FIBServe at $SERVICE_URL"; else fail "FIBServe at $SERVICE_URL does not answer /health"; fi
    elif command -v bwrap >/dev/null 2>&1; then
        ok "no SERVICE_URL: an embedded FIBServe will run (bubblewrap found)"
    else
        fail "no SERVICE_URL and no bubblewrap for an embedded FIBServe"
    fi
}

case "$mode" in
--check)
    preflight
    exit $failed
    ;;
--run)
    preflight
    [[ $failed == 0 ]] || exit 2
    work=${2:-$(mktemp -d -t fixit-smoke-XXXXXX)}
    mkdir -p "$work"
    config="$work/experiment.yaml"
    printf 'name: fixit-smoke\ndefinitions: [vector_add_f32]\nworkloads: 1\nlanguages: [triton]\nmodels: ["%s"]\nnum_turns: 2\n' \
        "$MODEL_NAME" >"$config"
    [[ -f "$work/experiment/plan.json" ]] || $PTXBENCH experiment run "$config" --output "$work/experiment"
    FAILURES_ARGS="--limit 2" "$root/scripts/reproduce_fixit.sh" "$work/fixit" "$work/experiment"
    echo "smoke: $work (a model that wrote no failing kernel gives an empty dataset: that is a pass too)"
    ;;
*)
    echo "usage: scripts/smoke_fixit.sh --check | --run [WORK_DIR]" >&2
    exit 2
    ;;
esac
