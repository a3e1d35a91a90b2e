"""Whose fault a failure during correctness or timing is: the candidate's (a status on its trace) or the
harness's (a task-level error). The correctness check, the timing loop and their checks raise these."""

from __future__ import annotations

from fibserve.sandbox import LimitHit, LimitName
from fibserve.trace import Correctness, EvaluationStatus


class ReferenceTimingError(RuntimeError):
    """The reference's timing worker failed (a harness problem, never the candidate's fault)."""


class DeviceShared(ReferenceTimingError):
    """Another process, outside this service, kept the GPU busy while the comparators were timed: the
    timings mean nothing, and neither the candidate nor a twin is to blame (a task-level error)."""


class CandidateFailure(Exception):
    """The candidate failed (its fault): carries the status and log for its Evaluation."""

    def __init__(
        self,
        status: EvaluationStatus,
        log: str,
        correctness: Correctness | None = None,
        *,
        worker_dead: bool = True,
        limit: LimitHit | None = None,
    ):
        super().__init__(log)
        self.status = status
        self.log = log
        self.correctness = correctness
        self.worker_dead = worker_dead
        self.limit = limit
        """The sandbox's resource limit the candidate ran into, when that is what failed it."""


def limit_failure(hit: LimitHit, what: str, log: str) -> CandidateFailure:
    """The candidate's failure for running into a resource limit: TIMEOUT for CPU time, RUNTIME_ERROR for the
    others, with a log whose first line names the limit (``limit exceeded: memory (16.0 GiB ...)``)."""
    status = EvaluationStatus.TIMEOUT if hit.limit is LimitName.CPU_TIME else EvaluationStatus.RUNTIME_ERROR
    return CandidateFailure(status, f"{hit.sentence()}\n{what}\n{log}", limit=hit)
