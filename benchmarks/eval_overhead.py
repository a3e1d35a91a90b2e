#!/usr/bin/env python3
"""Harness overhead and memory stability of fibserve.bench on the GPU (issue 4, "Performance").

1. Overhead: one evaluation of the quickstart workload (gemm_n7168_k5120, M=8192) with the bundled Hopper
   reference kernel (``fibserve/datasets/reference_kernels/gemm_n7168_k5120/kernel.cu``), once with a cold
   build cache and once warm, each with a warm spare worker. Overhead = wall time - (nvcc build time + GPU
   time of the timed candidate and reference calls); the target is <= 3 s. The phase split is reported.
2. Memory: ``--evaluations`` (default 200) consecutive evaluations of a cheap candidate on one Evaluator
   (torch.matmul at M=232 with 1 trial x 5 iterations): host RSS of this (trusted) process, its CUDA memory,
   the device memory in use (with the spare workers up) and leftover /dev/shm files are sampled every 10
   evaluations; growth is reported
   and must stay under ``--max-rss-growth-mb`` / ``--max-device-growth-mb``.

    OUT=./bench-results python3 benchmarks/eval_overhead.py [--evaluations 200]

Writes ``$OUT/eval_overhead.json`` and ``$OUT/eval_overhead.md``; exit code 0 when both targets hold.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "tests" / "fibserve" / "bench" / "kernels"
DEFINITION = "gemm_n7168_k5120"


def rss_mb() -> float:
    """Resident set size of this process in MiB (from /proc/self/status)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def shm_files() -> int:
    """Files in /dev/shm (torch CUDA IPC reference counters live there)."""
    try:
        return len(os.listdir("/dev/shm"))
    except OSError:
        return -1


