#!/usr/bin/env bash
# The whole GPU validation of PTXBench in one command, written for the lent H200 (device tool):
#
#   bash scripts/device_wheels.sh                 # here, once: fills .whl/ (git-ignored)
#   device run, carry [".whl"]:  GPU_COMMIT=<commit here> bash scripts/gpu_validate.sh [STEP[:LIMIT_S]...]
#
# GPU_COMMIT names the commit in the summary: the device copy's git metadata was seen stale (it named the
# session's first commit in every call).
#
# It installs the carried wheels into /tmp/site, unpacks bubblewrap from its .deb, puts both packages'
# sources on PYTHONPATH (nothing is built or installed from the checkout), then runs each STEP (default: all)
# under its own time limit. Every step writes its log and files under $OUT/raw/<step>/; at the end they are
# packed into $OUT/gpu-results.tar.gz, and $OUT/summary.md holds one row per step (exit code, seconds).
# The device tool returns at most 8 files, so only those two (and the summary's copy on stdout) come back.
#
# Steps:
#   env         nvidia-smi, versions, python imports
#   pytest      every test marked `gpu` (under $PYTEST_PATHS, default tests/)
#   suite       scripts/gpu_suite.py: the evaluation-integrity scenarios of issue 4
#   refgemm     benchmarks/hopper_gemm/fibserve_timing.py: reference kernels vs torch.matmul through FIBServe
#   latency     benchmarks/launch_latency.py: host launch latency in a timed call, two orderings
#   symmetry    benchmarks/timing_symmetry.py: where the torch.matmul-vs-itself bias comes from
#   sandbox     benchmarks/sandbox_gpu_probe.py: CUDA IPC and CUDA candidates inside the product's sandbox
#   stability   benchmarks/eval_stability.py: torch.matmul against itself, 10 evaluations at M=8192
#               (STABILITY_AXIS=all: every workload of gemm_n7168_k5120, M=70 to 8192, issue 35's goal)
#   attnstab    benchmarks/eval_stability.py on mha_with_lse_d128 at seq_len 4096: cuDNN SDPA against itself
#               (ATTNSTAB_AXIS=all: every workload, seq_len 512 to 16384; STABILITY_REPEATS runs, default 10).
#               seq_len 16384 takes about 83 s a run: run part of the ten per call (STABILITY_REPEATS=6, then 4), then
#               here `python3 benchmarks/eval_stability.py --join A/eval_stability.json B/eval_stability.json`
#   attnbase    benchmarks/attention_baselines.py: every attention baseline on every workload (ATTN_FLAGS, e.g. --quick)
#   inferbase   benchmarks/inference_baselines.py: every GQA, MLA, GDN and FP8-GEMM baseline on every workload, with
#               the path it took and its check against the packaged tolerances (INFER_FLAGS, e.g. --time-reference)
#   publicsol   a public FlashInfer Trace solution evaluated unchanged (`fibserve evaluate --legacy`): the JSON at
#               $PUBLIC_SOLUTION (carried; e.g. from `fibserve datasets pull flashinfer-ai/flashinfer-trace` on a
#               machine with Hub access) for the definition $PUBLIC_DEFINITION (default: its own `definition`)
#   overhead    benchmarks/eval_overhead.py: overhead, and memory over $OVERHEAD_EVALUATIONS (200) evaluations
#   serve       benchmarks/serve_throughput.py: `fibserve serve` on cuda:0, $SERVE_REQUESTS (200) evaluate requests of a
#               vector add in $SERVE_LANGUAGE (cuda; triton, python)
#   quickstart  `ptxbench quickstart --run` for cuda and triton with the demo model, then --report
#   hardening   issue 20's GPU defences: tests/fibserve/bench/test_gpu_hardening.py, then benchmarks/hardening_cost.py
#   experiment  docs/experiments.md "On a GPU": the demo-replay gpu-smoke experiment on the GPU lane, then the same
#               config with --ray on a one-node local Ray cluster, then the lane-utilisation benchmark
#   raylane     benchmarks/ray_lanes.py --gpu: a Ray lane owning the GPU evaluates $RAY_REQUESTS (50) CUDA candidates,
#               against a plain lane (needs Ray's wheels: scripts/device_wheels.sh --ray)
#   shortk      benchmarks/short_kernels.py --evaluations: short kernels' measured latency against CUPTI's (57 s, then
#               over 60 s once CUPTI was timed behind the gate, on 2026-12-05: give it shortk:90)
#   buildahead  benchmarks/build_ahead.py on cuda:0: $BUILD_AHEAD_CUDA (30) CUDA candidates with distinct sources through
#               one GPU lane, without and with 8 build-ahead workers (issue 29's evaluations per minute)
#   workers     benchmarks/worker_start.py --device cuda:0: a GPU worker's start, forked from the zygote, then
#               $WORKER_EVALUATIONS (10) evaluations of a vector add: what each waited for its workers (give it workers:90)
#   peer        benchmarks/peer_flashinfer_bench.py: the same solutions through FlashInfer-Bench 0.1.2 and FIBServe,
#               back to back (needs .whl/peer/ from scripts/device_wheels.sh --peer, installed into
#               /tmp/peer-site for this step only; on the H200 on 2026-12-05 it took 117 s, and ran out peer:120
#               once: give it peer:180)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-results}
RAW=$OUT/raw
mkdir -p "$RAW"

