#!/usr/bin/env python3
"""How much host launch latency does a timed call measure? torch.matmul bf16 (N=7168, K=5120) timed two ways.

``sync-first``: overwrite the cold-L2 buffer, synchronize the device, record the start event, call, record the
end event. The GPU is idle when the start event is recorded, so the host's time to reach the kernel launch
(Python, the reference's ``run``, torch dispatch, cuBLAS heuristics) is timed as if it were GPU work.

``flush-first``: synchronize the device, enqueue the cold-L2 overwrite, record the start event, call, record the
end event. The host launches the call while the GPU is still overwriting L2, so host latency shorter than the
overwrite (about 40 us for 2 x 60 MB on an H200) is not timed; longer host work still is.

Run on a GPU from the repository root::

    PYTHONPATH=packages/fibserve/src python3 benchmarks/launch_latency.py

Prints one row per (M, way): median and p10/p90 over 200 calls, for a direct ``torch.matmul`` and for the
definition's reference called the way the evaluator calls it. Results are recorded in docs/gpu-results.md.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

import torch
from fibserve.bench.data.reference import call_reference
from fibserve.bench.worker.clock import ColdL2
from fibserve.datasets import default_root
from fibserve.trace import TraceSet

CALLS = 200


def timed(fn, flush: ColdL2, *, flush_first: bool) -> float:
    """One call in milliseconds, with the cold-L2 overwrite before (flush_first) or after the synchronize."""
    begin = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    if flush_first:
        torch.cuda.synchronize()
        flush.flush()
    else:
        flush.flush()
        torch.cuda.synchronize()
    begin.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    return begin.elapsed_time(end)


def measure(sizes: tuple[int, ...], label: str) -> None:
    """Print one row per (M, call, way) for this process."""
    definition = TraceSet.load(default_root()).definition("gemm_n7168_k5120")
    flush = ColdL2(torch.device("cuda:0"))
    for m in sizes:
        a = torch.randn(m, 5120, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(7168, 5120, device="cuda", dtype=torch.bfloat16)
        calls = {
            "direct": lambda a=a, b=b: torch.matmul(a, b.T),
            "reference": lambda a=a, b=b: call_reference(definition, {"A": a, "B": b}),
        }
        for name, fn in calls.items():
            for flush_first in (False, True):
                for _ in range(10):
                    timed(fn, flush, flush_first=flush_first)
                ms = sorted(timed(fn, flush, flush_first=flush_first) for _ in range(CALLS))
                way = "flush-first" if flush_first else "sync-first"
                p10, p90 = ms[len(ms) // 10], ms[(9 * len(ms)) // 10]
                print(
                    f"{label:<14} {m:>5} {name:<10} {way:<12} {statistics.median(ms):>10.4f} {p10:>8.4f} {p90:>8.4f}",
                    flush=True,
                )


def main() -> int:
    if not torch.cuda.is_available():
        print("no GPU", file=sys.stderr)
        return 2
    if "--child" in sys.argv:
        measure((8192,), sys.argv[-1])
        return 0
    print(f"{'process':<14} {'M':>5} {'call':<10} {'way':<12} {'median ms':>10} {'p10':>8} {'p90':>8}")
    measure((70, 8192), "this")
    # The same measurement in a child process with the sandbox worker's minimal environment, to tell a
    # per-process difference (environment, allocator state) from the ordering effect.
    keep = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME", "PYTHONPATH")
    minimal = {k: os.environ[k] for k in keep if k in os.environ}
    for label, env in (("child-full-env", dict(os.environ)), ("child-min-env", minimal)):
        subprocess.run([sys.executable, __file__, "--child", label], env=env, check=False)
    print(
        "environment:",
        {
            k: v
            for k, v in os.environ.items()
            if k.startswith(("CUDA", "CUBLAS", "PYTORCH", "TORCH", "NVIDIA"))
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
