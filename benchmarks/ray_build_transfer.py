"""Rebuild on the lane, or ship the build through Ray's object store? The two costs, measured side by side.

A Ray lane builds a candidate on its own host (its build cache, its toolchain). The alternative the scale-out
design weighs is to build once and send the products to the lane through Ray's object store. This script
measures, for the CUDA candidates under ``tests/fibserve/kernels`` (``simt_add.cu``, ``hopper_wgmma_tma.cu``):

- ``build_s``: a fresh nvcc build with the tvm-ffi binding into an empty cache (``fibserve.build.build_solution``,
  sandboxed as in the service), and the size of what a lane loads (the shared library; PTX and cubins too);
- ``transfer_s``: the same bytes put in the object store by this driver and read by a task on a one-node local
  Ray cluster (a ``ray start`` node of the tests' :class:`RayCluster`, 1 CPU; not ``ray.init()``'s own local
  cluster, which writes a ``~/.ray/auth_token`` that later token-less drivers then fail on), median of 5 round
  trips, the task's own overhead included.

Usage (from the repository root; needs nvcc and bubblewrap)::

    uv run python benchmarks/ray_build_transfer.py

Prints one JSON line per kernel. Results and the decision: docs/scale-out.md, "A build cache per host".
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "fibserve"))
sys.path.insert(0, str(HERE.parent / "tests" / "fibserve" / "serve"))

from kernel_fixtures import KERNELS, cuda_solution  # noqa: E402
from ray_cluster import RayCluster  # noqa: E402

ROUND_TRIPS = 5


def product_bytes(result) -> bytes:
    """Every file of a build's directory, concatenated (what would have to travel)."""
    root = Path(result.build_dir)
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def main() -> None:
    import ray
    from fibserve.build import build_solution
    from fibserve.ray_driver import connect

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    cluster = RayCluster()
    cluster.add_node(cpus=1, resources={})
    connect(cluster.address, "ray-build-transfer")

    @ray.remote
    def receive(blob: bytes) -> int:
        return len(blob)

    ray.get(receive.remote(b"warm"))  # the worker process started once, outside what is timed
    try:
        for name in ("simt_add.cu", "hopper_wgmma_tma.cu"):
            solution = cuda_solution((KERNELS / name).read_text(), name=name)
            with tempfile.TemporaryDirectory(prefix="fibserve-build-") as cache:
                start = time.perf_counter()
                result = build_solution(solution, cache_dir=Path(cache))
                build_s = time.perf_counter() - start
                if not result.ok:
                    raise SystemExit(f"{name} did not build: {result.log[-2000:]}")
                blob = product_bytes(result)
            trips = []
            for _ in range(ROUND_TRIPS):
                start = time.perf_counter()
                assert ray.get(receive.remote(ray.put(blob))) == len(blob)
                trips.append(time.perf_counter() - start)
            print(
                json.dumps(
                    {
                        "benchmark": "ray_build_transfer",
                        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                        "commit": commit,
                        "kernel": name,
                        "build_s": round(build_s, 3),
                        "product_bytes": len(blob),
                        "transfer_s_median": round(statistics.median(trips), 4),
                    }
                ),
                flush=True,
            )
    finally:
        ray.shutdown()
        cluster.stop()


if __name__ == "__main__":
    main()
