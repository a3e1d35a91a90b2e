"""FIBServe throughput: evaluations per minute, submit-to-result latency, idle server memory.

Usage (from the repository root)::

    uv run python benchmarks/serve_throughput.py [--requests 200] [--devices cuda:0] [--language cuda]
    uv run python benchmarks/serve_throughput.py --devices cpu --language python --requests 20   # no GPU

Starts ``fibserve serve`` on 127.0.0.1 (free port, temporary state directory) on the bundled trace set,
waits until it is idle, reads its resident memory, then submits ``--requests`` evaluations of a fast kernel
(``vector_add_f32``, N=1024: the smallest bundled workload) all at once from 16 client threads, and waits
for every answer with batched long polls. Prints one JSON line:

- ``evaluations_per_minute``: finished / (last finish - first submit) * 60, from the server's timestamps
  (``finished`` is less than ``requests`` only when ``--max-wall-s`` ran out and the rest was cancelled);
- ``submit_to_result_s``: p50/p95/max of ``finished_at - created_at`` per task (queueing included, since the
  burst arrives at once) and ``service_s``: the same for ``finished_at - started_at`` (one evaluation);
- ``idle_rss_mib``: the server process alone and with its children (the Evaluator's warm spare worker),
  before any request; ``rss_after_mib`` after the run;
- ``phase_ms_p50``: the p50 over the finished answers of each phase of the evaluation (``timings_s``: build,
  load, correctness, timing, ...; a phase an answer did not have counts as 0), so that the service time
  can be read against what the evaluation itself spent;
- the statuses seen (all must be PASSED for the numbers to mean anything) and the 1-minute load average.

Languages: ``cuda`` (tvm-ffi, needs nvcc; built once, then served from the build cache), ``triton``
(float32; CPU mode runs the Triton interpreter), ``python`` (a plain PyTorch baseline), ``broken`` (does not
parse: measures the service's own overhead, since no worker starts).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import httpx
from fibserve.api import TaskAnswer
from fibserve.client import FIBServeClient

WORKLOAD = "fea76944-a9e9-5a63-b79f-53eb46ecdafd"
"""vector_add_f32 with N=1024 in the bundled trace set."""

SOURCES = {
    "cuda": (
        "kernel.cu",
        """#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <cuda_runtime.h>

__global__ void vector_add_kernel(const float* x, const float* y, float* z, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) z[i] = x[i] + y[i];
}

