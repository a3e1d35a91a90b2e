"""The route handlers of the FIBServe HTTP API, at module level on one :class:`fastapi.APIRouter`.

Each handler gets the app's :class:`~fibserve.serve.state.ServerState` through the ``server_state``
dependency (``app.state.fib``), so a test can call it directly with a state of its own. ``create_app``
(:mod:`fibserve.serve.app`) includes :data:`router`; the order of the routes here is the order of the
OpenAPI document.
"""

from __future__ import annotations

import logging
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

import fibserve
from fibserve.analysis.report import Analysis
from fibserve.api import (
    BatchRequest,
    BatchSubmitAnswer,
    CompileRequest,
    DefinitionSummary,
    EvaluateBatchRequest,
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
from fibserve.datasets.catalog import NotFound, WorkloadMismatch
from fibserve.static_analysis import check
from fibserve.trace import Definition, Workload
from fibserve.trace.legacy import as_legacy

from .admission import check_source_limits, check_timeout, check_tolerances
from .build_ahead import builds_ahead
from .errors import ApiError
from .state import ServerState
from .store import Submission, TaskRecord

log = logging.getLogger(__name__)

router = APIRouter()
"""Every endpoint except the docs (FastAPI serves ``/docs`` and ``/openapi.json`` itself)."""


def server_state(request: Request) -> ServerState:
    """The state of the app serving ``request`` (``app.state.fib``, set by ``create_app``)."""
    return request.app.state.fib


State = Annotated[ServerState, Depends(server_state)]


def client_of(http: Request) -> str:
    """Who sent ``http``: its peer address (the fair shares of the queue and of ``POST /compile`` are per
    address; behind a proxy every client has the proxy's)."""
    return http.client.host if http.client else "unknown"


def task_answer(record: TaskRecord) -> TaskAnswer:
    """The public answer for a stored task.

    The stored result holds :class:`fibserve.api.TaskAnswer` fields by their own names
    (:func:`fibserve.serve.work.evaluation_result`); a field this server does not answer (a result stored by
    another version of FIBServe) is left out of the answer and logged once per read, naming the fields.
    """
    result = record.result or {}
    unknown = sorted(set(result) - set(TaskAnswer.model_fields))
    if unknown:
        log.warning(
            "task %s: its stored result has fields this server does not answer, left out: %s (written by "
            "another version of FIBServe?)",
            record.id,
            ", ".join(unknown),
        )
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


@router.get("/health", response_model=HealthAnswer, tags=["service"])
def health(state: State, request: Request) -> HealthAnswer:
    """Lanes, queue length and running count; needs no token. The running tasks' ids (with them anyone could
    read or cancel another client's task) only to a request that carries the server's token."""
    from fibserve.sandbox import status as sandbox_status

    workers = [WorkerInfo(**w) for w in state.scheduler.health()] if state.scheduler else []
    if not getattr(request.state, "authenticated", False):
        workers = [w.model_copy(update={"task_id": None}) for w in workers]
    counts = state.store.counts()
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
        build_ahead=state.build_ahead.info() if state.build_ahead is not None else None,
    )


@router.get("/definitions", response_model=list[DefinitionSummary], tags=["catalog"])
def definitions(state: State) -> list[DefinitionSummary]:
    """Every definition on this server: name, op_type, description."""
    return [
        DefinitionSummary(name=d.name, op_type=d.op_type, description=d.description)
        for d in state.catalog.definitions()
    ]


@router.get("/definitions/{name}", response_model=Definition, tags=["catalog"])
def definition(name: str, state: State) -> Definition:
    """One definition; 404 naming close matches when unknown."""
    try:
        return state.catalog.definition(name)
    except NotFound as exc:
        raise _not_found(exc) from None


@router.get("/definitions/{name}/workloads", response_model=list[Workload], tags=["catalog"])
def workloads(name: str, state: State) -> list[Workload]:
    """The workloads of one definition, in load order."""
    try:
        return state.catalog.workloads(name)
    except NotFound as exc:
        raise _not_found(exc) from None


@router.get("/workloads/{uuid}", response_model=Workload, tags=["catalog"])
def workload(uuid: str, state: State) -> Workload:
    """One workload by uuid."""
    try:
        return state.catalog.workload(uuid)[1]
    except NotFound as exc:
        raise _not_found(exc) from None


