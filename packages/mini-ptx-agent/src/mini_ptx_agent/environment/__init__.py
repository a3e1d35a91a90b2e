"""The agent's evaluation environment: what evaluates each turn's kernel, grouped as mini-swe-agent groups its
environments (the protocol here, one module per concept below it).

- :class:`EvaluationBackend` (here): the protocol a backend implements (``definition``, ``workloads``,
  ``evaluate``, ``profile``, ``describe``); a failure of the service itself raises
  :class:`EvaluationInfrastructureError`, never a kernel status (an outage is not the kernel's fault);
- :mod:`~.report`: one candidate's result, :class:`~.report.KernelReport` (schema ``ptxbench.eval.v1``), and
  its parts;
- :mod:`~.verdict`: the verdict derived from the service's traces (:func:`~.verdict.build_report`);
- :mod:`~.answers`: the service's static analysis, sanitizer and Nsight Compute answers read into those parts;
- :mod:`~.stop`: whether a report ends the run ``Submitted``;
- :mod:`~.evaluation`: :class:`~.evaluation.EvaluationEnvironment`, the mini-swe-agent environment whose
  action is "evaluate this kernel", with the run's feedback options;
- :mod:`~.fibserve`: the real backend, FIBServe over HTTP, and `ptxbench eval`;
- :mod:`~.embedded`: an embedded FIBServe, started as a child process when no service is named;
- :mod:`~.profiling`: Nsight Compute runs of correct kernels, cached per kernel hash;
- :mod:`~.fix_notes`: fix notes searched with BM25 for a failure.

Every decision downstream (feedback verdict, ``Submitted``, exit codes) is made from the report's structured
fields, never from log text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from fibserve.trace import Definition, Solution

    from ..task import TaskConfig
    from .report import KernelReport, NcuResult


class EvaluationInfrastructureError(RuntimeError):
    """The evaluation service failed (unreachable, task-level failure, no answer in time): not the kernel's fault."""


@runtime_checkable
class EvaluationBackend(Protocol):
    """Where kernels are evaluated. Implementations raise :class:`EvaluationInfrastructureError` on service failure."""

    def definition(self, name: str) -> Definition:
        """The definition ``name``."""
        ...

    def workloads(self, name: str) -> list[Any]:
        """The definition's workloads (objects with ``uuid`` and ``axes``)."""
        ...

    def evaluate(self, solution: Solution, task: TaskConfig) -> KernelReport:
        """Evaluate ``solution`` on the task's workloads (with the sanitizer gate when the task asks)."""
        ...

    def profile(self, solution: Solution, task: TaskConfig, workload: str, kernel_hash: str) -> NcuResult:
        """Profile ``solution`` on ``workload`` with Nsight Compute (executed opcodes and a summary). Called
        only when a run's feedback options ask for it, so a backend without a profiler need not have it."""
        ...

    def describe(self) -> dict[str, Any]:
        """What to record about the backend in a trajectory (never a token)."""
        ...
