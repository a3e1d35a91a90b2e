#!/usr/bin/env python3
"""How long a sandbox worker takes to start, forked from the warm zygote, against a fresh sandbox (issue 29).

1. Forked: ``--workers`` (default 30) workers started one after another on ``--device`` (``cpu``, or
   ``cuda:0``, where start includes the CUDA context and the cold-L2 gate kernel), each timed from the request
   to its ready message (:meth:`fibserve.bench.worker.pool.WorkerProcess.wait_ready`), then discarded. The first
   start also starts the zygote and is reported on its own. Goal: p50 under 100 ms. The ready message's own
   steps (``start_ms``: the CUDA context, the gate kernel, CUPTI unless ``FIBSERVE_KERNEL_SPAN=0``) are reported
   too, and how many workers took the gate kernel's build from the zygote's seed.
2. Fresh: ``--fresh`` (default 5) bubblewrap sandboxes running a new Python that imports torch and the worker
   module, which is what every worker start cost before the zygote.
3. Evaluations: ``--evaluations`` (default 20) evaluations of a Python vector add on ``--device`` by one Evaluator
   with a warm spare: per minute, and what each waited for its candidate's worker (the ``worker_start`` phase:
   the spare's start where it was not ready yet) and, on a GPU, for its timing twin (``reference_worker``), and
   the p50 of every phase of the reports' ``timings_s`` (a phase an evaluation did not have counts as 0).

    OUT=./bench-results uv run python benchmarks/worker_start.py [--device cuda:0]

Writes ``$OUT/worker_start.json`` and ``$OUT/worker_start.md``; exit code 0 when the goal holds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

GOAL_P50_MS = 100.0


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by linear interpolation (numpy's default method)."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def forked_starts(device: str, count: int) -> tuple[float, list[float], list[dict]]:
    """The first start (zygote included) and the next ``count`` starts, in ms, and every start's ready message
    (its ``start_ms`` steps and ``gate_seeded``)."""
    from fibserve.bench.worker.pool import WorkerProcess

    times, ready = [], []
    for index in range(count + 1):
        start = time.perf_counter()
        worker = WorkerProcess(device)
        forked = time.perf_counter()
        ready.append(worker.wait_ready(300))
        times.append((time.perf_counter() - start) * 1e3)
        steps = ", ".join(f"{name} {ms:.1f}" for name, ms in ready[-1].get("start_ms", {}).items())
        print(
            f"start {index}: {times[-1]:.1f} ms (fork {(forked - start) * 1e3:.1f} ms"
            f"{'; ' + steps if steps else ''}; gate seeded: {ready[-1].get('gate_seeded')})",
            flush=True,
        )
        worker.kill()
    return times[0], times[1:], ready


def step_medians(ready: list[dict]) -> dict[str, float]:
    """The median of each start step (ms) over the forked starts' ready messages."""
    names = sorted({name for message in ready for name in message.get("start_ms", {})})
    return {
        name: statistics.median(m["start_ms"][name] for m in ready if name in m.get("start_ms", {}))
        for name in names
    }


def fresh_starts(device: str, count: int) -> list[float]:
    """Fresh sandboxes importing torch and the worker module (the start before the zygote), in ms."""
    from fibserve.sandbox import WORKER_LIMITS, Mounts
    from fibserve.sandbox import run as sandboxed

    code = "import torch, fibserve.bench.worker.entry"
    if device.startswith("cuda"):
        code += "; torch.zeros(1, device='cuda')"
    times = []
    for _ in range(count):
        start = time.perf_counter()
        done = sandboxed(
            [sys.executable, "-c", code],
            mounts=Mounts(python=True, gpu=device.startswith("cuda")),
            limits=WORKER_LIMITS,
            timeout_s=300,
        )
        times.append((time.perf_counter() - start) * 1e3)
        if done.returncode != 0:
            raise SystemExit(f"the fresh sandbox failed: {done.output[-2000:]}")
    return times


