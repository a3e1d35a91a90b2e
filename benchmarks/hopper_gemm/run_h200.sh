#!/usr/bin/env bash
# Device entry point for the reference Hopper GEMM benchmark (run from the repository root on the
# H200 machine, with the apache-tvm-ffi wheel carried in .whl/). Extra arguments go to run_h200.py.
# NCU=1 additionally profiles one call of each kernel at M=8192 with Nsight Compute into ncu.txt.
set -o pipefail
OUT=${OUT:-hopper_gemm_out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/apache_tvm_ffi-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
timeout 220 python3 benchmarks/hopper_gemm/run_h200.py --out "$OUT" "$@" 2>&1 | tee "$OUT/run.log"
rc=$?
if [ -n "${NCU:-}" ] && [ $rc -eq 0 ]; then
  timeout 90 ncu --clock-control none --kernel-name regex:'gemm_bf16_tn_kernel|_gemm_tn_persistent|nvjet' \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section LaunchStats --section Occupancy \
    python3 benchmarks/hopper_gemm/run_h200.py --out /tmp/ncu_out --profile-once 8192 \
    > "$OUT/ncu.txt" 2>&1
  grep -E '^\s+(gemm_bf16|_gemm_tn|nvjet)|Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Hit|Registers Per|SM Frequency' "$OUT/ncu.txt" | head -60
fi
exit $rc
