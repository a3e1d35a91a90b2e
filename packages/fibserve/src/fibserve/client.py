"""Python client of the FIBServe HTTP API (httpx), with typed answers and two kinds of failure.

- :class:`ServiceUnreachable`: the service could not be reached or did not answer in time (an
  infrastructure problem; retrying later may help, the candidate is not to blame).
- :class:`APIError`: the service answered with an error; ``status_code``, ``code`` and the server's
  ``message`` say what to fix.

Example::

    with FIBServeClient("http://127.0.0.1:10000") as client:
        task_id = client.submit_evaluate(solution)
        answer = client.wait(task_id, timeout=600)
        for trace in answer.traces or []:
            print(trace.workload.uuid, trace.evaluation.status)

Many candidates for one definition (an RL step's samples), each result as soon as it is ready::

    for result in client.evaluate_many(solutions, wait_timeout=3600):
        print(result.index, result.status, result.statuses)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter

from fibserve.api import (
    MAX_BATCH,
    BatchSubmitAnswer,
    DefinitionSummary,
    HealthAnswer,
    SubmitAnswer,
    TaskAnswer,
)
from fibserve.trace import Definition, EvaluationStatus, Solution, Workload

if TYPE_CHECKING:
    from fibserve.analysis.report import Analysis

DEFAULT_URL = "http://127.0.0.1:10000"
"""Where ``fibserve serve`` listens by default."""


class FIBServeError(Exception):
    """Base class of the client's errors."""


class ServiceUnreachable(FIBServeError):
    """The service did not answer: connection refused, DNS failure, or a timeout (infrastructure)."""


