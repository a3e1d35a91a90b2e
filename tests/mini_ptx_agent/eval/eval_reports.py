"""Build FlashInfer Trace evaluations as the service returns them, for tests of decisions made on results."""

from __future__ import annotations

from fibserve.trace import Correctness, Environment, Evaluation, Performance, Trace, Workload
from mini_ptx_agent.environment.report import KernelReport
from mini_ptx_agent.environment.verdict import build_report
from mini_ptx_agent.task import TaskConfig


def trace(
    uuid: str, status: str, *, speedup: float = 1.0, hardware: str = "NVIDIA H200", log: str = ""
) -> Trace:
    """One evaluated trace; PASSED carries timing (speedup from reference 1 ms), INCORRECT_NUMERICAL errors."""
    correctness = performance = None
    if status in ("PASSED", "INCORRECT_NUMERICAL"):
        correctness = Correctness(
            max_absolute_error=0.5 if status != "PASSED" else 0.0,
            max_relative_error=0.25 if status != "PASSED" else 0.0,
        )
    if status == "PASSED":
        performance = Performance(latency_ms=1.0 / speedup, reference_latency_ms=1.0, speedup_factor=speedup)
    evaluation = Evaluation(
        status=status,
        environment=Environment(hardware=hardware),
        timestamp="2026-11-30T07:00:00Z",
        log=log,
        correctness=correctness,
        performance=performance,
    )
    workload = Workload(uuid=uuid, axes={"M": 64}, inputs={})
    return Trace(definition="vector_add_f32", workload=workload, solution="s", evaluation=evaluation)


def report(
    statuses: list[str],
    *,
    speedups: list[float] | None = None,
    hardware: str = "NVIDIA H200",
    target: float = 1.0,
    language: str = "triton",
) -> KernelReport:
    """A report over one trace per status."""
    speedups = speedups or [1.0] * len(statuses)
    task = TaskConfig(definition="vector_add_f32", language=language, target_speedup=target)
    traces = [
        trace(f"w{i}", s, speedup=v, hardware=hardware, log="boom" if s != "PASSED" else "")
        for i, (s, v) in enumerate(zip(statuses, speedups, strict=True))
    ]
    return build_report(task, solution_name="s", traces=traces)