def admit(
    state: ServerState, kind: str, request: EvaluateRequest | SanitizeRequest | ProfileRequest
) -> Submission:
    """The task to queue for ``request``'s solution over the workloads it names (all by default): its
    normalized name and the body a lane runs (the legacy migration applied, the workloads spelled out).

    Raises:
        ApiError: 413 for sources over the limits, 404 for an unknown definition or workload, 422 for a
            workload of another definition or a timeout over the limit.
    """
    solution = request.solution
    check_source_limits(solution, state.settings)
    check_timeout(request, state.settings)
    try:
        chosen = state.catalog.select(solution.definition, request.workload_uuids)
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
    if state.settings.legacy:  # a 2025 solution is value-returning (fibserve.trace.legacy.as_legacy)
        legacy = as_legacy(solution, state.catalog.definition(solution.definition))
        body["solution"] = legacy.model_dump(mode="json")
    body["solution"]["name"] = name
    body["workload_uuids"] = [w.uuid for w in chosen]
    return Submission(name, body, prebuild=state.build_ahead is not None and builds_ahead(kind, solution))


def queue(
    state: ServerState, kind: str, definition: str, submissions: list[Submission], client: str
) -> list[TaskRecord]:
    """Store ``submissions`` as pending tasks of ``client`` (all or none) and wake the lanes and the builders."""
    records = state.store.submit_many(kind, definition, submissions, client=client)
    if state.scheduler is not None:
        state.scheduler.notify()
    if state.build_ahead is not None and any(s.prebuild for s in submissions):
        state.build_ahead.notify()
    return records


def submit(
    state: ServerState,
    kind: str,
    request: EvaluateRequest | SanitizeRequest | ProfileRequest,
    client: str = "unknown",
) -> SubmitAnswer:
    """Queue a task of ``kind`` for ``request``'s solution (:func:`admit`) on behalf of ``client``.

    Raises:
        ApiError: as :func:`admit`.
    """
    submission = admit(state, kind, request)
    (record,) = queue(state, kind, request.solution.definition, [submission], client)
    return SubmitAnswer(
        task_id=record.id,
        kind=kind,
        status=record.status.value,
        definition=record.definition,
        normalized_solution_name=submission.solution,
        workload_uuids=submission.request["workload_uuids"],
    )


@router.post("/evaluate", status_code=202, response_model=SubmitAnswer, tags=["tasks"])
def evaluate(request: EvaluateRequest, state: State, http: Request) -> SubmitAnswer:
    """Queue an evaluation (build, static checks, correctness, timing) over the chosen workloads.

    A server with locked tolerances answers 403 ``tolerances_locked`` to a request that sets atol or rtol.
    """
    check_tolerances(request, state.settings)
    return submit(state, "evaluate", request, client_of(http))


@router.post("/evaluate/batch", status_code=202, response_model=BatchSubmitAnswer, tags=["tasks"])
def evaluate_batch(request: EvaluateBatchRequest, state: State, http: Request) -> BatchSubmitAnswer:
    """Queue one evaluation per candidate, all for one definition and with the same options, and answer their
    task ids at once; all are queued or none. Collect the answers as they finish with ``POST /tasks/batch`` and
    ``until: any``. The queue is shared fairly between clients: a batch does not hold up another client's
    request behind all of its candidates (each client's n-th queued task goes before anyone's n+1-th).

    Raises (as HTTP answers):
        ApiError: 422 ``mixed_definitions`` when the candidates implement different definitions; otherwise as
            ``POST /evaluate``, the message naming the candidate (``solutions[3]: ...``).
    """
    check_tolerances(request, state.settings)
    definitions = sorted({s.definition for s in request.solutions})
    if len(definitions) > 1:
        raise ApiError(
            422,
            "mixed_definitions",
            f"a batch is for one definition, and these candidates implement {len(definitions)}: "
            f"{', '.join(definitions[:10])}; send one batch per definition",
            {"definitions": definitions},
        )
    submissions = []
    for index, single in enumerate(request.requests()):
        try:
            submissions.append(admit(state, "evaluate", single))
        except ApiError as exc:
            exc.message = f"solutions[{index}]: {exc.message}"
            raise
    records = queue(state, "evaluate", definitions[0], submissions, client_of(http))
    return BatchSubmitAnswer(
        definition=definitions[0],
        workload_uuids=submissions[0].request["workload_uuids"],
        task_ids=[r.id for r in records],
        normalized_solution_names=[s.solution for s in submissions],
    )


