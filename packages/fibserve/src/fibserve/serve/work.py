"""What a lane does with each kind of task: evaluate (the bench Evaluator), sanitize, profile; and /compile.

Failures of the candidate are results (traces with COMPILE_ERROR, RUNTIME_ERROR, a sanitizer verdict);
only failures of the service (evaluator crash, missing tool, whole-task timeout) make a task ``failed``,
with an error code that says which: a harness failure is never reported as the candidate's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fibserve.api import EvaluateRequest, ProfileRequest, SanitizeRequest
from fibserve.datasets.catalog import Catalog, NotFound, WorkloadMismatch
from fibserve.sandbox import UNSAFE_NOTE, Redactor
from fibserve.sandbox import status as sandbox_status
from fibserve.tools.executables import ToolPaths
from fibserve.trace import Definition

from .scheduler import Outcome, ResourceFactory, RunContext
from .settings import ServeSettings
from .store import TaskRecord, TaskStatus

if TYPE_CHECKING:
    from fibserve.bench.evaluator import Evaluator
    from fibserve.bench.report import EvaluationReport

log = logging.getLogger("fibserve.serve")


def evaluator_factory(settings: ServeSettings, roots: list[Path]) -> ResourceFactory:
    """A lane factory that builds one :class:`fibserve.bench.Evaluator` for the lane's device.

    ``roots`` are the trace-set roots (safetensors inputs are resolved against them).
    """

    def build(device: str) -> Evaluator:
        from fibserve.bench.evaluator import Evaluator

        return Evaluator(device, config_path=settings.eval_config, roots=roots)

    return build


def close_evaluator(evaluator: Evaluator) -> None:
    """Release an Evaluator's worker processes."""
    evaluator.close()


def request_overrides(request: EvaluateRequest) -> dict[str, Any] | None:
    """The request layer of an evaluation's config (:func:`fibserve.bench.config.resolve_config`): its
    tolerances, and its ``timeout`` as the correctness and timing limits; None when it sets none."""
    overrides: dict[str, Any] = {"atol": request.atol, "rtol": request.rtol}
    if request.timeout is not None:
        overrides["timeouts"] = {"correctness": request.timeout, "timing": request.timeout}
    return {k: v for k, v in overrides.items() if v is not None} or None


def _failed(code: str, message: str, **result: Any) -> Outcome:
    return Outcome(TaskStatus.FAILED, result=result, error={"code": code, "message": message})


