"""Builds beside the lane: how long a lane waits for nvcc, with and without the build-ahead pool.

Usage (from the repository root; needs nvcc and bubblewrap)::

    uv run python benchmarks/build_ahead.py                                  # CPU lane, workers 0 then 1
    uv run python benchmarks/build_ahead.py --devices cuda:0 --build-workers 0,8 --cuda 50 --other 0

For each ``--build-workers`` value, starts ``fibserve serve`` on 127.0.0.1 (free port, temporary state
directory, an empty build cache of its own) and queues at once, through ``POST /evaluate/batch``, ``--cuda``
CUDA candidates of ``vector_add_f32`` with distinct sources (each one nvcc compile: a comment tells them
apart) interleaved with ``--other`` float32 Triton ones (one source, built in milliseconds; on a CPU lane they
run under the Triton interpreter in a sandboxed worker, so the lane has work of its own while nvcc runs).
Collects every answer (``FIBServeClient.evaluate_many``) and prints one JSON line per run:

- ``lane_build_wait_s``: what the lane spent in the static analysis and the build of the CUDA candidates
  (``timings_s.analysis + timings_s.build`` of each answer, summed): its time waiting for nvcc, directly or on
  the lock of a build the pool was running; ``cuda_service_s``: per CUDA task, ``finished_at - started_at``;
- ``lane_busy_s``: the lane's whole time on tasks (sum of ``finished_at - started_at``), ``wall_s``: first
  submission to last answer (server timestamps), ``evaluations_per_minute`` over it;
- ``built_cached``: how many CUDA answers found their build in the cache (built ahead) when the lane's static
  analysis asked for it, out of ``--cuda`` (the lane's second build, for loading, is always a cache hit);
- the statuses seen, the CPU count and the 1-minute load average at the end.

On a CPU lane a CUDA candidate is built and analysed but not executed, so without the pool its whole lane time
is nvcc; with it, the lane runs the Triton candidates while the pool compiles. On a GPU the same runs show the
GPU lane's wait (``--other 0``: every candidate CUDA). Results: ``benchmarks/build_ahead.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from fibserve.analysis.report import Analysis
from fibserve.client import BatchWaitTimeout, FIBServeClient
from serve_throughput import WORKLOAD, percentiles, solution, start_server, status_counts, stop_server


def candidates(cuda: int, other: int, salt: str) -> list[dict]:
    """``cuda`` CUDA candidates with distinct sources and ``other`` Triton ones, interleaved, CUDA first."""
    made = []
    for i in range(max(cuda, other)):
        if i < cuda:
            item = solution("cuda")
            item["name"] = f"cuda_{i}"
            item["sources"][0]["content"] += f"// candidate {i} of run {salt}\n"
            made.append(item)
        if i < other:
            item = solution("triton")
            item["name"] = f"triton_{i}"
            made.append(item)
    return made


def run_once(workers: int, args: argparse.Namespace) -> dict:
    """One server with ``--build-workers workers``, one burst, its numbers."""
    with tempfile.TemporaryDirectory(prefix="fibserve-build-ahead-") as tmp:
        os.environ["FIBSERVE_CACHE_DIR"] = str(Path(tmp) / "cache")  # cold: every CUDA candidate compiles
        proc, url = start_server(Path(tmp) / "state", args.devices, ["--build-workers", str(workers)])
        try:
            batch = candidates(args.cuda, args.other, f"{workers}-{time.time_ns()}")
            answers, unfinished = [], 0
            with FIBServeClient(url, timeout=120) as client:
                try:
                    for result in client.evaluate_many(batch, [WORKLOAD], wait_timeout=args.max_wall_s):
                        answers.append(result.answer)
                except BatchWaitTimeout as timeout:  # the numbers of what finished, and how many did not
                    unfinished = len(timeout.task_ids)
                lanes = [w.device for w in client.health().workers]
        finally:
            stop_server(proc)
    cuda = [a for a in answers if a.solution.startswith("cuda_")]
    service = [(a.finished_at or 0.0) - (a.started_at or 0.0) for a in answers]
    wall = max(a.finished_at or 0.0 for a in answers) - min(a.created_at for a in answers) if answers else 0.0
    return {
        "benchmark": "build_ahead",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "build_workers": workers,
        "lanes": lanes,
        "cuda": args.cuda,
        "other": args.other,
        "finished": len(answers),
        "unfinished_at_max_wall": unfinished,
        "lane_build_wait_s": round(
            sum(
                (a.timings_s or {}).get("analysis", 0.0) + (a.timings_s or {}).get("build", 0.0) for a in cuda
            ),
            2,
        ),
        "cuda_service_s": percentiles([(a.finished_at or 0.0) - (a.started_at or 0.0) for a in cuda])
        if cuda
        else None,
        "lane_busy_s": round(sum(service), 2),
        "wall_s": round(wall, 2),
        "evaluations_per_minute": round(len(answers) / wall * 60, 2) if wall else 0.0,
        "built_cached": sum(
            1
            for a in cuda
            if isinstance(a.analysis, Analysis) and a.analysis.build and a.analysis.build.cached
        ),
        "statuses": status_counts(answers),
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--devices", default="cpu", help="passed to fibserve serve (default: cpu)")
    parser.add_argument(
        "--build-workers", default="0,1", help="comma-separated values to compare (default 0,1)"
    )
    parser.add_argument("--cuda", type=int, default=6, help="CUDA candidates, each with its own source")
    parser.add_argument("--other", type=int, default=6, help="float32 Triton candidates between them")
    parser.add_argument("--max-wall-s", type=float, default=1200.0, help="give up waiting after this long")
    args = parser.parse_args()
    for workers in (int(w) for w in args.build_workers.split(",")):
        print(json.dumps(run_once(workers, args)), flush=True)


if __name__ == "__main__":
    main()
