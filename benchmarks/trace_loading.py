"""Time loading a large trace set: 1,000 definitions and 100,000 workloads (target: under 2 s).

Usage (from the repository root)::

    uv run python benchmarks/trace_loading.py [--definitions 1000] [--workloads 100000] [--repeat 3]

Writes the trace set into a temporary folder (not timed), then times ``TraceSet.load`` (median of
``--repeat`` runs; wall clock and process CPU time, seconds). Prints one JSON line with the numbers and the
1-minute load average, since other processes on a 2-core machine inflate the wall clock.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from fibserve.trace import AxisConst, AxisVar, Definition, RandomInput, TensorSpec, Trace, Workload
from fibserve.trace.trace_set import TraceSet

REFERENCE = "import torch\n\n\ndef run(A, B):\n    return torch.matmul(A, B.t())\n"


def write_trace_set(root: Path, n_definitions: int, n_workloads: int) -> None:
    """GEMM-like definitions (var M, const N and K) with ``n_workloads`` spread evenly over them."""
    per_definition = max(1, n_workloads // n_definitions)
    (root / "definitions").mkdir(parents=True)
    (root / "workloads").mkdir(parents=True)
    for i in range(n_definitions):
        name = f"gemm_bench_{i:04d}"
        definition = Definition(
            name=name,
            op_type="gemm",
            description="Synthetic definition for the loading benchmark.",
            axes={"M": AxisVar(), "N": AxisConst(value=128 + i), "K": AxisConst(value=256)},
            inputs={
                "A": TensorSpec(shape=["M", "K"], dtype="bfloat16"),
                "B": TensorSpec(shape=["N", "K"], dtype="bfloat16"),
            },
            outputs={"C": TensorSpec(shape=["M", "N"], dtype="bfloat16")},
            reference=REFERENCE,
        )
        (root / "definitions" / f"{name}.json").write_text(definition.model_dump_json(indent=2))
        lines = []
        for j in range(per_definition):
            workload = Workload(
                uuid=str(uuid.UUID(int=i * per_definition + j + 1)),
                axes={"M": j + 1},
                inputs={"A": RandomInput(), "B": RandomInput()},
            )
            lines.append(Trace(definition=name, workload=workload).model_dump_json())
        (root / "workloads" / f"{name}.jsonl").write_text("\n".join(lines) + "\n")


def main() -> None:
    """Generate, time, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--definitions", type=int, default=1000)
    parser.add_argument("--workloads", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        write_trace_set(root, args.definitions, args.workloads)
        generate_s = time.perf_counter() - start
        times, cpu_times = [], []
        load_before = os.getloadavg()[0]
        for _ in range(args.repeat):
            start, cpu_start = time.perf_counter(), time.process_time()
            trace_set = TraceSet.load(root)
            times.append(time.perf_counter() - start)
            cpu_times.append(time.process_time() - cpu_start)
        counts = trace_set.counts()
    print(
        json.dumps(
            {
                "definitions": counts["definitions"],
                "workloads": counts["workloads"],
                "errors": counts["errors"],
                "generate_s": round(generate_s, 3),
                "load_s_median": round(statistics.median(times), 3),
                "load_s_all": [round(t, 3) for t in times],
                "load_cpu_s_median": round(statistics.median(cpu_times), 3),
                "loadavg_1min_before": round(load_before, 2),
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "machine": platform.machine(),
            }
        )
    )


if __name__ == "__main__":
    main()