class TaskWork:
    """The default task handler: dispatches on ``task.kind``."""

    def __init__(self, catalog: Catalog, settings: ServeSettings, tools: ToolPaths) -> None:
        self.catalog = catalog
        self.settings = settings
        self.tools = tools
        token = [settings.token.get_secret_value()] if settings.token else []
        self.redact = Redactor.from_environment(extra=token)
        """The second line behind the sandbox: the server's token and credential-like variables, also
        encoded, never reach a stored answer (candidates wrote parts of it)."""

    def __call__(self, task: TaskRecord, ctx: RunContext) -> Outcome:
        """Run ``task`` on the lane of ``ctx``; every string of the outcome is redacted (:attr:`redact`)."""
        outcome = self._run(task, ctx)
        return Outcome(outcome.status, self.redact.json(outcome.result), self.redact.json(outcome.error))

    def _run(self, task: TaskRecord, ctx: RunContext) -> Outcome:
        handler = {"evaluate": self.evaluate, "sanitize": self.sanitize, "profile": self.profile}.get(
            task.kind
        )
        if handler is None:
            return _failed("unknown_kind", f"this server cannot run tasks of kind {task.kind!r}")
        confinement = sandbox_status()
        if not confinement.usable:
            return _failed("sandbox_unavailable", confinement.detail)
        try:
            definition = self.catalog.definition(task.definition)
            workloads = self.catalog.select(task.definition, task.request.get("workload_uuids"))
        except (NotFound, WorkloadMismatch) as exc:
            return _failed(
                "catalog_changed",
                f"{exc}; the server was restarted with other trace sets since the task was accepted",
            )
        return handler(task, ctx, definition, workloads)

    def evaluate(self, task: TaskRecord, ctx: RunContext, definition: Definition, workloads: list) -> Outcome:
        """Evaluate the solution on every workload with the lane's Evaluator."""
        request = EvaluateRequest.model_validate(task.request)

        def progress(*_args: Any, **_kwargs: Any) -> None:
            ctx.check()

        evaluator: Evaluator = ctx.resources
        ctx.on_interrupt(lambda _reason: evaluator.cancel())  # kill a call still running, not just the next
        report = evaluator.evaluate(
            definition,
            request.solution,
            workloads,
            overrides=request_overrides(request),
            progress=progress,
            baseline=self.catalog.baseline(definition.name),
        )
        ctx.check()
        result = evaluation_result(report)
        if report.task_error:
            return _failed("evaluation_error", report.task_error, **result)
        return Outcome(TaskStatus.COMPLETED, result=result)

    def sanitize(self, task: TaskRecord, ctx: RunContext, definition: Definition, workloads: list) -> Outcome:
        """Run compute-sanitizer over the candidate, once per (tool, workload)."""
        from fibserve.tools.sanitizer import SanitizerUnavailable, run_sanitizer

        request = SanitizeRequest.model_validate(task.request)
        job = self._job(task, ctx, request, definition, workloads)
        return _tool_outcome(
            lambda: run_sanitizer(job, tool_path=self.tools.compute_sanitizer, tools=request.sanitizer_types),
            SanitizerUnavailable,
            "sanitizer",
            lambda r: f"== {r.tool} on {r.workload}: {'passed' if r.passed else 'FAILED'}\n{r.output}",
        )

    def profile(self, task: TaskRecord, ctx: RunContext, definition: Definition, workloads: list) -> Outcome:
        """Run Nsight Compute over one warm-up and one measured call per workload."""
        from fibserve.tools.ncu import ProfilerUnavailable, run_profile

        request = ProfileRequest.model_validate(task.request)
        job = self._job(task, ctx, request, definition, workloads)
        return _tool_outcome(
            lambda: run_profile(
                job,
                tool_path=self.tools.ncu,
                ncu_set=request.set,
                sections=request.sections,
                metrics=request.metrics,
                page=request.page,
                digest=request.digest,
            ),
            ProfilerUnavailable,
            "profile",
            lambda r: f"== ncu on {r.workload} (exit {r.exit_code})\n{r.report}",
        )

    def _job(
        self,
        task: TaskRecord,
        ctx: RunContext,
        request: SanitizeRequest | ProfileRequest,
        definition: Definition,
        workloads: list,
    ) -> Any:
        """The :class:`fibserve.tools.jobs.CandidateJob` of a sanitize or profile task on this lane."""
        from fibserve.tools.jobs import CandidateJob

        return CandidateJob(
            solution=request.solution,
            definition=definition,
            workloads=workloads,
            catalog=self.catalog,
            device=ctx.device,
            timeout_s=request.timeout or self.settings.tool_timeout_s,
            scratch=self.settings.state_dir / "runs" / task.id,
            on_process=ctx.register,
            check=ctx.check,
        )


def _tool_outcome(
    run: Callable[[], list[Any]],
    unavailable: type[Exception],
    key: str,
    log_entry: Callable[[Any], str],
) -> Outcome:
    """The outcome of a tool task: its runs under ``key`` and their logs, or why the service could not run it.

    ``unavailable`` (the tool is missing or the lane has no GPU) fails the task with ``tool_unavailable``,
    :class:`fibserve.tools.jobs.ToolInfrastructureError` with ``tool_infrastructure``.
    """
    from fibserve.tools.jobs import ToolInfrastructureError

    try:
        runs = run()
    except unavailable as exc:
        return _failed("tool_unavailable", str(exc))
    except ToolInfrastructureError as exc:
        return _failed("tool_infrastructure", str(exc))
    mode = sandbox_status().mode
    logs = "\n\n".join([*([UNSAFE_NOTE] if mode == "unsafe-none" else []), *(log_entry(r) for r in runs)])
    result = {key: [r.model_dump(mode="json") for r in runs], "logs": logs, "sandbox": mode}
    return Outcome(TaskStatus.COMPLETED, result=result)


def evaluation_result(report: EvaluationReport) -> dict[str, Any]:
    """The answer fields (:class:`fibserve.api.TaskAnswer`) of an evaluation report, by the same names, as JSON;
    the report's ``notes`` become the answer's ``logs``, one line each."""
    data = report.model_dump(
        mode="json", include={"traces", "analysis", "executed", "config", "build", "device_info", "sandbox",
                              "timings_s", "limits_hit", "workload_errors"},
    )  # fmt: skip
    for empty_is_absent in ("limits_hit", "workload_errors"):
        data[empty_is_absent] = data[empty_is_absent] or None
    data["logs"] = "\n".join(report.notes) or None
    return data
