"""EvaluationEnvironment: the mini-swe-agent ``Environment`` of the kernel agent, whose one action is "evaluate this
kernel" through an :class:`~mini_ptx_agent.environment.EvaluationBackend`.

It applies the run's feedback options around the backend's evaluation: a correct kernel profiled with Nsight
Compute when they ask (:mod:`~.profiling`), fix notes searched for a failure (:mod:`~.fix_notes`), every string
that candidate code could have written scrubbed of this process's secrets, then the deterministic feedback text
(:mod:`mini_ptx_agent.feedback`) and the stop decision (:func:`~.stop.submits`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..feedback import format_feedback
from ..feedback_options import FeedbackOptions
from ..task import TaskConfig
from ..trajectory import redact_strings
from . import EvaluationBackend
from .report import NotEvaluated
from .stop import submits


class EvaluationEnvironment:
    """mini-swe-agent ``Environment`` whose action is "evaluate this kernel" (through an EvaluationBackend),
    with the run's feedback options: a correct kernel profiled with Nsight Compute when they ask (cached in
    ``ncu_cache_dir``, :mod:`~.profiling`), fix notes searched for a failure (``notes_dir``)."""

    def __init__(
        self,
        backend: EvaluationBackend,
        task: TaskConfig,
        feedback: FeedbackOptions | None = None,
        *,
        ncu_cache_dir: Path | None = None,
    ):
        """Raises FixNotesError: ``feedback.notes_dir`` names no folder of notes."""
        self.backend = backend
        self.task = task
        self.config = task
        self.feedback = feedback or FeedbackOptions()
        self.ncu_cache_dir = ncu_cache_dir
        self.notes = None
        if self.feedback.notes_dir is not None:
            from .fix_notes import FixNoteIndex

            self.notes = FixNoteIndex.load(self.feedback.notes_dir)

    def execute(self, action: dict, cwd: str = "") -> dict[str, Any]:
        """Evaluate ``action["solution"]``; returns ``{"output": feedback, "returncode", "extra": {"report",
        "submit"}}`` (``submit``: the run ends ``Submitted``, :func:`~.stop.submits`).

        Raises:
            EvaluationInfrastructureError: the service (or, when the options ask for it, its profiler) failed.
        """
        solution = action["solution"]
        report = self.backend.evaluate(solution, self.task)
        if self.feedback.needs_profile:
            from .profiling import profile_correct_kernel

            ncu = profile_correct_kernel(self.backend, solution, self.task, report, self.ncu_cache_dir)
            report = report.model_copy(update={"ncu": ncu})
        not_a_failure = (NotEvaluated.INFRASTRUCTURE_ERROR, NotEvaluated.NOT_EXECUTED)
        if self.notes is not None and not report.all_passed and report.status not in not_a_failure:
            from .fix_notes import failure_query

            report = report.model_copy(update={"fix_notes": self.notes.search(failure_query(report))})
        # Candidate code wrote parts of the report (its log, its errors): no secret of this process may pass
        # from there into the feedback, the next prompt or any file, not even encoded.
        report = type(report).model_validate(redact_strings(report.model_dump(mode="json")))
        feedback = format_feedback(
            report, turn=action.get("turn"), options=self.feedback, arch=self.task.arch
        )
        return {
            "output": feedback,
            "returncode": 0 if report.all_passed else 1,
            "extra": {"report": report, "submit": submits(report, self.feedback, self.task.arch)},
        }

    def get_template_vars(self, **kwargs) -> dict[str, Any]:
        return {"definition": self.task.definition, "language": self.task.language} | kwargs

    def serialize(self) -> dict:
        return {
            "info": {
                "config": {
                    "environment": {"evaluation": self.backend.describe()},
                    "environment_type": f"{type(self).__module__}.{type(self).__name__}",
                }
            }
        }
