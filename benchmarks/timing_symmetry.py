#!/usr/bin/env python3
"""Where does the torch.matmul-against-itself bias of issue 4 come from? Interleaved pairs of the *same*
bf16 GEMM (M=8192, N=7168, K=5120) timed by fibserve.bench's own primitives, under five arrangements:

``same-process``        both sides timed here, equal idle gaps (expect 1.000);
``gap-0.3ms``/``gap-1ms`` both here, side B waits that long with the GPU idle before its timed call: shows
                        whether the idle gap in front of a call changes its latency (the SM clock recovers
                        while the GPU idles under a power limit);
``ipc-memory``          both here, side B reads its inputs from a worker's exported (CUDA IPC) buffers:
                        shows whether where the inputs live matters;
``worker-vs-trusted``   side A in a sandbox worker (the candidate path), side B here (how the evaluator timed
                        the reference up to this benchmark);
``worker-vs-worker``    both sides in sandbox workers built the same way (symmetric processes and messages).

Each arrangement runs ``--trials`` x ``--iterations`` pairs in alternating order with cold L2, ``--repeats``
times; the ratio is the median of per-pair ``B / A`` (1.0 = no bias). Run on a GPU from the repository root::

    PYTHONPATH=packages/fibserve/src python3 benchmarks/timing_symmetry.py

Writes ``$OUT/timing_symmetry.json`` and prints a table; results are recorded in docs/gpu-results.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from fibserve.bench import candidate as cand
from fibserve.bench.device import snapshot
from fibserve.bench.timing import statistics as stats
from fibserve.bench.worker import clock
from fibserve.bench.worker.pool import WorkerPool
from fibserve.bench.worker.slots import WorkloadData, allocate_slots, fill, poison, worker_call
from fibserve.datasets import default_root
from fibserve.trace import Solution, TraceSet

N, K = 7168, 5120
DEFINITION = "gemm_n7168_k5120"
MATMUL = "import torch\n\n\ndef run(A, B):\n    return torch.matmul(A, B.T)\n"

Side = Callable[[int], float]
"""Time one call on input set ``k``; returns ms."""


def matmul_solution() -> Solution:
    """torch.matmul as a value-returning Python solution (the stability benchmark's candidate)."""
    return Solution.model_validate(
        {
            "name": "torch_matmul",
            "definition": DEFINITION,
            "author": "timing_symmetry",
            "spec": {
                "language": "python",
                "target_hardware": ["sm_90a"],
                "entry_point": "kernel.py::run",
                "destination_passing_style": False,
            },
            "sources": [{"path": "kernel.py", "content": MATMUL}],
        }
    )


def _after_gap(side: Side, k: int, gap_s: float) -> float:
    if gap_s:
        torch.cuda.synchronize()
        time.sleep(gap_s)
    return side(k)


def pairs(a: Side, b: Side, trials: int, iterations: int, sets: int, b_gap_s: float = 0.0) -> dict:
    """Alternating-order pairs; ``b_gap_s`` of host sleep (GPU idle) before every B call."""
    a_ms, b_ms = [], []
    for trial in range(trials):
        for i in range(iterations):
            k = (i + trial) % sets

            if i % 2 == 0:
                x = a(k)
                y = _after_gap(b, k, b_gap_s)
            else:
                y = _after_gap(b, k, b_gap_s)
                x = a(k)
            a_ms.append(x)
            b_ms.append(y)
    ratios = sorted(y / x for x, y in zip(a_ms, b_ms, strict=True))
    return {
        "ratio_median": stats.percentile(ratios, 50),
        "ratio_p10": stats.percentile(ratios, 10),
        "ratio_p90": stats.percentile(ratios, 90),
        "a_ms": stats.summarize(a_ms).model_dump(),
        "b_ms": stats.summarize(b_ms).model_dump(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "./bench-results"))
    parser.add_argument("--m", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=50)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("timing_symmetry: torch sees no CUDA GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda:0")
    torch.cuda.set_device(device)
    definition = TraceSet.load([default_root()]).definition(DEFINITION)
    sets = 3
    inputs = [
        {
            "A": torch.randn(args.m, K, device=device, dtype=torch.bfloat16),
            "B": torch.randn(N, K, device=device, dtype=torch.bfloat16),
        }
        for _ in range(sets)
    ]
    data = WorkloadData(
        inputs=inputs,
        references=[{} for _ in range(sets)],
        output_shapes={"C": (args.m, N)},
        output_dtypes={"C": torch.bfloat16},
    )
    flush = clock.ColdL2(device)

    def here(k: int) -> float:
        return clock.time_call(lambda: torch.matmul(inputs[k]["A"], inputs[k]["B"].T), device, flush)[0]

    prepared = cand.prepare(definition, matmul_solution(), arch="sm_90a", timeout=120)
    pool = WorkerPool(str(device), spares=0)
    print(f"sandbox: {pool.mode}", flush=True)

    def worker_side() -> Side:
        worker = pool.acquire(120)
        worker.load(prepared.load or {}, 120)
        slots = allocate_slots(worker, data, sets, device, 120)
        for k in range(sets):
            fill(slots, k, inputs[k], device)

        def call(k: int) -> float:
            poison(slots, k, device)
            request = {"slot": k, "scalars": {}, "timed": True, "cold_l2": True, "repeat": 1}
            return worker_call(worker, request, 60, "timed call")[0][0]

        call.worker = worker  # type: ignore[attr-defined]
        call.slots = slots  # type: ignore[attr-defined]
        return call

    def synced_here(k: int) -> float:
        # a worker call starts with a device synchronize in this process too (after the poison)
        torch.cuda.synchronize()
        return here(k)

    w1, w2 = worker_side(), worker_side()
    mapped = w1.slots.inputs  # type: ignore[attr-defined]

    def here_on_ipc(k: int) -> float:
        return clock.time_call(lambda: torch.matmul(mapped[k]["A"], mapped[k]["B"].T), device, flush)[0]

    for side in (here, here_on_ipc, w1, w2):  # warm up cuBLAS heuristics and clocks in every process
        for k in range(sets):
            for _ in range(3):
                side(k)
    arrangements: list[tuple[str, Side, Side, float]] = [
        ("same-process", here, here, 0.0),
        ("gap-0.3ms", here, here, 0.0003),
        ("gap-1ms", here, here, 0.001),
        ("ipc-memory", here, here_on_ipc, 0.0),
        ("worker-vs-trusted", w1, synced_here, 0.0),
        ("worker-vs-worker", w1, w2, 0.0),
    ]
    rows = []
    for repeat in range(args.repeats):
        for name, a, b, gap in arrangements:
            before = snapshot(device)
            result = pairs(a, b, args.trials, args.iterations, sets, gap)
            after = snapshot(device)
            row = {
                "arrangement": name,
                "repeat": repeat,
                **result,
                "sm_clock_mhz": [before.sm_clock_mhz, after.sm_clock_mhz],
                "power_w": [before.power_w, after.power_w],
                "temperature_c": [before.temperature_c, after.temperature_c],
            }
            rows.append(row)
            print(
                f"{name:18s} #{repeat} ratio B/A {row['ratio_median']:.4f} [{row['ratio_p10']:.4f}, "
                f"{row['ratio_p90']:.4f}]  A {row['a_ms']['median']:.4f} ms  B {row['b_ms']['median']:.4f} ms  "
                f"SM {before.sm_clock_mhz}->{after.sm_clock_mhz} MHz",
                flush=True,
            )
    for side in (w1, w2):
        del side.slots  # type: ignore[attr-defined]
        side.worker.kill(graceful=True)  # type: ignore[attr-defined]
    pool.close()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "timing_symmetry.json").write_text(json.dumps({"M": args.m, "rows": rows}, indent=2))
    print("\narrangement          ratio B/A (median of repeats)   min      max")
    for name, *_ in arrangements:
        values = sorted(r["ratio_median"] for r in rows if r["arrangement"] == name)
        print(
            f"{name:20s} {stats.percentile(values, 50):.4f}                        {values[0]:.4f}   {values[-1]:.4f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