@router.post("/sanitize", status_code=202, response_model=SubmitAnswer, tags=["tasks"])
def sanitize(request: SanitizeRequest, state: State, http: Request) -> SubmitAnswer:
    """Queue compute-sanitizer runs (one per tool and workload)."""
    return submit(state, "sanitize", request, client_of(http))


@router.post("/profile", status_code=202, response_model=SubmitAnswer, tags=["tasks"])
def profile(request: ProfileRequest, state: State, http: Request) -> SubmitAnswer:
    """Queue an Nsight Compute profile (one warm-up and one measured call per workload)."""
    return submit(state, "profile", request, client_of(http))


@router.post("/compile", response_model=Analysis, tags=["analysis"])
async def compile_(request: CompileRequest, state: State, http: Request) -> Any:
    """Static analysis of a solution, answered directly: policy, compile log, PTX/SASS families, resources.
    Slots are shared fairly between client addresses, and one whose answer timed out stays taken until its
    analysis ends (:mod:`fibserve.serve.compile_slots`)."""
    check_source_limits(request.solution, state.settings)
    try:
        definition = state.catalog.definition(request.solution.definition)
    except NotFound as exc:
        raise _not_found(exc) from None
    solution = as_legacy(request.solution, definition) if state.settings.legacy else request.solution
    assert state.compile_slots is not None
    try:
        return await state.compile_slots.run(
            client_of(http),
            lambda: check(
                solution,
                definition=definition,
                arch=request.arch,
                timeout_s=state.settings.compile_timeout_s,
            ),
            timeout=state.settings.compile_timeout_s + 30,
        )
    except TimeoutError:
        raise ApiError(
            503,
            "compile_timeout",
            f"static analysis took longer than {state.settings.compile_timeout_s:g} s",
        ) from None


async def wait_for(
    state: ServerState, task_ids: list[str], timeout: float, *, until_any: bool = False
) -> list[TaskRecord]:
    """The records of ``task_ids`` once all are final (``until_any``: once any is), or as they are after
    ``timeout`` seconds (at most ``settings.max_long_poll_s``).

    Raises:
        ApiError: 404 ``unknown_task`` for an id never submitted here or expired.
    """
    assert state.waiters is not None
    deadline = time.monotonic() + min(timeout, state.settings.max_long_poll_s)
    while True:
        records = [state.store.get(task_id) for task_id in task_ids]
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
        if not pending or (until_any and len(pending) < len(records)) or remaining <= 0:
            return [rec for rec in records if rec is not None]
        await state.waiters.wait(pending, remaining)


@router.get("/tasks/{task_id}", response_model=TaskAnswer, tags=["tasks"])
async def task(
    task_id: str,
    state: State,
    timeout: float = Query(
        0.0, ge=0, le=3600, description="seconds to wait for the task to finish (long poll)"
    ),
) -> Any:
    """A task's status and, once finished, its answer; waits up to ``timeout`` seconds for it to finish."""
    return _answer_json(task_answer((await wait_for(state, [task_id], timeout))[0]))


@router.post("/tasks/batch", response_model=list[TaskAnswer], tags=["tasks"])
async def batch(request: BatchRequest, state: State) -> Any:
    """Several tasks in the given order; waits up to ``timeout`` seconds for all of them to finish (``until:
    any``: for any one of them)."""
    records = await wait_for(state, request.task_ids, request.timeout, until_any=request.until == "any")
    return _answer_json([task_answer(rec) for rec in records])


@router.delete("/tasks/{task_id}", response_model=TaskAnswer, tags=["tasks"])
def cancel(task_id: str, state: State) -> Any:
    """Cancel a task: pending ones fail at once (code ``cancelled``), running ones are interrupted."""
    record = state.store.cancel(task_id)
    if record is None:
        raise ApiError(404, "unknown_task", f"unknown task id {task_id!r} (never submitted, or expired)")
    if not record.status.is_final and state.scheduler is not None:
        state.scheduler.interrupt(task_id)
    elif state.waiters is not None:
        state.waiters.notify_threadsafe(task_id)
    return _answer_json(task_answer(record))
