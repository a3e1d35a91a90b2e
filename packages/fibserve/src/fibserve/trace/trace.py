"""Trace: one line of a trace file, linking a definition, a workload, a solution and its evaluation."""

from __future__ import annotations

from pydantic import model_validator

from ._base import NonEmptyStr, TraceModel
from .evaluation import Evaluation, EvaluationStatus
from .workload import Workload


class Trace(TraceModel):
    """``{definition, workload, solution, evaluation}``.

    A *workload trace* (the lines of ``workloads/**/*.jsonl``) has ``solution`` and ``evaluation`` null.
    An evaluation always names the solution it evaluated.
    """

    definition: NonEmptyStr
    """Name of the definition."""
    workload: Workload
    """The workload that was (or will be) run."""
    solution: NonEmptyStr | None = None
    """Name of the evaluated solution; null for a workload trace."""
    evaluation: Evaluation | None = None
    """The result; null for a workload trace."""

    @model_validator(mode="after")
    def _evaluation_has_solution(self) -> Trace:
        if self.evaluation is not None and self.solution is None:
            raise ValueError("a trace with an evaluation must name its solution")
        return self

    @property
    def is_workload_trace(self) -> bool:
        """Whether this line only declares a workload (no solution, no evaluation)."""
        return self.solution is None and self.evaluation is None

    @property
    def passed(self) -> bool:
        """Whether the evaluation exists and PASSED."""
        return self.evaluation is not None and self.evaluation.status is EvaluationStatus.PASSED