def shm_owners() -> dict:
    """Who left the /dev/shm files: counts by the pid in torch's ``torch_<pid>_...`` names, whether that
    process still runs, and whether it is this (trusted) process."""
    owners: dict[str, dict] = {}
    for name in sorted(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else []:
        parts = name.split("_")
        pid = parts[1] if len(parts) > 2 and parts[0] == "torch" and parts[1].isdigit() else "other"
        entry = owners.setdefault(pid, {"files": 0, "example": name})
        entry["files"] += 1
        if pid != "other":
            entry["alive"] = os.path.exists(f"/proc/{pid}")
            entry["is_this_process"] = int(pid) == os.getpid()
    return owners


def make_solution(name: str, language: str, content: str, entry: str, dps: bool = True):
    from fibserve.trace import Solution

    spec = {"language": language, "target_hardware": ["sm_90a"], "entry_point": f"{entry}::run"}
    spec["destination_passing_style"] = dps
    if language == "cuda":
        spec["binding"] = "tvm-ffi"
    return Solution.model_validate(
        {"name": name, "definition": DEFINITION, "author": "eval_overhead", "spec": spec,
         "sources": [{"path": entry, "content": content}]}
    )  # fmt: skip


def overhead_run(evaluator, definition, solution, workload) -> dict:
    """One evaluation after the spare workers are warm; returns the phase split in seconds."""
    evaluator.pool.wait_spares(300)
    t0 = time.monotonic()
    report = evaluator.evaluate(definition, solution, [workload])
    wall = time.monotonic() - t0
    timings = dict(report.timings_s)
    build = report.build
    # The static analysis (fibserve.check) builds first through the cache; the evaluator's build is then a hit.
    analysis_build = getattr(report.analysis, "build", None)  # None or AnalysisUnavailable: no build
    nvcc_ms = (
        analysis_build.timings_ms.get("compile", 0.0) if analysis_build and not analysis_build.cached else 0.0
    )
    if build is not None and not build.cached:
        nvcc_ms += build.timings_ms.get("compile", 0.0)
    nvcc_s = nvcc_ms / 1e3
    gpu_s = timings.get("gpu_timed", 0.0) + timings.get("gpu_timed_reference", 0.0)
    ev = report.traces[0].evaluation if report.traces else None
    return {
        "status": ev.status.value if ev else None,
        "task_error": report.task_error,
        "build_cached": build.cached if build is not None else None,
        "wall_s": wall,
        "nvcc_s": nvcc_s,
        "gpu_timed_s": gpu_s,
        "overhead_s": wall - nvcc_s - gpu_s,
        "phases_s": timings,
        "speedup": ev.performance.speedup_factor if ev and ev.performance else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description="harness overhead and memory stability")
    parser.add_argument("--out", default=os.environ.get("OUT", "./bench-results"))
    parser.add_argument("--evaluations", type=int, default=200)
    parser.add_argument("--max-overhead-s", type=float, default=3.0)
    parser.add_argument(
        "--max-wall-s",
        type=float,
        default=None,
        help="stop the memory loop after this many seconds (results kept)",
    )
    parser.add_argument("--max-rss-growth-mb", type=float, default=64.0)
    parser.add_argument("--max-device-growth-mb", type=float, default=64.0)
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("eval_overhead: torch sees no CUDA GPU", file=sys.stderr)
        return 2
    from fibserve.bench import Evaluator
    from fibserve.bench.device import snapshot
    from fibserve.datasets import default_root
    from fibserve.trace.trace_set import TraceSet

    ts = TraceSet.load([default_root()])
    definition = ts.definition(DEFINITION)
    by_m = {w.axes["M"]: w for w in ts.workloads_for(DEFINITION)}
    kernel = (default_root().parent / "reference_kernels" / DEFINITION / "kernel.cu").read_text()
    quickstart = make_solution("hopper_reference", "cuda", kernel, "kernel.cu")
    result: dict = {"device": snapshot("cuda:0").model_dump()}

    # 1. overhead: cold build cache, then warm
    os.environ["FIBSERVE_CACHE_DIR"] = tempfile.mkdtemp(prefix="fibserve-overhead-cache-")
    with Evaluator("cuda:0") as evaluator:
        result["overhead_cold_build"] = overhead_run(evaluator, definition, quickstart, by_m[8192])
        result["overhead_warm_build"] = overhead_run(evaluator, definition, quickstart, by_m[8192])
    for key in ("overhead_cold_build", "overhead_warm_build"):
        r = result[key]
        print(f"{key}: {r['status']} wall {r['wall_s']:.2f} s = nvcc {r['nvcc_s']:.2f} + GPU timed "
              f"{r['gpu_timed_s']:.2f} + overhead {r['overhead_s']:.2f} s; phases {r['phases_s']}", flush=True)  # fmt: skip
    overhead_ok = all(
        result[k]["status"] == "PASSED" and result[k]["overhead_s"] <= args.max_overhead_s
        for k in ("overhead_cold_build", "overhead_warm_build")
    )

    # 2. memory over many evaluations
    cheap = make_solution(
        "torch_matmul", "python", (KERNELS / "gemm_torch_matmul.py").read_text(), "kernel.py", dps=False
    )
    overrides = {"warmup": 1, "iterations": 5, "trials": 1}
    samples = []
    statuses: dict[str, int] = {}
    t0 = time.monotonic()
    with Evaluator("cuda:0") as evaluator:
        for i in range(1, args.evaluations + 1):
            if args.max_wall_s is not None and time.monotonic() - t0 > args.max_wall_s:
                print(
                    f"stopping after {i - 1} evaluations: --max-wall-s {args.max_wall_s} reached", flush=True
                )
                break
            report = evaluator.evaluate(definition, cheap, [by_m[232]], overrides=overrides)
            status = (
                report.traces[0].evaluation.status.value
                if report.traces and report.traces[0].evaluation
                else "task_error"
            )
            statuses[status] = statuses.get(status, 0) + 1
            if i == 1 or i % 10 == 0:
                # sample with every spare worker up, so the reading does not depend on start-up timing
                evaluator.pool.wait_spares(300)
                snap = snapshot("cuda:0")
                samples.append({
                    "evaluation": i,
                    "rss_mb": rss_mb(),
                    "torch_allocated_mb": torch.cuda.memory_allocated() / 2**20,
                    "torch_reserved_mb": torch.cuda.memory_reserved() / 2**20,
                    "device_used_mb": snap.memory_used_mib,
                    "dev_shm_files": shm_files(),
                    "elapsed_s": time.monotonic() - t0,
                })  # fmt: skip
                print(f"evaluation {i}: {samples[-1]}", flush=True)
    # growth from the 20th evaluation (after caches and lazy imports settle) to the last
    base = next((s for s in samples if s["evaluation"] >= 20), samples[0])
    last = samples[-1]
    rss_growth = last["rss_mb"] - base["rss_mb"]
    device_growth = (last["device_used_mb"] or 0) - (base["device_used_mb"] or 0)
    done = sum(statuses.values())
    memory_ok = (
        statuses.get("PASSED", 0) == done == args.evaluations
        and rss_growth <= args.max_rss_growth_mb
        and device_growth <= args.max_device_growth_mb
    )
    result["memory"] = {
        "evaluations": done,
        "statuses": statuses,
        "rss_growth_mb": rss_growth,
        "device_growth_mb": device_growth,
        "samples": samples,
        "ok": memory_ok,
    }
    result["memory"]["dev_shm_owners"] = shm_owners()
    print(f"/dev/shm owners: {result['memory']['dev_shm_owners']}", flush=True)
    result["overhead_ok"] = overhead_ok
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval_overhead.json").write_text(json.dumps(result, indent=2))
    lines = [
        "| run | status | wall s | nvcc s | GPU timed s | overhead s | phases |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for key in ("overhead_cold_build", "overhead_warm_build"):
        r = result[key]
        phases = ", ".join(f"{k} {v:.2f}" for k, v in r["phases_s"].items())
        lines.append(f"| {key} | {r['status']} | {r['wall_s']:.2f} | {r['nvcc_s']:.2f} | {r['gpu_timed_s']:.2f} | {r['overhead_s']:.2f} | {phases} |")  # fmt: skip
    lines += [
        "",
        f"memory over {done} of {args.evaluations} evaluations: statuses {statuses}; host RSS growth {rss_growth:.1f} MiB, "
        f"device memory growth {device_growth:.1f} MiB (from evaluation {base['evaluation']} to {last['evaluation']}); "
        f"/dev/shm files {samples[0]['dev_shm_files']} -> {last['dev_shm_files']}",
        f"overhead target <= {args.max_overhead_s} s: {'PASS' if overhead_ok else 'FAIL'}; memory: {'PASS' if memory_ok else 'FAIL'}",
    ]
    (out / "eval_overhead.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-2:]))
    return 0 if overhead_ok and memory_ok else 1


if __name__ == "__main__":
    sys.exit(main())
