"""The timing twins of one evaluation (trusted side): the definition's baseline Solution and its reference,
each in a worker built like the candidate's (:class:`fibserve.bench.timing.twin.ReferenceTwin`).

The baseline is trusted code from the trace set (the definition's ``baseline:`` tag names it; the caller
looks it up, :meth:`fibserve.trace.TraceSet.baseline_for`); it is timed next to every candidate call and
checked once per trial against the reference. The reference's twin is started only when the reference is
timed: always without a baseline, else as :func:`fibserve.bench.timing.sides.reference_plan` allows. Cost: the
baseline's twin does what the reference's did before baselines existed; the reference's adds at most
``reference_timing_budget_s`` of calls per workload (plus one warmup call) and one more worker start per
evaluation.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from fibserve.bench.config import EvalConfig
from fibserve.bench.data.reference import reference_solution
from fibserve.bench.timing.sides import ReferencePlan, Side, reference_plan
from fibserve.bench.timing.twin import ReferenceTwin
from fibserve.bench.worker.pool import WorkerPool
from fibserve.bench.worker.slots import WorkloadData
from fibserve.trace import Definition, Solution


class Comparators:
    """What one evaluation times its candidate against.

    Args:
        pool, definition, config, arch, note: as for :class:`ReferenceTwin`.
        baseline: the definition's baseline Solution, or None when it names none (the speedup is then
            against the reference, and every result says so).
    """

    def __init__(self, pool: WorkerPool, definition: Definition, baseline: Solution | None,
                 config: EvalConfig, *, arch: str, note: Callable[[str], None]):  # fmt: skip
        self.definition = definition
        self.baseline = baseline
        self.config = config

        def twin(solution: Solution | None, role: str) -> ReferenceTwin:
            return ReferenceTwin(pool, definition, config, arch=arch, note=note,
                                 solution=solution, role=role)  # fmt: skip

        self.baseline_twin = twin(baseline, "baseline") if baseline is not None else None
        self.reference_twin = twin(None, "reference")

    def plan(self, reference_call_ms: float | None) -> ReferencePlan | None:
        """How often the reference is timed (None without a baseline: then on every call)."""
        return reference_plan(self.config, reference_call_ms) if self.baseline is not None else None

    def sides(
        self, data: WorkloadData, count: int, device: torch.device, plan: ReferencePlan | None
    ) -> list[Side]:
        """The sides of one workload's timing, primary first, with buffers laid out like the candidate's
        ``count`` slots (starting twins as needed).

        Raises:
            TwinError: a twin did not start, load or share its buffers (a harness problem).
        """
        reference_name = reference_solution(self.definition).name
        if self.baseline_twin is None or self.baseline is None:
            return [Side("reference", reference_name, self.reference_twin.slots(data, count, device))]
        sides = [
            Side(
                "baseline",
                self.baseline.name,
                self.baseline_twin.slots(data, count, device),
                description=self.baseline.description or "",
                check=self.config.check_baseline,
            )
        ]
        if plan is not None and plan.every is not None:
            slots = self.reference_twin.slots(data, count, device)
            sides.append(Side("reference", reference_name, slots, every=plan.every, warmup_calls=1))
        return sides

    def discard(self, reason: str | None = None) -> None:
        """Retire both twins (killed at once after a failure, noting ``reason``)."""
        for twin in (self.baseline_twin, self.reference_twin):
            if twin is not None:
                twin.discard(reason)

    def stop_now(self) -> None:
        """Kill both twins' process trees at once, from any thread (a cancel); they are discarded later."""
        for twin in (self.baseline_twin, self.reference_twin):
            if twin is not None and (worker := twin.worker) is not None:
                worker.sandbox.stop()

    @property
    def start_seconds(self) -> float:
        """Wall time spent packaging, acquiring and loading the twins (s)."""
        return sum(t.start_seconds for t in (self.baseline_twin, self.reference_twin) if t is not None)
