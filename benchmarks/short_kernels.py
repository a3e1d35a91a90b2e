"""How much of a short kernel's measured latency is host time, against CUPTI's kernel durations (GPU only).

A kernel of a few microseconds is easy to mis-time: if the host has not launched it by the time the queued
work ahead of the start event finishes, the gap (Python, the binding, the launch) is timed as GPU work. Goal
(issue 35): a short kernel's latency as FIBServe reports it is within 15% of its own GPU time as CUPTI reports
it. For each case this prints, and writes to ``$OUT/short_kernels.json``:

- ``cupti_us``: the median device time of the call's kernels, from ``torch.profiler`` (CUPTI activity records),
  each call timed as a worker times it, right behind the cold-L2 gate (:func:`cupti_us`);
- ``clock_us``: :func:`fibserve.bench.worker.clock.time_call` in this process (the primitive every worker runs,
  with this device's overwrite plan), median of 100 calls; ``unreleased_us`` the same with the gate's release
  off (``FIBSERVE_L2_RELEASE=0``'s plan), and ``clock_minus_cupti_us``: what the events add to the kernel;
- ``span_us``: the same calls' CUPTI span (recorded across them, :mod:`fibserve.bench.worker.kernel_span`, through
  CUPTI's own API as a worker records them; measured for every case before the first ``torch.profiler`` window,
  whose libkineto takes CUPTI's callbacks over), what an evaluation reports on the ``device`` basis; ``call_wall_ms`` and ``span_call_wall_ms``: the host's
  wall time per timed call without and with the span (the profiler's cost);
- ``evaluator_us`` (on the ``device`` basis unless ``FIBSERVE_KERNEL_SPAN=0`` is in the environment, then on CUDA
  events): the candidate's ``latency_ms`` from a full :class:`fibserve.bench.Evaluator` evaluation (a
  Python candidate running the same op in its sandboxed worker), and ``evaluator_baseline_us``, the baseline's
  median (the same op in its twin), for the cases that are bundled definitions;
- the ratios to ``cupti_us``.

Cases: ``torch.add`` of two float32 vectors (N=1, the smallest kernel there is: what the events add to any
kernel; N=65536: ``vector_add_f32``; N=2^20), and ``torch.matmul`` of a bf16 GEMM at M=70 (``gemm_n7168_k5120``,
its smallest workload) and at M=128, N=K=1024.

    python benchmarks/short_kernels.py [--evaluations]     # on the lent H200, through scripts/gpu_validate.sh
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import torch

CALLS = 100


def cupti_us(fn: Any, flush: Any) -> float:
    """Median device time (us) of the kernels ``fn`` launches per call, CUPTI's activity records.

    ``fn()`` is timed 10 times, then ``CALLS`` times inside one ``torch.profiler`` CUDA activity window, each call
    by :func:`fibserve.bench.worker.clock.time_call` with ``flush`` (right behind the cold-L2 gate, as a worker
    times it); a call's time is the sum of its kernels' device durations between one call's gate kernels and
    the next's (no event, no host launch time). Until the eleventh session (docs/gpu-results.md) each call was
    timed alone, after a plain overwrite and a synchronize, which is not how a worker runs it. Also used by
    benchmarks/peer_flashinfer_bench.py.

    Raises:
        RuntimeError: no gate kernel was recorded (the gate needs Triton): calls cannot be told apart.
    """
    from fibserve.bench.worker.clock import time_call
    from fibserve.bench.worker.kernel_span import relative_us
    from fibserve.bench.worker.l2_state import GATE_KERNEL
    from torch.profiler import ProfilerActivity, profile

    device = torch.device("cuda", torch.cuda.current_device())
    release = (
        flush.waits,
        flush.stalls,
        flush.slow.copy(),
    )  # what the profiler's host cost does to the release stays here
    for _ in range(10):
        time_call(fn, device, flush)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            time_call(fn, device, flush)
    flush.waits, flush.stalls, flush.slow = release
    records = relative_us(
        [
            (e.name(), e.start_ns(), e.end_ns())
            for e in prof.profiler.kineto_results.events()
            if e.device_type().name == "CUDA"
        ]
    )
    per_call: list[float] = []
    for name, start, end in sorted(records, key=lambda r: r[1]):
        if name == GATE_KERNEL:  # a call's first gate kernel opens it
            if not per_call or per_call[-1] > 0:
                per_call.append(0.0)
        elif per_call:
            per_call[-1] += end - start
    if not per_call:
        raise RuntimeError("no gate kernel in the records: cupti_us needs the cold-L2 gate (Triton)")
    return statistics.median([t for t in per_call if t > 0] or [float("nan")])


def _clock_us(fn: Any, flush: Any, device: torch.device, span: bool = False) -> tuple[float, float, float]:
    """Medians over ``CALLS`` calls of :func:`~fibserve.bench.worker.clock.time_call`: the events' time (us),
    the CUPTI span (us, NaN without ``span``) and the host's wall time per call (ms, with the recording: what
    CUPTI costs each call). With ``span`` the calls run inside one
    :class:`~fibserve.bench.worker.kernel_span.SpanRecording`, as a worker's calls of one trial do."""
    from fibserve.bench.worker.clock import time_call
    from fibserve.bench.worker.kernel_span import SpanRecording
    from fibserve.bench.worker.l2_state import GATE_KERNEL

    for _ in range(10):
        time_call(fn, device, flush)
    recording = SpanRecording()
    if span:
        recording.start(flush.plan.passes)
    events, walls = [], []
    for _ in range(CALLS):
        started = time.perf_counter()
        timed = time_call(fn, device, flush, mark=recording.on)
        walls.append((time.perf_counter() - started) * 1e3)
        recording.add(timed.attempts)
        events.append(timed.ms * 1e3)
    spans = [s * 1e3 if s is not None else float("nan") for s in recording.finish(GATE_KERNEL)] or [
        float("nan")
    ]
    return statistics.median(events), statistics.median(spans), statistics.median(walls)


