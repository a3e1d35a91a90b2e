"""Whose fault a failure during correctness or timing is: the candidate's (a status on its trace) or the
harness's (a task-level error). Both sides of :mod:`fibserve.bench.run` and its checks raise these."""

from __future__ import annotations

from fibserve.trace import Correctness, EvaluationStatus


class ReferenceTimingError(RuntimeError):
    """The reference's timing worker failed (a harness problem, never the candidate's fault)."""


class CandidateFailure(Exception):
    """The candidate failed (its fault): carries the status and log for its Evaluation."""

    def __init__(
        self,
        status: EvaluationStatus,
        log: str,
        correctness: Correctness | None = None,
        *,
        worker_dead: bool = True,
    ):
        super().__init__(log)
        self.status = status
        self.log = log
        self.correctness = correctness
        self.worker_dead = worker_dead