class APIError(FIBServeError):
    """The service answered with an HTTP error.

    Attributes:
        status_code: the HTTP status (401, 404, 413, 422, 5xx...).
        code: the server's error code (``unknown_definition``, ``invalid_request``...).
        message: the server's explanation, meant for a person.
        details: structured extras (validation errors, close matches).
    """

    def __init__(self, status_code: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(f"HTTP {status_code} {code}: {message}")
        self.status_code = status_code
        self.code = code
        self.message = message
        self.details = details


class TaskWaitTimeout(FIBServeError):
    """:meth:`FIBServeClient.wait` gave up before the task finished; ``last`` is its latest answer."""

    def __init__(self, task_id: str, waited_s: float, last: TaskAnswer | None) -> None:
        status = last.status if last else "unknown"
        super().__init__(f"task {task_id} still {status} after waiting {waited_s:.0f} s")
        self.task_id = task_id
        self.last = last


class BatchWaitTimeout(FIBServeError):
    """:meth:`FIBServeClient.as_finished` gave up before every task finished; ``task_ids`` are the unfinished."""

    def __init__(self, task_ids: list[str], waited_s: float) -> None:
        super().__init__(f"{len(task_ids)} task(s) still unfinished after waiting {waited_s:.0f} s")
        self.task_ids = task_ids


@dataclass(frozen=True)
class CandidateResult:
    """One candidate's finished task, as :meth:`FIBServeClient.evaluate_many` yields it."""

    index: int
    """The candidate's position in the list given (its task's, for :meth:`FIBServeClient.as_finished`)."""
    answer: TaskAnswer
    """The task's final answer: traces, analysis, build, logs."""

    @property
    def task_id(self) -> str:
        """The candidate's task id."""
        return self.answer.task_id

    @property
    def status(self) -> str:
        """``completed`` (the traces hold the candidate's verdict) or ``failed`` (the service could not evaluate
        it: ``answer.error`` says why; not the candidate's fault)."""
        return self.answer.status

    @property
    def statuses(self) -> list[EvaluationStatus | None]:
        """The candidate's status on each workload, in run order (PASSED, COMPILE_ERROR, INCORRECT_NUMERICAL,
        ...); None for a workload where it was not executed (a CUDA candidate without a GPU)."""
        return [t.evaluation.status if t.evaluation else None for t in self.answer.traces or []]


T = TypeVar("T")


class _Reconnect:
    """Rides out a server that is unreachable for at most ``reconnect_s`` seconds in a row (tasks survive
    restarts, so a wait may go on across one)."""

    def __init__(self, reconnect_s: float) -> None:
        self.reconnect_s = reconnect_s
        self.down_since: float | None = None

    def attempt(self, call: Callable[[], T], pause_s: float) -> T | None:
        """``call()``; None after sleeping ``pause_s`` when the server is unreachable.

        Raises:
            ServiceUnreachable: it has been unreachable for ``reconnect_s``.
        """
        try:
            result = call()
        except ServiceUnreachable:
            now = time.monotonic()
            self.down_since = self.down_since or now
            if now - self.down_since >= self.reconnect_s:
                raise
            time.sleep(pause_s)
            return None
        self.down_since = None
        return result


_FINAL = ("completed", "failed")
_TASKS = TypeAdapter(list[TaskAnswer])
_SUMMARIES = TypeAdapter(list[DefinitionSummary])
_WORKLOADS = TypeAdapter(list[Workload])


class FIBServeClient:
    """Talks to one FIBServe server.

    Args:
        base_url: e.g. ``http://127.0.0.1:10000`` (``SERVICE_URL`` in PTXBench).
        token: bearer token when the server was started with ``--token``.
        timeout: seconds for connecting and for ordinary requests; long polls add their own wait to it.
    """

    def __init__(self, base_url: str = DEFAULT_URL, token: str | None = None, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)

    @classmethod
    def from_env(cls, timeout: float = 30.0) -> FIBServeClient:
        """A client for ``$SERVICE_URL`` (default ``http://127.0.0.1:10000``) with ``$FIBSERVE_TOKEN``, if set."""
        return cls(
            os.environ.get("SERVICE_URL") or DEFAULT_URL, os.environ.get("FIBSERVE_TOKEN") or None, timeout
        )

    # -- plumbing -----------------------------------------------------------------------------------------

    def _request(self, method: str, path: str, *, wait_s: float = 0.0, **kwargs: Any) -> Any:
        timeout = httpx.Timeout(self.timeout + wait_s, connect=self.timeout)
        try:
            response = self._http.request(method, path, timeout=timeout, **kwargs)
        except httpx.TransportError as exc:
            raise ServiceUnreachable(
                f"FIBServe at {self.base_url} is unreachable ({method} {path}): {exc!r}"
            ) from exc
        if response.is_success:
            return response.json()
        code, message, details = "http_error", response.text[:2000], None
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            error = body["error"]
            code = str(error.get("code", code))
            message = str(error.get("message", message))
            details = error.get("details")
        elif isinstance(body, dict) and "detail" in body:
            message = str(body["detail"])
        raise APIError(response.status_code, code, message, details)

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()

    def __enter__(self) -> FIBServeClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- catalog ------------------------------------------------------------------------------------------

    def health(self) -> HealthAnswer:
        """``GET /health``: lanes ``{device, healthy, busy}``, ``queue_size``, ``running``."""
        return HealthAnswer.model_validate(self._request("GET", "/health"))

    def definitions(self) -> list[DefinitionSummary]:
        """``GET /definitions``: name, op_type and description of every definition."""
        return _SUMMARIES.validate_python(self._request("GET", "/definitions"))

    def definition(self, name: str) -> Definition:
        """``GET /definitions/{name}``. Raises APIError 404 (with close matches) when unknown."""
        return Definition.model_validate(self._request("GET", f"/definitions/{_q(name)}"))

    def workloads(self, name: str) -> list[Workload]:
        """``GET /definitions/{name}/workloads``."""
        return _WORKLOADS.validate_python(self._request("GET", f"/definitions/{_q(name)}/workloads"))

    def workload(self, uuid: str) -> Workload:
        """``GET /workloads/{uuid}``."""
        return Workload.model_validate(self._request("GET", f"/workloads/{_q(uuid)}"))

    # -- submitting ---------------------------------------------------------------------------------------

    def submit(self, kind: str, solution: Solution | dict[str, Any], **fields: Any) -> SubmitAnswer:
        """``POST /{kind}`` (evaluate, sanitize, profile) with ``fields``; None-valued fields are left out."""
        body = {"solution": _solution_json(solution), **{k: v for k, v in fields.items() if v is not None}}
        return SubmitAnswer.model_validate(self._request("POST", f"/{kind}", json=body))

    def submit_evaluate(
        self,
        solution: Solution | dict[str, Any],
        workload_uuids: list[str] | None = None,
        *,
        timeout: float | None = None,
        atol: float | None = None,
        rtol: float | None = None,
    ) -> str:
        """Queue an evaluation; returns the task id (see :meth:`wait`)."""
        answer = self.submit(
            "evaluate", solution, workload_uuids=workload_uuids, timeout=timeout, atol=atol, rtol=rtol
        )
        return answer.task_id

    def submit_sanitize(
        self,
        solution: Solution | dict[str, Any],
        workload_uuids: list[str] | None = None,
        *,
        sanitizer_types: list[str] | None = None,
        timeout: float | None = None,
    ) -> str:
        """Queue compute-sanitizer runs (memcheck by default); returns the task id."""
        answer = self.submit(
            "sanitize",
            solution,
            workload_uuids=workload_uuids,
            sanitizer_types=sanitizer_types,
            timeout=timeout,
        )
        return answer.task_id

    def submit_profile(
        self,
        solution: Solution | dict[str, Any],
        workload_uuids: list[str] | None = None,
        *,
        set: str | None = None,
        sections: list[str] | None = None,
        metrics: list[str] | None = None,
        page: str | None = None,
        timeout: float | None = None,
        digest: bool | None = None,
    ) -> str:
        """Queue an Nsight Compute profile; returns the task id. ``digest``: also executed instructions per SASS
        opcode and a short summary in each run (``ProfileRun.executed_opcodes``, ``summary``)."""
        answer = self.submit(
            "profile",
            solution,
            workload_uuids=workload_uuids,
            set=set,
            sections=sections,
            metrics=metrics,
            page=page,
            timeout=timeout,
            digest=digest,
        )
        return answer.task_id

    def submit_evaluate_batch(
        self,
        solutions: Iterable[Solution | dict[str, Any]],
        workload_uuids: list[str] | None = None,
        *,
        timeout: float | None = None,
        atol: float | None = None,
        rtol: float | None = None,
    ) -> BatchSubmitAnswer:
        """``POST /evaluate/batch``: one evaluation task per candidate (at most ``MAX_BATCH``, all for one
        definition, with the same options), queued all or none; the answer lists their task ids in order.

        Raises:
            APIError: e.g. 422 ``mixed_definitions``, or a candidate's own refusal (the message names
                ``solutions[i]``).
        """
        fields = {"workload_uuids": workload_uuids, "timeout": timeout, "atol": atol, "rtol": rtol}
        body = {
            "solutions": [_solution_json(s) for s in solutions],
            **{k: v for k, v in fields.items() if v is not None},
        }
        return BatchSubmitAnswer.model_validate(self._request("POST", "/evaluate/batch", json=body))

    def compile(self, solution: Solution | dict[str, Any], arch: str = "sm_90a") -> Analysis:
        """``POST /compile``: the static analysis (:class:`fibserve.analysis.report.Analysis`), answered directly."""
        data = self._request(
            "POST", "/compile", json={"solution": _solution_json(solution), "arch": arch}, wait_s=600.0
        )
        from fibserve.analysis.report import Analysis

        return Analysis.model_validate(data)

    # -- results ------------------------------------------------------------------------------------------

    def task(self, task_id: str, timeout: float = 0.0) -> TaskAnswer:
        """``GET /tasks/{id}?timeout=S``: waits up to ``timeout`` seconds on the server for the task to finish."""
        data = self._request("GET", f"/tasks/{_q(task_id)}", params={"timeout": timeout}, wait_s=timeout)
        return TaskAnswer.model_validate(data)

    def batch(self, task_ids: list[str], timeout: float = 0.0, *, until: str = "all") -> list[TaskAnswer]:
        """``POST /tasks/batch``: the tasks in the given order, waiting up to ``timeout`` s for all of them to
        finish (``until="any"``: for any one of them)."""
        body = {"task_ids": task_ids, "timeout": timeout, "until": until}
        return _TASKS.validate_python(self._request("POST", "/tasks/batch", json=body, wait_s=timeout))

    def cancel(self, task_id: str) -> TaskAnswer:
        """``DELETE /tasks/{id}``: a pending task fails at once (code ``cancelled``); a running one is stopped."""
        return TaskAnswer.model_validate(self._request("DELETE", f"/tasks/{_q(task_id)}"))

    def wait(
        self, task_id: str, timeout: float | None = None, *, poll_s: float = 30.0, reconnect_s: float = 60.0
    ) -> TaskAnswer:
        """Long-poll until the task is ``completed`` or ``failed``.

        Tasks survive server restarts, so a server that is briefly unreachable is retried for up to
        ``reconnect_s`` seconds in a row before :class:`ServiceUnreachable` is raised.

        Args:
            timeout: seconds to wait in total; None waits indefinitely.
            poll_s: longest single long poll (seconds).
            reconnect_s: longest stretch of unreachability tolerated (seconds).

        Raises:
            TaskWaitTimeout: ``timeout`` passed first (``.last`` holds the latest answer).
            ServiceUnreachable: the server stayed unreachable for ``reconnect_s``.
            APIError: e.g. 404 for an unknown or expired task.
        """
        start = time.monotonic()
        last: TaskAnswer | None = None
        reconnect = _Reconnect(reconnect_s)
        while True:
            remaining = None if timeout is None else timeout - (time.monotonic() - start)
            if remaining is not None and remaining <= 0:
                raise TaskWaitTimeout(task_id, time.monotonic() - start, last)
            poll = poll_s if remaining is None else min(poll_s, remaining)
            answer = reconnect.attempt(partial(self.task, task_id, timeout=poll), _pause(remaining))
            last = answer or last
            if answer is not None and answer.status in _FINAL:
                return answer

    def as_finished(
        self,
        task_ids: list[str],
        timeout: float | None = None,
        *,
        poll_s: float = 30.0,
        reconnect_s: float = 60.0,
    ) -> Iterator[CandidateResult]:
        """Yield each task's final answer as soon as it has one (``POST /tasks/batch`` with ``until: any``),
        until all have; tasks that finish together come in the order they finished.

        Args:
            timeout: seconds to wait in total; None waits indefinitely.
            poll_s: longest single long poll (seconds).
            reconnect_s: longest stretch of unreachability tolerated (seconds), as for :meth:`wait`.

        Raises:
            BatchWaitTimeout: ``timeout`` passed first (``.task_ids``: the unfinished).
            ServiceUnreachable: the server stayed unreachable for ``reconnect_s``.
            APIError: e.g. 404 for an unknown or expired task.
        """
        position = {task_id: i for i, task_id in enumerate(task_ids)}
        unfinished = list(position)
        start = time.monotonic()
        reconnect = _Reconnect(reconnect_s)
        while unfinished:
            remaining = None if timeout is None else timeout - (time.monotonic() - start)
            if remaining is not None and remaining <= 0:
                raise BatchWaitTimeout(unfinished, time.monotonic() - start)
            poll = poll_s if remaining is None else min(poll_s, remaining)
            window = unfinished[:MAX_BATCH]  # the earliest: a batch's tasks are served in order
            answers = reconnect.attempt(
                partial(self.batch, window, timeout=poll, until="any"), _pause(remaining)
            )
            finished = sorted(
                (a for a in answers or [] if a.status in _FINAL), key=lambda a: a.finished_at or 0.0
            )
            done = {a.task_id for a in finished}
            unfinished = [task_id for task_id in unfinished if task_id not in done]
            for answer in finished:
                yield CandidateResult(position[answer.task_id], answer)

    def evaluate(
        self,
        solution: Solution | dict[str, Any],
        workload_uuids: list[str] | None = None,
        *,
        wait_timeout: float | None = None,
        **options: Any,
    ) -> TaskAnswer:
        """Submit an evaluation and wait for its answer (``options``: timeout, atol, rtol)."""
        return self.wait(self.submit_evaluate(solution, workload_uuids, **options), timeout=wait_timeout)

    def evaluate_many(
        self,
        solutions: Iterable[Solution | dict[str, Any]],
        workload_uuids: list[str] | None = None,
        *,
        wait_timeout: float | None = None,
        **options: Any,
    ) -> Iterator[CandidateResult]:
        """Evaluate many candidates for one definition, each result as soon as it is ready.

        Every candidate is queued now (``POST /evaluate/batch``, ``MAX_BATCH`` a request) with the same
        ``workload_uuids`` and ``options`` (timeout, atol, rtol); the iterator returned yields a
        :class:`CandidateResult` per candidate as its task finishes (``result.index`` is its position in
        ``solutions``), waiting up to ``wait_timeout`` seconds in total (None: indefinitely).

        Raises:
            APIError: a batch was refused (by then the candidates of earlier requests are queued, and their
                task ids are lost to the caller: keep a batch within ``MAX_BATCH`` to make it all or none).
            BatchWaitTimeout, ServiceUnreachable: while iterating, as :meth:`as_finished`.
        """
        solutions = list(solutions)
        task_ids: list[str] = []
        for start in range(0, len(solutions), MAX_BATCH):
            answer = self.submit_evaluate_batch(
                solutions[start : start + MAX_BATCH], workload_uuids, **options
            )
            task_ids.extend(answer.task_ids)
        return self.as_finished(task_ids, wait_timeout)


def _pause(remaining: float | None) -> float:
    """Seconds to sleep before trying an unreachable server again: 2 s, less when the wait is nearly over."""
    return min(2.0, max(0.1, remaining or 2.0))


def _q(segment: str) -> str:
    """``segment`` quoted as one URL path segment (a name with ``/`` or ``?`` cannot change the route)."""
    return quote(segment, safe="")


def _solution_json(solution: Solution | dict[str, Any]) -> dict[str, Any]:
    if isinstance(solution, Solution):
        return solution.model_dump(mode="json")
    return dict(solution)