def _evaluated(definition_name: str, workload_filter: Any, solution: Any) -> tuple[float, float] | None:
    """``(candidate us, baseline us)`` of one evaluation of ``solution`` on the matching workload."""
    from fibserve.bench import Evaluator
    from fibserve.datasets import load_trace_set

    trace_set = load_trace_set()
    definition = trace_set.definition(definition_name)
    workloads = [w for w in trace_set.workloads_for(definition_name) if workload_filter(w)][:1]
    with Evaluator("cuda:0") as evaluator:
        report = evaluator.evaluate(
            definition, solution, workloads, baseline=trace_set.baseline_for(definition_name)
        )
    evaluation = report.traces[0].evaluation if report.traces else None
    if evaluation is None or evaluation.performance is None or evaluation.performance.latency_ms is None:
        print(f"  {definition_name}: no timed result ({report.task_error or evaluation})", flush=True)
        return None
    performance = evaluation.performance
    return performance.latency_ms * 1e3, (performance.reference_latency_ms or float("nan")) * 1e3


def _python_solution(definition: str, source: str) -> Any:
    from fibserve.trace import Solution

    return Solution.model_validate(
        {
            "name": f"{definition}_short_kernel_probe",
            "definition": definition,
            "author": "benchmarks/short_kernels.py",
            "spec": {"language": "python", "target_hardware": ["sm_90a"], "entry_point": "k.py::run",
                     "destination_passing_style": False},
            "sources": [{"path": "k.py", "content": source}],
        }
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evaluations", action="store_true", help="also run full evaluations (slower)")
    args = parser.parse_args()
    from fibserve.bench.worker.clock import ColdL2, overwrite_plan

    device = torch.device("cuda:0")
    torch.cuda.set_device(device)
    flush = ColdL2(device, overwrite_plan(str(device)))
    unreleased = ColdL2(device, flush.plan._replace(release=False))
    rows = []
    cases = {
        "add f32 N=1": lambda: (torch.randn(1, device=device), torch.randn(1, device=device)),
        "add f32 N=65536": lambda: (torch.randn(65536, device=device), torch.randn(65536, device=device)),
        "add f32 N=2^20": lambda: (torch.randn(1 << 20, device=device), torch.randn(1 << 20, device=device)),
        "matmul bf16 M=70 N=7168 K=5120": lambda: (
            torch.randn(70, 5120, device=device, dtype=torch.bfloat16),
            torch.randn(7168, 5120, device=device, dtype=torch.bfloat16),
        ),
        "matmul bf16 M=128 N=K=1024": lambda: (
            torch.randn(128, 1024, device=device, dtype=torch.bfloat16),
            torch.randn(1024, 1024, device=device, dtype=torch.bfloat16),
        ),
    }
    calls = {}
    for name, make in cases.items():
        a, b = make()
        out = (
            torch.empty_like(a)
            if name.startswith("add")
            else torch.empty(a.shape[0], b.shape[0], device=device, dtype=a.dtype)
        )
        fn = (
            (lambda a=a, b=b, out=out: torch.add(a, b, out=out))
            if name.startswith("add")
            else (lambda a=a, b=b, out=out: torch.matmul(a, b.T, out=out))
        )
        calls[name] = fn
    # every span before the first torch.profiler window: libkineto's CUPTI callbacks, once registered, replace the
    # worker's own (fibserve.bench.worker.cupti), which then record nothing in this process
    spans = {name: _clock_us(fn, flush, device, span=True) for name, fn in calls.items()}
    for name, fn in calls.items():
        row: dict[str, Any] = {
            "case": name,
            "cupti_us": cupti_us(fn, flush),
            "released": flush.waits,
        }
        row["clock_us"], _, row["call_wall_ms"] = _clock_us(fn, flush, device)
        row["unreleased_us"] = _clock_us(fn, unreleased, device)[0]
        _, row["span_us"], row["span_call_wall_ms"] = spans[name]
        row["span_over_cupti"] = row["span_us"] / row["cupti_us"]
        row["clock_over_cupti"] = row["clock_us"] / row["cupti_us"]
        row["clock_minus_cupti_us"] = row["clock_us"] - row["cupti_us"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.evaluations:
        add = "import torch\n\n\ndef run(x, y):\n    return torch.add(x, y)\n"
        gemm = "import torch\n\n\ndef run(A, B):\n    return torch.matmul(A, B.T)\n"
        for case, definition, pick, source in (
            ("add f32 N=65536", "vector_add_f32", lambda w: w.axes["N"] == 65536, add),
            ("matmul bf16 M=70 N=7168 K=5120", "gemm_n7168_k5120", lambda w: w.axes["M"] == 70, gemm),
        ):
            measured = _evaluated(definition, pick, _python_solution(definition, source))
            row = next(r for r in rows if r["case"] == case)
            if measured is not None:
                row["evaluator_us"], row["evaluator_baseline_us"] = measured
                row["evaluator_over_cupti"] = measured[0] / row["cupti_us"]
                row["baseline_over_cupti"] = measured[1] / row["cupti_us"]
            print(json.dumps(row), flush=True)
    out_dir = Path(os.environ.get("OUT", "."))
    (out_dir / "short_kernels.json").write_text(json.dumps(rows, indent=2))
    print(
        "\n| case | CUPTI us | clock us | clock/CUPTI | clock - CUPTI us | span us | span/CUPTI | call wall ms "
        "(with span) | unreleased us | evaluator us | evaluator/CUPTI | baseline us |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['case']} | {r['cupti_us']:.2f} | {r['clock_us']:.2f} | {r['clock_over_cupti']:.3f} | "
            f"{r['clock_minus_cupti_us']:.2f} | {r['span_us']:.2f} | {r['span_over_cupti']:.3f} | "
            f"{r['call_wall_ms']:.3f} ({r['span_call_wall_ms']:.3f}) | {r['unreleased_us']:.2f} | "
            f"{r.get('evaluator_us', float('nan')):.2f} | {r.get('evaluator_over_cupti', float('nan')):.3f} | "
            f"{r.get('evaluator_baseline_us', float('nan')):.2f} |"
        )


if __name__ == "__main__":
    main()
