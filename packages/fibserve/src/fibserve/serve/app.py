"""The FIBServe FastAPI application.

``create_app(settings)`` loads the trace sets, opens the task store and returns the app; lanes start in the
app's lifespan and stop (re-queueing their running tasks) when it ends. Endpoint shapes are the models of
:mod:`fibserve.serve.models` (OpenAPI at ``/docs``); ``POST /compile`` answers synchronously with the static analysis (it needs no GPU, so it
runs on a bounded pool of its own instead of waiting behind GPU work in the lanes' queue).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Query, Response

import fibserve
from fibserve.tools.executables import ToolPaths
from fibserve.trace import Definition, Workload

from .admission import check_source_limits, check_tolerances
from .catalog import Catalog, NotFound, WorkloadMismatch
from .errors import ApiError, GuardMiddleware, install_error_handlers
from .models import (
    BatchRequest,
    CompileRequest,
    DefinitionSummary,
    ErrorBody,
    EvaluateRequest,
    HealthAnswer,
    ProfileRequest,
    SandboxInfo,
    SanitizeRequest,
    SubmitAnswer,
    TaskAnswer,
    WorkerInfo,
    normalize_solution_name,
)
from .scheduler import ResourceCloser, ResourceFactory, Scheduler, TaskRunner
from .settings import ServeSettings, resolve_devices
from .store import TaskRecord, TaskStore
from .waiters import TaskWaiters

log = logging.getLogger("fibserve.serve")

OPEN_PATHS = frozenset({"/health", "/docs", "/docs/oauth2-redirect", "/openapi.json", "/redoc"})
"""Paths that need no bearer token."""

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (401, 403, 404, 413, 422, 503)
}


@dataclass
class ServerState:
    """What the handlers share: settings, catalog, store, scheduler, wake-ups, tools."""

    settings: ServeSettings
    catalog: Catalog
    store: TaskStore
    devices: list[str]
    tools: ToolPaths
    runner: TaskRunner
    factory: ResourceFactory
    closer: ResourceCloser | None
    scheduler: Scheduler | None = None
    waiters: TaskWaiters | None = None
    compile_slots: asyncio.Semaphore | None = None
    requeued_at_start: list[str] = field(default_factory=list)


def create_app(
    settings: ServeSettings,
    *,
    catalog: Catalog | None = None,
    runner: TaskRunner | None = None,
    factory: ResourceFactory | None = None,
    closer: ResourceCloser | None = None,
) -> FastAPI:
    """Build the FIBServe app.

    Args:
        settings: server options.
        catalog: definitions and workloads (default: loaded from ``settings.roots``).
        runner, factory, closer: how lanes run tasks and build/release their per-device Evaluator
            (default: :mod:`fibserve.serve.work`, the real evaluator and tools).

    Raises:
        fibserve.trace.problems.TraceSetError: a trace-set root has errors.
        ValueError: a requested device does not exist, the evaluation config file is invalid, or
            ``FIBSERVE_CACHE_MAX_GB`` is not a positive number.
        RuntimeError: the task store cannot be opened.
    """
    from . import work

    _announce_sandbox(settings)
    if settings.eval_config is not None:
        from fibserve.bench.config import resolve_config

        resolve_config(None, config_path=settings.eval_config)  # a broken file fails here, not in every task
    from fibserve.build.cache import default_max_bytes

    default_max_bytes()  # a malformed FIBSERVE_CACHE_MAX_GB fails here, not in every build
    tools = ToolPaths.discover()
    catalog = catalog or Catalog.load(settings.roots)
    if settings.ray_address is not None and importlib.util.find_spec("ray") is None:
        raise RuntimeError("--ray needs Ray on this host: install fibserve with its extra, fibserve[ray]")
    # Under --ray the lanes are the cluster's GPUs: the front door needs none of its own.
    devices = resolve_devices(settings.devices) if settings.ray_address is None else []
    state = ServerState(
        settings=settings,
        catalog=catalog,
        store=TaskStore(settings.db_path, ttl_s=settings.task_ttl_s, max_attempts=settings.max_attempts),
        devices=devices,
        tools=tools,
        runner=runner or work.TaskWork(catalog, settings, tools),
        factory=factory or work.evaluator_factory(settings, catalog.roots),
        closer=closer or work.close_evaluator,
    )
    app = FastAPI(
        title="FIBServe",
        version=fibserve.__version__,
        description=(
            "Evaluation, sanitizer and profiler service for FlashInfer Trace definitions. Submit work with "
            "POST /evaluate, /sanitize or /profile (202 with a task id), then long-poll GET /tasks/{id}?timeout=S. "
            "POST /compile answers at once with the static analysis. Errors are `{error: {code, message}}`."
        ),
        lifespan=_lifespan,
        responses=_ERRORS,
    )
    app.state.fib = state
    install_error_handlers(app)
    app.add_middleware(
        GuardMiddleware,
        token=settings.token.get_secret_value() if settings.token else None,
        max_body_bytes=settings.max_body_bytes,
        open_paths=OPEN_PATHS,
    )
    _add_routes(app, state)
    return app


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    state: ServerState = app.state.fib
    state.waiters = TaskWaiters(asyncio.get_running_loop())
    state.compile_slots = asyncio.Semaphore(state.settings.compile_concurrency)
    requeued, failed = state.store.recover()
    state.requeued_at_start = requeued
    if requeued or failed:
        log.warning(
            "recovered the task store: %d re-queued, %d failed after repeated restarts",
            len(requeued),
            len(failed),
        )
    if state.settings.ray_address is not None:
        from .ray_lanes import RayScheduler  # the only import of Ray, and only under --ray

        state.scheduler = RayScheduler(state.store, state.settings, on_finish=state.waiters.notify_threadsafe)
    else:
        state.scheduler = Scheduler(
            state.store,
            state.devices,
            state.runner,
            state.factory,
            state.closer,
            on_finish=state.waiters.notify_threadsafe,
        )
    state.scheduler.start()
    sweeper = asyncio.create_task(_sweep(state.store))
    try:
        yield
    finally:
        sweeper.cancel()
        requeued_now = await asyncio.to_thread(state.scheduler.stop)
        if requeued_now:
            log.warning("shutdown: re-queued running tasks %s", requeued_now)
        state.store.close()


async def _sweep(store: TaskStore, every_s: float = 60.0) -> None:
    while True:
        await asyncio.sleep(every_s)
        try:
            store.expire()
        except Exception:
            log.exception("expiring old tasks failed")


def task_answer(record: TaskRecord) -> TaskAnswer:
    """The public answer for a stored task."""
    result = record.result or {}
    return TaskAnswer(
        task_id=record.id,
        kind=record.kind,
        status=record.status.value,
        definition=record.definition,
        solution=record.solution,
        device=record.lane,
        attempts=record.attempt,
        created_at=record.created_at,
        started_at=record.started_at,
        finished_at=record.finished_at,
        error=record.error,
        **{k: v for k, v in result.items() if k in TaskAnswer.model_fields},
    )


def _answer_json(answer: TaskAnswer | list[TaskAnswer]) -> Response:
    """``answer`` as an HTTP answer with non-finite floats as ``"NaN"``/``"Infinity"`` strings.

    FastAPI writes a ``response_model`` through a type adapter of its own, whose default turns every nested
    NaN into ``null`` (the outermost schema decides); the answer models' own serializer keeps the convention.
    """
    if isinstance(answer, list):
        body = "[" + ",".join(a.model_dump_json() for a in answer) + "]"
    else:
        body = answer.model_dump_json()
    return Response(content=body, media_type="application/json")


def _not_found(exc: NotFound) -> ApiError:
    return ApiError(
        404, exc.code, exc.message, {"close_matches": exc.close_matches} if exc.close_matches else None
    )


def _announce_sandbox(settings: ServeSettings) -> None:
    """Apply ``--unsafe-no-sandbox`` and say at start-up how candidates will run."""
    from fibserve import sandbox

    if settings.unsafe_no_sandbox:
        sandbox.allow_unsafe()
    current = sandbox.status()
    if current.mode == "bwrap":
        log.info("sandbox: %s", current.detail)
    elif current.mode == "unsafe-none":
        log.warning("%s", current.detail.upper())
    else:
        log.error("candidates will be refused: %s", current.detail)


def _add_routes(app: FastAPI, state: ServerState) -> None:
    catalog, store = state.catalog, state.store

    @app.get("/health", response_model=HealthAnswer, tags=["service"])
    def health() -> HealthAnswer:
        """Lanes, queue length and running count; needs no token."""
        from fibserve.sandbox import status as sandbox_status

        workers = [WorkerInfo(**w) for w in state.scheduler.health()] if state.scheduler else []
        counts = store.counts()
        confinement = sandbox_status()
        return HealthAnswer(
            status="ok" if workers and all(w.healthy for w in workers) and confinement.usable else "degraded",
            workers=workers,
            queue_size=counts["pending"],
            running=counts["running"],
            version=fibserve.__version__,
            tolerances_locked=state.settings.tolerances_locked,
            tools=state.tools.as_dict(),
            sandbox=SandboxInfo(mode=confinement.mode, detail=confinement.detail),
        )

    @app.get("/definitions", response_model=list[DefinitionSummary], tags=["catalog"])
    def definitions() -> list[DefinitionSummary]:
        """Every definition on this server: name, op_type, description."""
        return [
            DefinitionSummary(name=d.name, op_type=d.op_type, description=d.description)
            for d in catalog.definitions()
        ]

    @app.get("/definitions/{name}", response_model=Definition, tags=["catalog"])
    def definition(name: str) -> Definition:
        """One definition; 404 naming close matches when unknown."""
        try:
            return catalog.definition(name)
        except NotFound as exc:
            raise _not_found(exc) from None

    @app.get("/definitions/{name}/workloads", response_model=list[Workload], tags=["catalog"])
    def workloads(name: str) -> list[Workload]:
        """The workloads of one definition, in load order."""
        try:
            return catalog.workloads(name)
        except NotFound as exc:
            raise _not_found(exc) from None

    @app.get("/workloads/{uuid}", response_model=Workload, tags=["catalog"])
    def workload(uuid: str) -> Workload:
        """One workload by uuid."""
        try:
            return catalog.workload(uuid)[1]
        except NotFound as exc:
            raise _not_found(exc) from None

    def submit(kind: str, request: EvaluateRequest | SanitizeRequest | ProfileRequest) -> SubmitAnswer:
        solution = request.solution
        check_source_limits(solution, state.settings)
        try:
            chosen = catalog.select(solution.definition, request.workload_uuids)
        except NotFound as exc:
            if exc.code == "unknown_definition":
                exc.message = (
                    f"the solution implements definition {solution.definition!r}, which is not on this server; "
                    f"{exc.hint}"
                )
            raise _not_found(exc) from None
        except WorkloadMismatch as exc:
            raise ApiError(422, "workload_mismatch", str(exc)) from None
        name = normalize_solution_name(solution.name)
        body = request.model_dump(mode="json")
        body["solution"]["name"] = name
        body["workload_uuids"] = [w.uuid for w in chosen]
        record = store.submit(kind, solution.definition, name, body)
        if state.scheduler is not None:
            state.scheduler.notify()
        return SubmitAnswer(
            task_id=record.id,
            kind=kind,
            status=record.status.value,
            definition=record.definition,
            normalized_solution_name=name,
            workload_uuids=body["workload_uuids"],
        )

    @app.post("/evaluate", status_code=202, response_model=SubmitAnswer, tags=["tasks"])
    def evaluate(request: EvaluateRequest) -> SubmitAnswer:
        """Queue an evaluation (build, static checks, correctness, timing) over the chosen workloads.

        A server with locked tolerances answers 403 ``tolerances_locked`` to a request that sets atol or rtol.
        """
        check_tolerances(request, state.settings)
        return submit("evaluate", request)

    @app.post("/sanitize", status_code=202, response_model=SubmitAnswer, tags=["tasks"])
    def sanitize(request: SanitizeRequest) -> SubmitAnswer:
        """Queue compute-sanitizer runs (one per tool and workload)."""
        return submit("sanitize", request)

    @app.post("/profile", status_code=202, response_model=SubmitAnswer, tags=["tasks"])
    def profile(request: ProfileRequest) -> SubmitAnswer:
        """Queue an Nsight Compute profile (one warm-up and one measured call per workload)."""
        return submit("profile", request)

    from fibserve.static_check import Analysis

    @app.post("/compile", response_model=Analysis, tags=["analysis"])
    async def compile_(request: CompileRequest) -> Any:
        """Static analysis of a solution, answered directly: policy, compile log, PTX/SASS families, resources."""
        check_source_limits(request.solution, state.settings)
        try:
            definition = catalog.definition(request.solution.definition)
        except NotFound as exc:
            raise _not_found(exc) from None
        from . import work

        assert state.compile_slots is not None
        async with state.compile_slots:
            try:
                analysis = await asyncio.wait_for(
                    asyncio.to_thread(
                        work.static_analysis,
                        request.solution,
                        definition,
                        request.arch,
                        state.settings.compile_timeout_s,
                    ),
                    timeout=state.settings.compile_timeout_s + 30,
                )
            except TimeoutError:
                raise ApiError(
                    503,
                    "compile_timeout",
                    f"static analysis took longer than {state.settings.compile_timeout_s:g} s",
                ) from None
        return analysis

    async def wait_for(task_ids: list[str], timeout: float) -> list[TaskRecord]:
        assert state.waiters is not None
        deadline = time.monotonic() + min(timeout, state.settings.max_long_poll_s)
        while True:
            records = [store.get(task_id) for task_id in task_ids]
            unknown = [task_id for task_id, rec in zip(task_ids, records, strict=True) if rec is None]
            if unknown:
                raise ApiError(
                    404,
                    "unknown_task",
                    f"unknown task id(s) {unknown[:10]}: never submitted here, or the result expired "
                    f"(answers are kept {state.settings.task_ttl_s:g} s after a task finishes)",
                )
            pending = [rec.id for rec in records if rec is not None and not rec.status.is_final]
            remaining = deadline - time.monotonic()
            if not pending or remaining <= 0:
                return [rec for rec in records if rec is not None]
            await state.waiters.wait(pending, remaining)

    @app.get("/tasks/{task_id}", response_model=TaskAnswer, tags=["tasks"])
    async def task(
        task_id: str,
        timeout: float = Query(
            0.0, ge=0, le=3600, description="seconds to wait for the task to finish (long poll)"
        ),
    ) -> Any:
        """A task's status and, once finished, its answer; waits up to ``timeout`` seconds for it to finish."""
        return _answer_json(task_answer((await wait_for([task_id], timeout))[0]))

    @app.post("/tasks/batch", response_model=list[TaskAnswer], tags=["tasks"])
    async def batch(request: BatchRequest) -> Any:
        """Several tasks in the given order; waits up to ``timeout`` seconds for all of them to finish."""
        return _answer_json([task_answer(rec) for rec in await wait_for(request.task_ids, request.timeout)])

    @app.delete("/tasks/{task_id}", response_model=TaskAnswer, tags=["tasks"])
    def cancel(task_id: str) -> Any:
        """Cancel a task: pending ones fail at once (code ``cancelled``), running ones are interrupted."""
        record = store.cancel(task_id)
        if record is None:
            raise ApiError(404, "unknown_task", f"unknown task id {task_id!r} (never submitted, or expired)")
        if not record.status.is_final and state.scheduler is not None:
            state.scheduler.interrupt(task_id)
        elif state.waiters is not None:
            state.waiters.notify_threadsafe(task_id)
        return _answer_json(task_answer(record))
