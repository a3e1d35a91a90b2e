#!/usr/bin/env python3
"""Speedup stability of fibserve.bench on the GPU (issue 4, "Performance").

torch.matmul in bfloat16 at M=8192, N=7168, K=5120 (workload 94920358 of gemm_n7168_k5120) is evaluated as a
Python candidate against its own reference ``--repeats`` times (default 10) with the default configuration
(cold L2, warmup 10, iterations 50, trials 3, interleaved pairs). A trustworthy harness reports every
speedup within [0.99, 1.01]. For contrast it also reports the ratio of the two medians (what a cached or
separately timed baseline would give), the latency spread and the SM clock, power and temperature at the
start and end of each measurement.

    OUT=./bench-results python3 benchmarks/eval_stability.py

Writes ``$OUT/eval_stability.json`` and ``$OUT/eval_stability.md``; exit code 0 when every speedup is within
the band, 1 otherwise, 2 without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CANDIDATE = ROOT / "tests" / "fibserve" / "bench" / "kernels" / "gemm_torch_matmul.py"
DEFINITION = "gemm_n7168_k5120"


def main() -> int:
    parser = argparse.ArgumentParser(description="speedup stability of torch.matmul against itself")
    parser.add_argument("--out", default=os.environ.get("OUT", "./bench-results"))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--band", type=float, default=0.01, help="allowed |speedup - 1|")
    parser.add_argument("--m", type=int, default=8192)
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("eval_stability: torch sees no CUDA GPU", file=sys.stderr)
        return 2
    from fibserve.bench import Evaluator
    from fibserve.datasets import default_root
    from fibserve.trace import Solution
    from fibserve.trace.trace_set import TraceSet

    ts = TraceSet.load([default_root()])
    definition = ts.definition(DEFINITION)
    workload = next(w for w in ts.workloads_for(DEFINITION) if w.axes["M"] == args.m)
    solution = Solution.model_validate(
        {
            "name": "torch_matmul",
            "definition": DEFINITION,
            "author": "eval_stability",
            "spec": {
                "language": "python",
                "target_hardware": ["sm_90a"],
                "entry_point": "kernel.py::run",
                "destination_passing_style": False,
            },
            "sources": [{"path": "kernel.py", "content": CANDIDATE.read_text()}],
        }
    )
    rows = []
    with Evaluator("cuda:0") as evaluator:
        for i in range(args.repeats):
            report = evaluator.evaluate(definition, solution, [workload])
            ev = report.traces[0].evaluation if report.traces else None
            if ev is None or ev.performance is None:
                rows.append(
                    {"run": i, "error": report.task_error or (ev.log[-500:] if ev else "no evaluation")}
                )
                print(f"run {i}: FAILED {rows[-1]['error']}", flush=True)
                continue
            extra = ev.performance.extra or {}
            cand, ref = extra["candidate_ms"], extra["reference_ms"]
            row = {
                "run": i,
                "speedup": ev.performance.speedup_factor,
                "speedup_p10": extra["speedup_p10"],
                "speedup_p90": extra["speedup_p90"],
                "ratio_of_medians": ref["median"] / cand["median"],
                "candidate_ms": cand,
                "reference_ms": ref,
                "timing_basis": extra.get("timing_basis"),
                "unexplained_round_trip_ms": extra.get("unexplained_round_trip_ms"),
                "sm_clock_start": extra["device_start"].get("sm_clock_mhz"),
                "sm_clock_end": extra["device_end"].get("sm_clock_mhz"),
                "power_start_w": extra["device_start"].get("power_w"),
                "power_end_w": extra["device_end"].get("power_w"),
                "temp_start_c": extra["device_start"].get("temperature_c"),
                "temp_end_c": extra["device_end"].get("temperature_c"),
            }
            rows.append(row)
            print(
                f"run {i}: speedup {row['speedup']:.4f} (pairs p10 {row['speedup_p10']:.4f} p90 "
                f"{row['speedup_p90']:.4f}), ratio of medians {row['ratio_of_medians']:.4f}, candidate "
                f"{cand['median']:.4f} ms [{cand['p10']:.4f}, {cand['p90']:.4f}], reference {ref['median']:.4f} ms, "
                f"SM clock {row['sm_clock_start']} -> {row['sm_clock_end']} MHz, unexplained round trip "
                f"{row['unexplained_round_trip_ms']} ms",
                flush=True,
            )
    speedups = [r["speedup"] for r in rows if "speedup" in r]
    ok = len(speedups) == args.repeats and all(abs(s - 1.0) <= args.band for s in speedups)
    result = {
        "definition": DEFINITION,
        "workload": workload.uuid,
        "M": args.m,
        "band": [1 - args.band, 1 + args.band],
        "speedup_min": min(speedups, default=None),
        "speedup_max": max(speedups, default=None),
        "all_within_band": ok,
        "runs": rows,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval_stability.json").write_text(json.dumps(result, indent=2))
    lines = [
        f"torch.matmul vs its reference, {DEFINITION} M={args.m}: speedups {result['speedup_min']} .. "
        f"{result['speedup_max']} (band {result['band']}): {'PASS' if ok else 'FAIL'}",
        "",
        "| run | speedup | pairs p10 | pairs p90 | ratio of medians | candidate ms (p10-p90) | reference ms | SM MHz start/end | W start/end | C start/end |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if "speedup" not in r:
            lines.append(f"| {r['run']} | error: {r['error'][:80]} | | | | | | | | |")
            continue
        c, f = r["candidate_ms"], r["reference_ms"]
        lines.append(
            f"| {r['run']} | {r['speedup']:.4f} | {r['speedup_p10']:.4f} | {r['speedup_p90']:.4f} | "
            f"{r['ratio_of_medians']:.4f} | {c['median']:.4f} ({c['p10']:.4f}-{c['p90']:.4f}) | {f['median']:.4f} | "
            f"{r['sm_clock_start']}/{r['sm_clock_end']} | {r['power_start_w']}/{r['power_end_w']} | "
            f"{r['temp_start_c']}/{r['temp_end_c']} |"
        )
    (out / "eval_stability.md").write_text("\n".join(lines) + "\n")
    print(lines[0])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
