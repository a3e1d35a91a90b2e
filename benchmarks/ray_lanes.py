"""Ray lanes against local lanes: evaluations per minute and submit-to-result latency with 1, 2 and 4 lanes.

Usage (from the repository root)::

    uv run python benchmarks/ray_lanes.py --lanes 1 2 4 --language broken --requests 200
    uv run python benchmarks/ray_lanes.py --lanes 2 --language python --requests 50   # real CPU evaluations
    uv run python benchmarks/ray_lanes.py --gpu --lanes 1 --language cuda --requests 50   # on a GPU host

For each lane count N it runs the same burst twice on 127.0.0.1: through a plain ``fibserve serve --devices
cpu,...`` (N lane threads) and through ``fibserve serve --ray ADDRESS --devices cpu`` on a one-node local Ray
cluster whose node offers N CPU lanes (``fibserve_cpu_lane: N``, N CPUs), started and stopped by this
script. The burst and the numbers are those of ``benchmarks/serve_throughput.py`` (``evaluations_per_minute``
from the server's timestamps, ``submit_to_result_s`` and ``service_s`` percentiles), and each Ray row says
how much slower than the plain one it is (``ray_overhead_pct`` of evaluations per minute and of the p50
submit-to-result time). With ``--compare`` (default on) the per-task statuses and correctness of the two
services must be identical. Prints one JSON line per lane count.

``broken`` candidates (do not parse: no sandbox worker starts) measure what Ray adds per task (one actor call
and its answer through the object store) against the service's own work; ``python`` ones a real evaluation.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import httpx
from fibserve.client import FIBServeClient

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "fibserve" / "serve"))  # the tests' local Ray cluster

from ray_cluster import RayCluster  # noqa: E402
from serve_helpers import free_port  # noqa: E402
from serve_throughput import WORKLOAD, percentiles, solution  # noqa: E402


def start(state: Path, args: list[str], lanes: int) -> tuple[subprocess.Popen, str]:
    """``fibserve serve`` with ``args`` on a free port; returns once ``lanes`` lanes are healthy."""
    port = free_port()
    cmd = [sys.executable, "-m", "fibserve", "serve", "--port", str(port), "--state-dir", str(state), *args]
    state.parent.mkdir(parents=True, exist_ok=True)
    log = state.parent / f"server-{port}.log"
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited: {log.read_text()[-3000:]}")
        try:
            workers = httpx.get(url + "/health", timeout=2).json()["workers"]
            if len([w for w in workers if w["healthy"]]) == lanes:
                return proc, url
        except (httpx.TransportError, ValueError, KeyError):
            pass
        time.sleep(0.25)
    proc.kill()
    raise SystemExit(f"{lanes} lanes were not healthy within 300 s")


def burst(url: str, body: dict, requests: int) -> dict:
    """Submit ``requests`` evaluations at once from 16 threads and wait for all; the numbers and summaries."""
    with FIBServeClient(url, timeout=120) as client, ThreadPoolExecutor(max_workers=16) as pool:
        ids = list(pool.map(lambda _: client.submit_evaluate(body, [WORKLOAD]), range(requests)))
        answers = client.batch(ids, timeout=60)
        while any(a.status not in ("completed", "failed") for a in answers):
            answers = client.batch(ids, timeout=60)
    span = max(a.finished_at or 0 for a in answers) - min(a.created_at for a in answers)
    summaries = []
    for a in answers:
        evaluation = a.traces[0].evaluation if a.traces else None
        correctness = evaluation.correctness if evaluation else None
        summaries.append(
            (
                a.status,
                evaluation.status.value if evaluation else None,
                None if correctness is None else round(correctness.max_absolute_error, 4),
            )
        )
    statuses: dict[str, int] = {}
    for s in summaries:
        statuses[str(s[1] or s[0])] = statuses.get(str(s[1] or s[0]), 0) + 1
    return {
        "evaluations_per_minute": round(len(answers) / span * 60, 2),
        "submit_to_result_s": percentiles([(a.finished_at or 0) - a.created_at for a in answers]),
        "service_s": percentiles([(a.finished_at or 0) - (a.started_at or 0) for a in answers]),
        "statuses": statuses,
        "summaries": summaries,
    }


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--lanes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--language", choices=["broken", "python", "triton", "cuda"], default="broken")
    parser.add_argument(
        "--gpu", action="store_true", help="GPU lanes: --devices cuda:0,... against a node offering N GPUs"
    )
    parser.add_argument("--no-compare", action="store_true", help="do not require identical results")
    args = parser.parse_args()
    body = solution(args.language)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    for lanes in args.lanes:
        with tempfile.TemporaryDirectory(prefix="fibserve-ray-bench-") as tmp:
            devices = [f"cuda:{i}" for i in range(lanes)] if args.gpu else ["cpu"] * lanes
            proc, url = start(Path(tmp) / "plain" / "state", ["--devices", ",".join(devices)], lanes)
            try:
                plain = burst(url, body, args.requests)
            finally:
                stop(proc)
            cluster = RayCluster()
            survivors: list[int] = []  # their pids
            try:
                if args.gpu:
                    cluster.add_node(cpus=lanes, resources={}, gpus=lanes)
                else:
                    cluster.add_node(cpus=lanes, resources={"fibserve_cpu_lane": lanes})
                ray_args = ["--ray", cluster.address] + ([] if args.gpu else ["--devices", "cpu"])
                proc, url = start(Path(tmp) / "ray" / "state", ray_args, lanes)
                try:
                    through_ray = burst(url, body, args.requests)
                finally:
                    stop(proc)
            finally:
                survivors = [proc.pid for proc in cluster.stop()]
        identical = sorted(plain.pop("summaries")) == sorted(through_ray.pop("summaries"))
        if not args.no_compare and not identical:
            raise SystemExit(f"{lanes} lanes: results differ between the plain and the Ray service")
        print(
            json.dumps(
                {
                    "benchmark": "ray_lanes",
                    "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                    "commit": commit,
                    "lanes": lanes,
                    "language": args.language,
                    "requests": args.requests,
                    "plain": plain,
                    "ray": through_ray,
                    "ray_overhead_pct": {
                        "evaluations_per_minute": round(
                            100
                            * (1 - through_ray["evaluations_per_minute"] / plain["evaluations_per_minute"]),
                            1,
                        ),
                        "submit_to_result_p50": round(
                            100
                            * (
                                through_ray["submit_to_result_s"]["p50"] / plain["submit_to_result_s"]["p50"]
                                - 1
                            ),
                            1,
                        ),
                    },
                    "identical_results": identical,
                    "ray_processes_sigkilled_at_stop": survivors,
                    "cpus": os.cpu_count(),
                    "load_avg_1m": round(os.getloadavg()[0], 2),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
