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
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter

from fibserve.api import DefinitionSummary, HealthAnswer, SubmitAnswer, TaskAnswer
from fibserve.trace import Definition, Solution, Workload

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

    def batch(self, task_ids: list[str], timeout: float = 0.0) -> list[TaskAnswer]:
        """``POST /tasks/batch``: the tasks in the given order, waiting up to ``timeout`` s for all to finish."""
        data = self._request(
            "POST", "/tasks/batch", json={"task_ids": task_ids, "timeout": timeout}, wait_s=timeout
        )
        return _TASKS.validate_python(data)

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
        down_since: float | None = None
        while True:
            remaining = None if timeout is None else timeout - (time.monotonic() - start)
            if remaining is not None and remaining <= 0:
                raise TaskWaitTimeout(task_id, time.monotonic() - start, last)
            poll = poll_s if remaining is None else min(poll_s, remaining)
            try:
                last = self.task(task_id, timeout=poll)
                down_since = None
            except ServiceUnreachable:
                now = time.monotonic()
                down_since = down_since or now
                if now - down_since >= reconnect_s:
                    raise
                time.sleep(min(2.0, max(0.1, remaining or 2.0)))
                continue
            if last.status in ("completed", "failed"):
                return last

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


def _q(segment: str) -> str:
    """``segment`` quoted as one URL path segment (a name with ``/`` or ``?`` cannot change the route)."""
    return quote(segment, safe="")


def _solution_json(solution: Solution | dict[str, Any]) -> dict[str, Any]:
    if isinstance(solution, Solution):
        return solution.model_dump(mode="json")
    return dict(solution)