def evaluations(device: str, count: int) -> dict:
    """``count`` evaluations of a Python vector add on ``device`` by one Evaluator with a warm spare: per minute,
    the statuses, and the p50 of the ``worker_start`` and ``reference_worker`` phases (ms; the latter 0 on CPU,
    where nothing is timed), and of every phase of the report's ``timings_s`` (ms): where an evaluation's
    time goes."""
    from fibserve.bench import Evaluator
    from fibserve.datasets import default_root
    from fibserve.trace import Solution, TraceSet

    trace_set = TraceSet.load([default_root()])
    definition = trace_set.definition("vector_add_f32")
    workload = min(trace_set.workloads_for("vector_add_f32"), key=lambda w: w.axes["N"])
    source = "def run(x, y, z):\n    z.copy_(x + y)\n"
    phases: dict[str, list[float]] = {"worker_start": [], "reference_worker": []}
    every_phase: list[dict[str, float]] = []
    statuses = []
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.yaml"
        config.write_text("defaults:\n  enforce_source_policy: false\n")
        with Evaluator(device, warm_spare=True, config_path=config) as evaluator:
            began = time.perf_counter()
            for index in range(count):
                solution = Solution.model_validate(
                    {
                        "name": f"add_{index}",
                        "definition": "vector_add_f32",
                        "author": "benchmark",
                        "spec": {
                            "language": "python",
                            "target_hardware": ["cpu" if device == "cpu" else "sm_90a"],
                            "entry_point": "k.py::run",
                        },
                        "sources": [{"path": "k.py", "content": source + f"# {index}\n"}],
                    }
                )
                report = evaluator.evaluate(definition, solution, [workload])
                statuses.append(report.traces[0].evaluation.status.value)
                for phase, kept in phases.items():
                    kept.append(report.timings_s.get(phase, 0.0) * 1e3)
                every_phase.append(report.timings_s)
            wall = time.perf_counter() - began
    return {
        "device": device,
        "evaluations": count,
        "statuses": {status: statuses.count(status) for status in set(statuses)},
        "per_minute": count / wall * 60,
        "wall_s": wall,
        "worker_start_phase_ms_p50": statistics.median(phases["worker_start"]),
        "reference_worker_phase_ms_p50": statistics.median(phases["reference_worker"]),
        "phase_ms_p50": {
            name: statistics.median(t.get(name, 0.0) * 1e3 for t in every_phase)
            for name in sorted({name for t in every_phase for name in t})
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda:N (default cpu)")
    parser.add_argument("--workers", type=int, default=30, help="forked workers to time (default 30)")
    parser.add_argument("--fresh", type=int, default=5, help="fresh sandboxes to time (default 5)")
    parser.add_argument(
        "--evaluations", type=int, default=20, help="evaluations on --device (0 skips; default 20)"
    )
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", "bench-results"))
    out.mkdir(parents=True, exist_ok=True)

    first, forked, ready = forked_starts(args.device, args.workers)
    steps = step_medians(ready[1:])
    seeded = sum(bool(message.get("gate_seeded")) for message in ready[1:])
    fresh = fresh_starts(args.device, args.fresh) if args.fresh else []
    evaluated = evaluations(args.device, args.evaluations) if args.evaluations else None
    p50 = statistics.median(forked)
    result = {
        "device": args.device,
        "cores": os.cpu_count(),
        "load_average": os.getloadavg(),
        "first_start_ms": first,
        "forked_ms": {"p50": p50, "p90": percentile(forked, 0.9), "max": max(forked), "count": len(forked)},
        "forked_step_ms_p50": steps,
        "gate_seeded": seeded,
        "fresh_ms": {"p50": statistics.median(fresh), "max": max(fresh), "count": len(fresh)}
        if fresh
        else None,
        "evaluations": evaluated,
        "goal_p50_ms": GOAL_P50_MS,
        "pass": p50 < GOAL_P50_MS,
    }
    (out / "worker_start.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        f"# Worker start on {args.device} ({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})",
        "",
        f"- first start (zygote included): {first:.0f} ms",
        f"- forked: p50 {p50:.1f} ms, p90 {result['forked_ms']['p90']:.1f} ms, max {max(forked):.1f} ms"
        f" over {len(forked)} (goal p50 < {GOAL_P50_MS:.0f} ms: {'PASS' if result['pass'] else 'FAIL'})",
    ]
    if steps:
        lines.append(
            "- forked, the worker's own steps (p50): "
            + ", ".join(f"{name} {ms:.1f} ms" for name, ms in steps.items())
            + f"; gate kernel from the zygote's seed in {seeded} of {len(forked)}"
        )
    if fresh:
        lines.append(
            f"- fresh sandbox importing torch: p50 {statistics.median(fresh):.0f} ms over {len(fresh)}"
        )
    if evaluated:
        lines.append(
            f"- evaluations on {args.device}: {evaluated['per_minute']:.1f} per minute over "
            f"{evaluated['evaluations']} ({evaluated['statuses']}), waiting for the candidate's worker p50 "
            f"{evaluated['worker_start_phase_ms_p50']:.1f} ms and for the timing twin p50 "
            f"{evaluated['reference_worker_phase_ms_p50']:.1f} ms"
        )
        lines.append(
            "- each evaluation's phases (p50, ms): "
            + ", ".join(f"{name} {ms:.1f}" for name, ms in evaluated["phase_ms_p50"].items())
        )
    (out / "worker_start.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if result["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