void run(tvm::ffi::TensorView x, tvm::ffi::TensorView y, tvm::ffi::TensorView z) {
  int64_t n = x.size(0);
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  vector_add_kernel<<<(n + 255) / 256, 256, 0, stream>>>(static_cast<const float*>(x.data_ptr()),
      static_cast<const float*>(y.data_ptr()), static_cast<float*>(z.data_ptr()), n);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
""",
    ),
    "triton": (
        "kernel.py",
        """import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(z_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def run(x, y, z):
    _add[(triton.cdiv(x.numel(), 1024),)](x, y, z, x.numel(), BLOCK=1024)
""",
    ),
    "python": ("kernel.py", "def run(x, y, z):\n    z.copy_(x + y)\n"),
    # Does not parse: the Evaluator answers COMPILE_ERROR without starting a worker, so the numbers measure
    # the service itself (HTTP, task store, queue, lanes, long polls), not kernels.
    "broken": ("kernel.py", "def run(x, y, z:\n"),
}


def solution(language: str) -> dict:
    """The benchmark's candidate for ``vector_add_f32`` in ``language``."""
    path, content = SOURCES[language]
    spec = {
        "language": "python" if language == "broken" else language,
        "target_hardware": ["NVIDIA_H200"],
        "entry_point": f"{path}::run",
    }
    if language == "cuda":
        spec["binding"] = "tvm-ffi"
    return {
        "name": f"bench_vector_add_{language}",
        "definition": "vector_add_f32",
        "author": "benchmarks/serve_throughput.py",
        "spec": spec,
        "sources": [{"path": path, "content": content}],
    }


def shm_file_count() -> int:
    """Files in /dev/shm (CUDA IPC leftovers of retired workers would accumulate there); -1 without it."""
    try:
        return len(os.listdir("/dev/shm"))
    except OSError:
        return -1


def rss_mib(pid: int, children: bool = False) -> float:
    """Resident memory of ``pid`` (and, with ``children``, of all its descendants) in MiB, from /proc."""
    pids = [pid]
    if children:
        queue = [pid]
        while queue:
            parent = queue.pop()
            kids = []
            # Children of every thread: the lanes (threads) start the Evaluator's worker processes.
            for task in Path(f"/proc/{parent}/task").glob("*"):
                with contextlib.suppress(OSError):
                    kids += (task / "children").read_text().split()
            pids += [int(k) for k in kids]
            queue += [int(k) for k in kids]
    total_kib = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kib += int(line.split()[1])
        except OSError:
            pass
    return total_kib / 1024


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p95 and max of ``values`` (seconds), rounded to milliseconds."""
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 3), "p95": round(p95, 3), "max": round(ordered[-1], 3)}


def start_server(
    state: Path, devices: str | None, extra: list[str] | None = None
) -> tuple[subprocess.Popen, str]:
    """Start ``fibserve serve`` (with the options ``extra``) on a free port; returns the process and its URL once
    /health answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, "-m", "fibserve", "serve", "--port", str(port), "--state-dir", str(state)]
    if devices:
        cmd += ["--devices", devices]
    cmd += extra or []
    log = (state.parent / "server.log").open("wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited: {(state.parent / 'server.log').read_text()[-3000:]}")
        try:
            health = httpx.get(url + "/health", timeout=2).json()
            if health["workers"] and all(w["healthy"] for w in health["workers"]):
                return proc, url
        except (httpx.TransportError, ValueError, KeyError):
            pass
        time.sleep(0.25)
    proc.kill()
    raise SystemExit("server did not become healthy within 180 s")


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM (the server re-queues running tasks and stops its lanes), SIGKILL after 60 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


def status_counts(answers: list[TaskAnswer]) -> dict[str, int]:
    """How many answers had each outcome: the first trace's status, ``not_executed``, or the task's ``failed``."""
    counts: dict[str, int] = {}
    for a in answers:
        trace = a.traces[0] if a.traces else None
        if a.status != "completed":
            key = a.status
        else:
            key = str(trace.evaluation.status.value) if trace and trace.evaluation else "not_executed"
        counts[key] = counts.get(key, 0) + 1
    return counts


def phase_p50s(answers: list[TaskAnswer]) -> dict[str, float]:
    """The p50 (ms) of each phase of the answers' ``timings_s`` (a phase an answer lacks counts as 0)."""
    timings = [a.timings_s or {} for a in answers]
    names = sorted({name for t in timings for name in t})
    return {name: round(statistics.median(t.get(name, 0.0) * 1e3 for t in timings), 1) for name in names}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument(
        "--devices", default=None, help="passed to fibserve serve (default: all GPUs, else cpu)"
    )
    parser.add_argument("--language", choices=sorted(SOURCES), default="cuda")
    parser.add_argument("--settle-s", type=float, default=10.0, help="idle time before reading the idle RSS")
    parser.add_argument(
        "--max-wall-s",
        type=float,
        default=480.0,
        help="stop waiting after this many seconds, cancel what is left and report on the finished tasks",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="fibserve-bench-") as tmp:
        proc, url = start_server(Path(tmp) / "state", args.devices)
        try:
            time.sleep(args.settle_s)
            idle = {"server": round(rss_mib(proc.pid), 1), "with_children": round(rss_mib(proc.pid, True), 1)}
            shm_before = shm_file_count()
            body = solution(args.language)
            with FIBServeClient(url, timeout=120) as client, ThreadPoolExecutor(max_workers=16) as pool:
                lanes = [w.device for w in client.health().workers]
                started = time.monotonic()
                ids = list(pool.map(lambda _: client.submit_evaluate(body, [WORKLOAD]), range(args.requests)))
                submit_s = time.monotonic() - started
                answers = client.batch(ids, timeout=60)
                while any(a.status not in ("completed", "failed") for a in answers):
                    if time.monotonic() - started > args.max_wall_s:
                        for a in answers:
                            if a.status not in ("completed", "failed"):
                                client.cancel(a.task_id)
                        break
                    answers = client.batch(ids, timeout=60)
                wall_s = time.monotonic() - started
            answers = [a for a in answers if a.finished_at is not None and a.started_at is not None]
            after = round(rss_mib(proc.pid), 1)
            time.sleep(5)  # let the last retired workers exit and be cleaned up
            shm_after = shm_file_count()
        finally:
            stop_server(proc)

    statuses = status_counts(answers)
    span = max(a.finished_at or 0 for a in answers) - min(a.created_at for a in answers)
    result = {
        "benchmark": "serve_throughput",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "requests": args.requests,
        "finished": len(answers),
        "language": args.language,
        "lanes": lanes,
        "evaluations_per_minute": round(len(answers) / span * 60, 2),
        "submit_to_result_s": percentiles([(a.finished_at or 0) - a.created_at for a in answers]),
        "service_s": percentiles([(a.finished_at or 0) - (a.started_at or 0) for a in answers]),
        "phase_ms_p50": phase_p50s(answers),
        "submit_all_s": round(submit_s, 3),
        "wall_s": round(wall_s, 1),
        "idle_rss_mib": idle,
        "rss_after_mib": after,
        "dev_shm_files": [shm_before, shm_after],
        "statuses": statuses,
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
