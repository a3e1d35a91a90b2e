"""The real evaluation backend: FIBServe over HTTP, and `ptxbench eval` (one kernel file, one task).

:class:`FIBServeBackend` implements :class:`~mini_ptx_agent.environment.EvaluationBackend` with
:class:`fibserve.client.FIBServeClient` and turns each answer into a :class:`~.report.KernelReport`
(:func:`~.verdict.build_report`); a failing service raises
:class:`~mini_ptx_agent.environment.EvaluationInfrastructureError`, never a kernel status.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from fibserve.trace import Definition, Solution
from pydantic import ValidationError

from ..task import TaskConfig
from . import EvaluationInfrastructureError
from .answers import ncu_result_from, sanitizer_verdict_from, static_analysis_from
from .report import KernelReport, NcuResult, SanitizerVerdict
from .verdict import build_report, infrastructure_report


class UnknownDefinition(LookupError):
    """The service has no definition of that name (a mistake in the task, not an infrastructure failure)."""


class FIBServeBackend:
    """:class:`EvaluationBackend` over :class:`fibserve.client.FIBServeClient`.

    One evaluation = optional ``POST /sanitize``, ``task.sanitizer_runs`` times (the gate: any finding rejects
    the kernel before timing and ends the gate; a kernel that did not build goes on to the evaluation, which
    reports the compile error), then ``POST /evaluate`` on the task's workloads, each waited for up to its time
    limit (``task.sanitizer_timeout_s``, else ``task.timeout_s``) plus ``wait_margin_s``.
    An unreachable service, an error answer, a task that ``failed`` at the task level, or a wait that ran out
    raise :class:`EvaluationInfrastructureError`; an unknown definition raises :class:`UnknownDefinition`.
    """

    def __init__(
        self, url: str, *, token: str | None = None, wait_margin_s: float = 60.0, reconnect_s: float = 30.0
    ):
        """``reconnect_s``: how long an unreachable service is retried while waiting for a task (s)."""
        from fibserve.client import FIBServeClient

        self.url = url.rstrip("/")
        self.client = FIBServeClient(self.url, token=token)
        self.wait_margin_s = wait_margin_s
        self.reconnect_s = reconnect_s

    def describe(self) -> dict[str, Any]:
        return {"backend": "fibserve", "url": self.url}

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from fibserve.client import APIError, FIBServeError

        try:
            return fn(*args, **kwargs)
        except APIError as exc:
            if exc.status_code == 404 and exc.code == "unknown_definition":
                raise UnknownDefinition(exc.message) from exc
            raise EvaluationInfrastructureError(f"FIBServe at {self.url} refused {what}: {exc}") from exc
        except FIBServeError as exc:  # ServiceUnreachable, TaskWaitTimeout
            raise EvaluationInfrastructureError(f"{what}: {exc}") from exc
        except ValidationError as exc:  # an answer this client cannot read: client and server versions differ
            raise EvaluationInfrastructureError(
                f"FIBServe at {self.url} sent an answer to {what} that this client cannot read "
                f"(are client and server the same version?): {exc.error_count()} validation error(s), "
                f"first: {exc.errors()[0]['msg']}"
            ) from exc

    def definition(self, name: str) -> Definition:
        """``GET /definitions/{name}``."""
        return self._call(f"GET /definitions/{name}", self.client.definition, name)

    def workloads(self, name: str) -> list[Any]:
        """``GET /definitions/{name}/workloads``."""
        return list(self._call(f"GET /definitions/{name}/workloads", self.client.workloads, name))

    def _finished(self, what: str, task_id: str, timeout_s: float) -> Any:
        answer = self._call(
            f"waiting for {what} task {task_id}",
            self.client.wait,
            task_id,
            timeout_s,
            reconnect_s=self.reconnect_s,
        )
        if answer.status == "failed":
            error = answer.error
            detail = f"{error.code}: {error.message}" if error else "no reason given"
            raise EvaluationInfrastructureError(
                f"FIBServe {what} task {task_id} failed at the task level ({detail})"
            )
        return answer

    def _sanitizer_gate(self, solution: Solution, task: TaskConfig) -> tuple[SanitizerVerdict | None, str]:
        """Run the gate up to ``task.sanitizer_runs`` times, stopping at the first finding. Returns the verdict
        (None when the kernel did not build: the evaluation reports that) and the service's solution name."""
        timeout_s = task.sanitizer_timeout_s or task.timeout_s
        verdict: SanitizerVerdict | None = None
        name = solution.name
        for completed in range(1, task.sanitizer_runs + 1):
            task_id = self._call(
                "POST /sanitize",
                self.client.submit_sanitize,
                solution,
                task.workload_uuids,
                sanitizer_types=task.sanitizer_types,
                timeout=timeout_s,
            )
            answer = self._finished("sanitize", task_id, timeout_s + self.wait_margin_s)
            name = answer.solution
            runs = answer.sanitizer or []
            if runs and all(run.verdict == "not_built" for run in runs):
                return None, name
            verdict = sanitizer_verdict_from(
                runs, requested_runs=task.sanitizer_runs, completed_runs=completed
            )
            if not verdict.passed:
                break
        return verdict, name

    def evaluate(self, solution: Solution, task: TaskConfig) -> KernelReport:
        """Sanitizer gate (when ``task.sanitizer``), then evaluation on ``task.workload_uuids``."""
        wait_s = task.timeout_s + self.wait_margin_s
        sanitizer = None
        if task.sanitizer:
            sanitizer, name = self._sanitizer_gate(solution, task)
            if sanitizer is not None and not sanitizer.passed:
                return build_report(task, solution_name=name, traces=[], sanitizer=sanitizer)
        task_id = self._call(
            "POST /evaluate",
            self.client.submit_evaluate,
            solution,
            task.workload_uuids,
            timeout=task.timeout_s,
            atol=task.atol,
            rtol=task.rtol,
        )
        answer = self._finished("evaluate", task_id, wait_s)
        return build_report(
            task,
            solution_name=answer.solution,
            traces=list(answer.traces or []),
            executed=answer.executed,
            analysis=static_analysis_from(answer.analysis),
            sanitizer=sanitizer,
            notes=answer.logs or "",
            limits_hit=answer.limits_hit,
        )

    def profile(self, solution: Solution, task: TaskConfig, workload: str, kernel_hash: str) -> NcuResult:
        """``POST /profile`` with ``digest`` on one workload: executed instructions per SASS opcode and the
        short summary. A candidate that fails under ncu is an :class:`NcuResult` with ``error``; a service or
        profiler that is not there raises :class:`EvaluationInfrastructureError`."""
        task_id = self._call(
            "POST /profile",
            self.client.submit_profile,
            solution,
            [workload],
            digest=True,
            timeout=task.timeout_s,
        )
        answer = self._finished("profile", task_id, task.timeout_s + self.wait_margin_s)
        runs = answer.profile or []
        if not runs:
            raise EvaluationInfrastructureError(f"FIBServe profile task {task_id} answered without a run")
        result = ncu_result_from(runs[0], workload=workload, kernel_hash=kernel_hash, target=task.arch)
        hardware = answer.device_info.name if answer.device_info is not None else None
        return result.model_copy(update={"hardware": hardware or answer.device})


