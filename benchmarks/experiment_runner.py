"""`ptxbench experiment` runner: overhead per turn (excluding model and evaluation) and lane utilisation.

Targets (issue 16): runner overhead <= 50 ms per turn; 64 concurrent trajectories against the scripted model keep
the service's lanes busy (utilisation >= 90% while work is queued).

``overhead``: the real :class:`~mini_ptx_agent.experiments.runner.ExperimentRunner` over an expanded plan, with
a model that answers at once (mini-swe-agent's ``DeterministicModel``) and an evaluation backend that answers
at once (``benchmarks/agent_overhead.py``'s ``InstantBackend``: an 8-workload report). What is timed is all the
rest: scheduling, each trajectory's run directory and plan.json, the kernel agent's own work per turn (extract,
feedback, kernel and evaluation files, the rewritten trajectory), the progress callbacks, summary.json, and at
the end turns.csv, turns.parquet and manifest.json (reported apart and per turn).

``lanes``: a real FIBServe on 127.0.0.1 with ``--lanes`` CPU lanes (Triton interpreter) and the scripted
OpenAI-compatible server (tests/mini_ptx_agent/experiments/scripted_kernels.py, correct kernels at once), an
experiment of 64 trajectories (vector_add_f32, 1 workload, 2 turns) at concurrency 64. ``GET /health`` is
sampled every 50 ms; utilisation = busy lanes / lanes over the samples with tasks queued.

    uv run python benchmarks/experiment_runner.py overhead [--trajectories 16] [--turns 10] [--concurrency 1]
    uv run python benchmarks/experiment_runner.py lanes [--trajectories 64] [--lanes 2] [--turns 2] [--service-url URL]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from contextlib import nullcontext
from pathlib import Path

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests/mini_ptx_agent/experiments"),
                str(ROOT / "tests/mini_ptx_agent/agent")]  # fmt: skip

from agent_overhead import InstantBackend  # noqa: E402
from mini_ptx_agent.experiments.config import ExperimentConfig  # noqa: E402
from mini_ptx_agent.experiments.manifest import build_manifest  # noqa: E402
from mini_ptx_agent.experiments.plan import LocalCatalog, expand  # noqa: E402
from mini_ptx_agent.experiments.runner import ExperimentRunner, ModelChecks  # noqa: E402
from mini_ptx_agent.experiments.table import experiment_rows, write_turns  # noqa: E402
from minisweagent.models.test_models import DeterministicModel  # noqa: E402
from scripted_kernels import GOOD_MODEL, RESPOND, VECTOR_ADD  # noqa: E402


class CatalogBackend(InstantBackend):
    """InstantBackend that also answers the definition and its workloads (from the bundled trace set)."""

    def __init__(self, catalog: LocalCatalog, task, workloads: int):
        super().__init__(task, workloads)
        self.catalog = catalog

    def definition(self, name: str):
        return self.catalog.catalog.definition(name)

    def workloads(self, name: str) -> list:
        return self.catalog.catalog.workloads(name)

    def close(self) -> None:
        pass


class InstantRunner(ExperimentRunner):
    def __init__(self, *args, catalog: LocalCatalog, **kwargs):
        super().__init__(*args, **kwargs)
        self.catalog = catalog

    def make_model(self, t):
        reply = f"A kernel.\n```python\n{VECTOR_ADD}```\n"
        outputs = [{"role": "assistant", "content": reply, "extra": {"actions": [], "cost": 0.0}}]
        return DeterministicModel(outputs=outputs * self.plan.num_turns, cost_per_call=0.0)

    def make_backend(self):
        task = self.run_plan(self.plan.trajectories[0], self.layout.run_dir("x")).task
        return CatalogBackend(self.catalog, task.model_copy(update={"target_speedup": 100.0}), 8)


def _instant(trajectories: int, turns: int, concurrency: int, catalog: LocalCatalog, root: Path):
    config = ExperimentConfig.model_validate({
        "name": "bench", "definitions": ["vector_add_f32"], "workloads": 1, "languages": ["triton"],
        "prompt_tags": ["triton-hopper"], "models": ["instant"], "replicas": trajectories, "num_turns": turns,
        "concurrency": concurrency,
    })  # fmt: skip
    plan = expand(config, catalog, name="bench")
    return plan, InstantRunner(
        plan, root, url="instant", token=None, lanes=4, checked=ModelChecks(), catalog=catalog
    )


def overhead(trajectories: int, turns: int, concurrency: int) -> None:
    catalog = LocalCatalog()
    with tempfile.TemporaryDirectory() as tmp:
        # Warm-up: one trajectory of one turn and its table, so the modules the first turn imports (the agent,
        # the prompts, mini-swe-agent, pyarrow with pandas: seconds without .pyc files) are not counted per turn.
        warm_plan, warm = _instant(1, 1, 1, catalog, Path(tmp) / "warm")
        warm.run()
        write_turns(experiment_rows(warm_plan, Path(tmp) / "warm"), Path(tmp) / "warm")
        root = Path(tmp) / "bench"
        plan, runner = _instant(trajectories, turns, concurrency, catalog, root)
        start, cpu = time.perf_counter(), time.process_time()
        runner.run()
        run_s, run_cpu = time.perf_counter() - start, time.process_time() - cpu
        start, cpu = time.perf_counter(), time.process_time()
        rows = experiment_rows(plan, root)
        write_turns(rows, root)
        build_manifest(plan, root, service={}, models={}, rows=rows)
        table_s, table_cpu = time.perf_counter() - start, time.process_time() - cpu
    total = len(rows)
    assert total == trajectories * turns, total
    per = 1000 / total
    print(f"{trajectories} trajectories x {turns} turns at concurrency {concurrency}: {total} turns")
    print(f"run: {run_s:.2f} s wall = {per * run_s:.1f} ms per turn; CPU {per * run_cpu:.1f} ms per turn")
    print(
        f"table + manifest: {table_s:.2f} s wall = {per * table_s:.1f} ms per turn; CPU {per * table_cpu:.1f} ms"
    )
    print(
        f"overhead per turn: {per * (run_s + table_s):.1f} ms wall, {per * (run_cpu + table_cpu):.1f} ms CPU "
        f"(target <= 50 ms); load average {os.getloadavg()[0]:.1f}"
    )


def lanes(trajectories: int, lane_count: int, turns: int, service_url: str | None) -> None:
    from fibserve.client import FIBServeClient
    from mini_ptx_agent.environment.embedded import EmbeddedService
    from mini_ptx_agent.experiments.launch import run_experiment
    from scripted_model import ScriptedOpenAIServer

    config = ExperimentConfig.model_validate({
        "name": "lanes", "definitions": ["vector_add_f32"], "workloads": 1, "languages": ["triton"],
        "prompt_tags": ["triton-hopper"], "models": [GOOD_MODEL], "replicas": trajectories, "num_turns": turns,
        "concurrency": trajectories,
    })  # fmt: skip
    samples: list[tuple[int, int, int]] = []  # (busy lanes, lanes, queued)
    stop = threading.Event()
    embedded = EmbeddedService(devices=["cpu"] * lane_count) if service_url is None else None
    with embedded or nullcontext(), ScriptedOpenAIServer(respond=RESPOND) as models:
        url = service_url or embedded.url

        def sample() -> None:
            with FIBServeClient(url, timeout=10) as client:
                while not stop.is_set():
                    health = client.health()
                    samples.append(
                        (sum(w.busy for w in health.workers), len(health.workers), health.queue_size)
                    )
                    time.sleep(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        with tempfile.TemporaryDirectory() as tmp:
            sampler.start()
            start = time.perf_counter()
            result = run_experiment(
                config, output=Path(tmp) / "e", service_url=url, model_host=models.host_port
            )
            wall = time.perf_counter() - start
            stop.set()
            sampler.join()
    queued = [s for s in samples if s[2] > 0]
    busy = [s for s in samples if s[0] > 0 or s[2] > 0]
    utilisation = sum(b for b, _, _ in queued) / max(1, sum(n for _, n, _ in queued))
    print(
        f"{trajectories} trajectories x {turns} turns, {service_url or f'{lane_count} CPU lanes'}: "
        f"{result.finished} finished in {wall:.1f} s"
    )
    print(
        f"health samples: {len(samples)}; with tasks queued: {len(queued)}; max queued: {max(q for *_, q in samples)}"
    )
    print(f"lane utilisation while tasks are queued: {100 * utilisation:.1f}% (target >= 90%)")
    print(
        f"lane utilisation over the samples with a lane busy or a task queued: "
        f"{100 * sum(b for b, _, _ in busy) / max(1, sum(n for _, n, _ in busy)):.1f}%"
    )
    print(f"median queued while queued: {statistics.median([q for *_, q in queued]) if queued else 0}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="what", required=True)
    o = sub.add_parser("overhead")
    o.add_argument("--trajectories", type=int, default=16)
    o.add_argument("--turns", type=int, default=10)
    o.add_argument("--concurrency", type=int, default=1)
    lane = sub.add_parser("lanes")
    lane.add_argument("--trajectories", type=int, default=64)
    lane.add_argument("--lanes", type=int, default=2)
    lane.add_argument("--turns", type=int, default=2)
    lane.add_argument(
        "--service-url", help="a running FIBServe (e.g. GPU lanes) instead of an embedded CPU one"
    )
    args = parser.parse_args()
    if args.what == "overhead":
        overhead(args.trajectories, args.turns, args.concurrency)
    else:
        lanes(args.trajectories, args.lanes, args.turns, args.service_url)


if __name__ == "__main__":
    main()
