# Sourced by reproduce_fixit.sh and reproduce_kernelgen.sh: their shared argument handling.
#   data_steps_args NAME MODEL_VARIABLE "$@"   sets check (0/1), work, model, sources (an array), PTXBENCH
set -euo pipefail
# Paths are taken as given, from the caller's directory; ptxbench runs from this checkout.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PTXBENCH=${PTXBENCH:-"uv run --frozen --project $root ptxbench"}

data_steps_args() {
    local name=$1 variable=$2
    shift 2
    check=0
    if [[ "${1:-}" == "--check" ]]; then check=1; shift; fi
    if [[ $# -lt 2 ]]; then
        echo "usage: scripts/$name [--check] WORK_DIR EXPERIMENT_DIR..." >&2
        exit 2
    fi
    work=$1; shift
    sources=("$@")
    model=${!variable:-${MODEL_NAME:-}}
    if [[ -z "$model" ]]; then
        echo "set $variable (or MODEL_NAME) to the model, and ACCRL_MODEL_HOST for an endpoint" >&2
        exit 2
    fi
    local source
    for source in "${sources[@]}"; do
        [[ -f "$source/plan.json" ]] || { echo "$source: not an experiment or run directory (no plan.json)" >&2; exit 2; }
    done
}
