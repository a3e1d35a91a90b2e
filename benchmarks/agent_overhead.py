"""Agent overhead per turn (excluding the model and the evaluation) and `ptxbench --help` wall time.

Targets (issue 6): under 100 ms per turn; `ptxbench --help` under 1 s.

Per turn the KernelAgent extracts the kernel, builds the solution, formats feedback, writes the kernel, the
evaluator result and a correct version, and rewrites the whole scrubbed trajectory. The model here answers at
once (mini-swe-agent's DeterministicModel, a ~10 kB kernel per reply) and the evaluation backend answers at
once with a prepared report over ``--workloads`` FlashInfer traces, so what is timed is the agent's own work.
The trajectory grows every turn, so the last turns are the slowest; both the mean and the worst turn are
reported.

    uv run python benchmarks/agent_overhead.py [--turns 30] [--workloads 8] [--help-runs 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")

from fibserve.trace import Correctness, Environment, Evaluation, Performance, Trace, Workload
from mini_ptx_agent.agent import KernelAgent, literal_template
from mini_ptx_agent.environment.evaluation import EvaluationEnvironment
from mini_ptx_agent.environment.report import StaticAnalysis
from mini_ptx_agent.environment.verdict import build_report
from mini_ptx_agent.runs.directory import RunLayout
from mini_ptx_agent.task import TaskConfig
from minisweagent.models.test_models import DeterministicModel

KERNEL = "\n".join(
    f'    asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); // line {i}' for i in range(160)
)


class InstantBackend:
    """Answers every evaluation at once with the same report (all workloads PASSED at 0.9x on an H200)."""

    def __init__(self, task: TaskConfig, workloads: int):
        traces = [
            Trace(
                definition=task.definition,
                workload=Workload(
                    uuid=f"{i:08d}-0000-0000-0000-000000000000", axes={"M": 64 * (i + 1)}, inputs={}
                ),
                solution="s",
                evaluation=Evaluation(
                    status="PASSED",
                    environment=Environment(hardware="NVIDIA H200", libs={"torch": "2.11", "cuda": "13.0"}),
                    timestamp="2026-11-30T07:00:00Z",
                    correctness=Correctness(max_absolute_error=1e-3, max_relative_error=1e-3),
                    performance=Performance(latency_ms=1.1, reference_latency_ms=1.0, speedup_factor=0.9),
                ),
            )
            for i in range(workloads)
        ]
        analysis = StaticAnalysis(
            compiled=True,
            ptx_families=["wgmma", "mbarrier"],
            sass_families=["HGMMA"],
            registers=168,
            shared_memory_bytes=200_000,
            spill_bytes=0,
        )
        self.report = build_report(task, solution_name="s", traces=traces, analysis=analysis)

    def definition(self, name: str):
        raise NotImplementedError

    def workloads(self, name: str) -> list:
        return []

    def describe(self) -> dict:
        return {"backend": "instant"}

    def evaluate(self, solution, task):
        return self.report


class TimedAgent(KernelAgent):
    """Records the wall time of every step (one turn)."""

    step_times: list[float]

    def step(self):
        start, calls = time.perf_counter(), self.n_calls
        try:
            return super().step()
        finally:
            if self.n_calls > calls:  # the final step only raises LimitsExceeded: not a turn
                self.step_times.append(time.perf_counter() - start)


def agent_overhead(turns: int, workloads: int) -> list[float]:
    """Seconds per turn of a run of ``turns`` turns."""
    task = TaskConfig(definition="gemm_n7168_k5120", language="cuda")
    reply = f"Plan: tile 128x256, 2 consumer warpgroups.\n```cuda\n{KERNEL}\n```\n"
    outputs = [
        {"role": "assistant", "content": reply, "extra": {"actions": [], "cost": 0.0}} for _ in range(turns)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = RunLayout(root)
        agent = TimedAgent(
            DeterministicModel(outputs=outputs, cost_per_call=0.0),
            EvaluationEnvironment(InstantBackend(task, workloads), task),
            files=files,
            task=task,
            system_template=literal_template("x" * 40_000),  # a system prompt of realistic size
            instance_template=literal_template("y" * 6_000),
            step_limit=turns,
            output_path=files.trajectory_path,
        )
        agent.step_times = []
        agent.run()
        return agent.step_times


def help_times(runs: int) -> tuple[list[float], list[float]]:
    """Wall seconds and CPU seconds (user + system) of `ptxbench --help`, each in a fresh process.

    CPU time does not grow with other jobs on the machine, so it shows what the command itself costs.
    """
    exe = Path(sys.executable).parent / "ptxbench"
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([str(exe), "--help"], check=True, capture_output=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--workloads", type=int, default=8)
    parser.add_argument("--help-runs", type=int, default=5)
    args = parser.parse_args()
    steps = agent_overhead(args.turns, args.workloads)
    ms = [s * 1000 for s in steps]
    print(
        f"agent overhead per turn ({args.turns} turns, {args.workloads} workloads): "
        f"mean {statistics.mean(ms):.1f} ms, median {statistics.median(ms):.1f} ms, "
        f"first {ms[0]:.1f} ms, last {ms[-1]:.1f} ms, max {max(ms):.1f} ms (target < 100 ms)"
    )
    walls, cpus = help_times(args.help_runs)
    print(
        f"ptxbench --help ({args.help_runs} runs): wall median {statistics.median(walls):.3f} s, "
        f"min {min(walls):.3f} s, max {max(walls):.3f} s (target < 1 s); CPU median {statistics.median(cpus):.3f} s"
    )
    print(
        f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