SITE=/tmp/site
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
        || { echo "wheel install failed"; exit 2; }
fi
for deb in .whl/bubblewrap_*.deb; do
    [ -f "$deb" ] && dpkg -x "$deb" /tmp/bwrap-root && export PATH=/tmp/bwrap-root/usr/bin:$PATH
done
# Every candidate runs in bubblewrap; without it FIBServe refuses them, and every step would only say so.
command -v bwrap >/dev/null || { echo "no bwrap: carry .whl/bubblewrap_*.deb (scripts/device_wheels.sh)"; exit 2; }
export PATH=$SITE/bin:$PATH  # the `ray` command, when Ray's wheel was carried
export PYTHONPATH=$SITE:$ROOT/packages/fibserve/src:$ROOT/packages/mini-ptx-agent/src${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
export FIBSERVE_CACHE_DIR=/tmp/fibserve-cache
export PTXBENCH_DATA_ROOT=$RAW/quickstart/data
# A lent GPU is shared infrastructure: keep NVLink multicast off (device README).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

SUMMARY=$OUT/summary.md
{
    echo "# GPU validation, $(date -u +%Y-%m-%dT%H:%MZ), commit ${GPU_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
    echo
    echo "| step | exit | seconds | log |"
    echo "| --- | --- | --- | --- |"
} >"$SUMMARY"

# run_step NAME LIMIT_S COMMAND...: run with a time limit, log to $RAW/NAME/log.txt, add a summary row.
run_step() {
    local name=$1 limit=$2
    shift 2
    mkdir -p "$RAW/$name"
    local start rc
    start=$(date +%s)
    [ "$(type -t "$1")" = function ] && set -- bash -c "$(declare -f "$1"); $1"
    echo ">>> $name (limit ${limit}s): $*"
    OUT=$RAW/$name timeout -k 15 "$limit" "$@" >"$RAW/$name/log.txt" 2>&1
    rc=$?
    echo "| $name | $rc | $(($(date +%s) - start)) | raw/$name/log.txt |" >>"$SUMMARY"
    tail -n 25 "$RAW/$name/log.txt"
}

step_env() {
    set -x
    nvidia-smi
    python3 -c "import sys, torch, triton, pydantic, fastapi, tvm_ffi, minisweagent; \
print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0)); \
print('triton', triton.__version__, 'pydantic', pydantic.VERSION, 'tvm_ffi', tvm_ffi.__version__)"
    nvcc --version | tail -n 2
    command -v bwrap && bwrap --version
    command -v compute-sanitizer ncu cuobjdump
}

quickstart() {
    local language
    for language in cuda triton; do
        python3 -m mini_ptx_agent quickstart --run --language "$language" --output-root "$OUT/runs" || echo "quickstart $language exit $?"
    done
    for dir in "$OUT"/runs/*/; do
        python3 -m mini_ptx_agent quickstart --report "$dir" || echo "report $dir exit $?"
    done
}

experiment() {
    printf 'name: gpu-smoke\ndefinitions: [gemm_n7168_k5120]\nworkloads: 1\nlanguages: [cuda]\nprompt_tags: [hopper-no-hint, hopper-tma-store]\nmodels: [demo]\nreplicas: 2\nnum_turns: 3\ntarget_speedup: 1.2\n' >/tmp/gpu-exp.yaml
    local run
    for run in plain ray; do
        local where=()
        if [ "$run" = ray ]; then
            ray start --head --port 6390 --num-cpus 4 --num-gpus 0 --include-dashboard=false --disable-usage-stats \
                >"$OUT/ray-start.log" 2>&1 || { echo "ray start failed"; tail "$OUT/ray-start.log"; }
            where=(--ray 127.0.0.1:6390)
        fi
        local start=$(date +%s)
        python3 -m mini_ptx_agent experiment run /tmp/gpu-exp.yaml --output "$OUT/exp-$run" --json "${where[@]}" \
            || echo "experiment $run exit $?"
        echo "experiment $run: $(($(date +%s) - start)) s"
        [ "$run" = ray ] && ray stop --force >/dev/null 2>&1
        python3 - "$OUT/exp-$run" <<'PY'
import csv, json, sys
from pathlib import Path
root = Path(sys.argv[1])
rows = list(csv.DictReader((root / "turns.csv").open()))
manifest = json.loads((root / "manifest.json").read_text())
print("rows", len(rows), "executed_on_gpu", sorted({r["executed_on_gpu"] for r in rows}),
      "statuses", sorted({r["status"] for r in rows}), "speedups", sorted(r["min_speedup"] for r in rows if r["min_speedup"]))
print("service", json.dumps({k: manifest["service"].get(k) for k in ("url", "lanes", "ray", "devices")})[:1500])
PY
    done
    fibserve_port=10007
    python3 -m fibserve serve --port $fibserve_port --state-dir /tmp/lanes-state >"$OUT/serve.log" 2>&1 &
    local server=$!
    python3 - $fibserve_port <<'PY'
import sys, time, httpx
deadline = time.monotonic() + 180
while time.monotonic() < deadline:
    try:
        if any(w["healthy"] for w in httpx.get(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=2).json()["workers"]):
            break
    except (httpx.HTTPError, ValueError, KeyError):
        pass
    time.sleep(0.5)
PY
    python3 benchmarks/experiment_runner.py lanes --service-url http://127.0.0.1:$fibserve_port --trajectories 64 --turns 2 \
        || echo "lanes exit $?"
    kill $server
}

public_solution() {
    [ -f "${PUBLIC_SOLUTION:-}" ] || { echo "set PUBLIC_SOLUTION to a carried public solution JSON"; exit 2; }
    local name=${PUBLIC_DEFINITION:-$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['definition'])" "$PUBLIC_SOLUTION")}
    python3 -m fibserve evaluate --definition "$name" --solution "$PUBLIC_SOLUTION" --legacy --device cuda:0 --json \
        >"$OUT/public_solution.json"
    local rc=$?
    python3 - "$OUT/public_solution.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
for trace in report.get("traces", []):
    evaluation, workload = trace.get("evaluation") or {}, trace.get("workload") or {}
    performance = evaluation.get("performance") or {}
    print(workload.get("uuid"), evaluation.get("status"), "speedup", performance.get("speedup_factor"),
          "ms", performance.get("latency_ms"), "baseline ms", performance.get("reference_latency_ms"))
PY
    exit $rc
}

hardening() {
    python3 -m pytest -o addopts="-ra --strict-markers" -m gpu -q -s -p no:cacheprovider \
        tests/fibserve/bench/test_gpu_hardening.py || echo "hardening tests exit $?"
    python3 benchmarks/hardening_cost.py --out "$OUT" || echo "hardening_cost exit $?"
}

# FlashInfer-Bench is installed for this step alone, into a folder no other step has on its path.
peer() {
    compgen -G ".whl/peer/flashinfer_bench-*.whl" >/dev/null \
        || { echo "no .whl/peer/: run bash scripts/device_wheels.sh --peer and carry .whl"; return 2; }
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/peer-site .whl/peer/*.whl \
        || { echo "FlashInfer-Bench wheel install failed"; return 2; }
    PATH=$PATH:/tmp/peer-site/bin PYTHONPATH=/tmp/peer-site:$PYTHONPATH python3 benchmarks/peer_flashinfer_bench.py
}

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(env sandbox pytest suite refgemm latency stability overhead serve quickstart)
for item in "${steps[@]}"; do
    step=${item%%:*}
    limit=600
    [ "$item" != "$step" ] && limit=${item#*:}
    case $step in
        env) run_step env "$limit" step_env ;;
        # -o addopts: one process, without pyproject's `-n auto` (GPU timing needs the device alone, and the
        # GPU image has no pytest-xdist)
        pytest) run_step pytest "$limit" python3 -m pytest -o addopts="-ra --strict-markers" -m gpu -q -p no:cacheprovider --timeout "$limit" ${PYTEST_PATHS:-tests} ;;
        suite) run_step suite "$limit" python3 scripts/gpu_suite.py --skip-pytest ;;
        refgemm) run_step refgemm "$limit" python3 benchmarks/hopper_gemm/fibserve_timing.py ;;
        latency) run_step latency "$limit" python3 benchmarks/launch_latency.py ;;
        symmetry) run_step symmetry "$limit" python3 benchmarks/timing_symmetry.py ;;
        sandbox) run_step sandbox "$limit" python3 benchmarks/sandbox_gpu_probe.py ;;
        stability) run_step stability "$limit" python3 benchmarks/eval_stability.py --repeats "${STABILITY_REPEATS:-10}" \
            --axis "${STABILITY_AXIS:-M=8192}" ;;
        attnstab) run_step attnstab "$limit" python3 benchmarks/eval_stability.py --repeats "${STABILITY_REPEATS:-10}" \
            --definition mha_with_lse_d128 --axis "${ATTNSTAB_AXIS:-seq_len=4096}" ;;
        attnbase) run_step attnbase "$limit" python3 benchmarks/attention_baselines.py --max-wall-s "$((limit - 30))" ${ATTN_FLAGS:-} ;;
        inferbase) run_step inferbase "$limit" python3 benchmarks/inference_baselines.py --max-wall-s "$((limit - 30))" \
            ${INFER_FLAGS:-} ;;
        publicsol) run_step publicsol "$limit" public_solution ;;
        overhead) run_step overhead "$limit" python3 benchmarks/eval_overhead.py --evaluations "${OVERHEAD_EVALUATIONS:-200}" \
            --max-wall-s "$((limit - 60))" ;;
        serve) run_step serve "$limit" python3 benchmarks/serve_throughput.py --devices cuda:0 --settle-s 3 \
            --language "${SERVE_LANGUAGE:-cuda}" --requests "${SERVE_REQUESTS:-200}" --max-wall-s "$((limit - 60))" ;;
        quickstart) run_step quickstart "$limit" quickstart ;;
        hardening) run_step hardening "$limit" hardening ;;
        experiment) run_step experiment "$limit" experiment ;;
        shortk) run_step shortk "$limit" python3 benchmarks/short_kernels.py --evaluations ;;
        peer) run_step peer "$limit" peer ;;
        buildahead) run_step buildahead "$limit" python3 benchmarks/build_ahead.py --devices cuda:0 \
            --cuda "${BUILD_AHEAD_CUDA:-30}" --other 0 --build-workers 0,8 --max-wall-s "$(((limit - 20) / 2))" ;;
        workers) run_step workers "$limit" python3 benchmarks/worker_start.py --device cuda:0 \
            --evaluations "${WORKER_EVALUATIONS:-10}" \
            --workers "${WORKER_STARTS:-10}" --fresh 2 ;;
        raylane) run_step raylane "$limit" python3 benchmarks/ray_lanes.py --gpu --lanes 1 --language cuda \
            --requests "${RAY_REQUESTS:-50}" ;;
        *) echo "unknown step: $step" >&2; exit 2 ;;
    esac
done

tar -czf "$OUT/gpu-results.tar.gz" -C "$OUT" raw summary.md
echo
cat "$SUMMARY"