# -- `ptxbench eval` --------------------------------------------------------------------------------------------


def evaluate_kernel(
    kernel_path: Path,
    task: TaskConfig,
    *,
    service_url: str | None = None,
    token: str | None = None,
    log_path: Path | None = None,
    instruction_evidence: bool = False,
) -> KernelReport:
    """Evaluate the kernel file ``kernel_path`` for ``task`` (the library function behind `ptxbench eval`).

    The service is ``service_url``, else ``$SERVICE_URL``, else an embedded FIBServe started for this call
    (its log goes to ``log_path`` when given). ``token`` defaults to ``$FIBSERVE_TOKEN`` for a remote service.
    With ``instruction_evidence``, a kernel that passed every workload on a GPU is also profiled with Nsight
    Compute (the report's ``ncu``: which instruction families executed). The report carries the task's
    ``task_id`` and the file's ``kernel_sha256``. A service failure is returned as status
    INFRASTRUCTURE_ERROR, never raised and never a kernel verdict.

    Raises:
        OSError: the kernel file cannot be read.
        TaskConfigError: the file's suffix does not fit the task's language (a ``.py`` file for a CUDA task).
    """
    from ..task import KERNEL_SUFFIXES, TaskConfigError
    from .embedded import ServiceStartError
    from .embedded import service_url as resolve_service
    from .profiling import profile_correct_kernel

    suffixes = KERNEL_SUFFIXES[task.language]
    if Path(kernel_path).suffix not in suffixes:
        raise TaskConfigError(
            f"{Path(kernel_path).name} does not look like a {task.language} kernel (expected {', '.join(suffixes)}); "
            f'pass the matching file, or set "language" in the task config'
        )
    source = Path(kernel_path).read_text(encoding="utf-8")
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    solution = task.solution(source, name=f"ptxbench-eval-{Path(kernel_path).stem}", author="ptxbench-eval")
    try:
        with resolve_service(service_url, log_path=log_path) as (url, embedded):
            auth = None if embedded else (token or os.environ.get("FIBSERVE_TOKEN") or None)
            backend = FIBServeBackend(url, token=auth)
            report = backend.evaluate(solution, task)
            if instruction_evidence:
                ncu = profile_correct_kernel(backend, solution, task, report, cache_dir=None)
                report = report.model_copy(update={"ncu": ncu})
    except (EvaluationInfrastructureError, ServiceStartError) as exc:
        report = infrastructure_report(task, str(exc), solution_name=solution.name)
    return report.model_copy(update={"kernel_sha256": digest})
