"""HTTP errors as ``{"error": {"code", "message", "details"}}``, plus the auth and body-size middleware.

Every non-2xx answer of the server has this one shape, whether it comes from routing (404), validation
(422), the body limit (413), auth (401) or a handler. Validation messages name the field path and the
reason (``body.solution.sources.0.path: source path '../x' contains '..'``) so the caller can fix the request.
Error bodies are written in the JSON convention of :mod:`fibserve.serve.json_values`, so echoing what the
client sent (a NaN tolerance, a lone surrogate in a name) cannot turn a 422 into a 500.
"""

from __future__ import annotations

import hmac
import sqlite3
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .json_values import dumps, plain_json

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "body_too_large",
    422: "invalid_request",
    500: "internal_error",
    503: "unavailable",
}


class ApiError(Exception):
    """An error answer: HTTP ``status``, stable ``code``, a ``message`` a person can act on."""

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    """The JSON body of an error answer."""
    return {"error": {"code": code, "message": message, "details": details}}


def error_response(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> JSONResponse:
    """``body`` as an HTTP answer, in the one JSON convention (see :mod:`fibserve.serve.json_values`)."""
    return JSONResponse(plain_json(body), status_code=status, headers=headers)


def _summarize_validation(errors: list[dict[str, Any]]) -> tuple[str, str]:
    """(code, message) for pydantic/FastAPI validation errors: malformed JSON gets its own code."""
    for err in errors:
        if err.get("type") == "json_invalid":
            ctx = err.get("ctx") or {}
            return "malformed_json", f"the request body is not valid JSON: {ctx.get('error', err.get('msg'))}"
        if list(err.get("loc", ())) == ["body"] and err.get("type") in ("model_attributes_type", "dict_type"):
            return (
                "malformed_json",
                "the request body must be a JSON object: send valid JSON with 'Content-Type: application/json'",
            )
    parts = []
    for err in errors[:5]:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        msg = str(err.get("msg", "invalid"))
        parts.append(f"{loc}: {msg}" if loc else msg)
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "invalid_request", "invalid request: " + "; ".join(parts) + more


def install_error_handlers(app: FastAPI) -> None:
    """Make every error answer of ``app`` use :func:`error_body`."""

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, error_body(exc.code, exc.message, exc.details))

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = _jsonable_errors(exc.errors())
        code, message = _summarize_validation(errors)
        return error_response(422, error_body(code, message, errors))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = str(exc.detail)
        if exc.status_code == 404 and message == "Not Found":
            message = "no such endpoint; the API is listed at /docs"
        if exc.status_code == 405:
            message = f"{message}; the API is listed at /docs"
        return error_response(
            exc.status_code,
            error_body(_CODES.get(exc.status_code, "error"), message),
            getattr(exc, "headers", None),
        )

    @app.exception_handler(sqlite3.Error)
    async def _store(_: Request, exc: sqlite3.Error) -> JSONResponse:
        message = (
            f"the server's task store refused the request ({exc}): the disk under its state directory may be "
            "full or read-only; retry later (accepted tasks are kept)"
        )
        return error_response(503, error_body("store_unavailable", message))

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        return error_response(
            500, error_body("internal_error", f"the server failed: {exc!r}; see the server log")
        )


def _jsonable_errors(errors: Any) -> list[dict[str, Any]]:
    """Validation errors with values that JSON can hold (ctx may carry exceptions), without echoing structured
    or long inputs (a whole solution, 13 MB of sources) or documentation links back to the caller. Inputs
    are dropped before anything is serialized, so a huge body costs nothing here."""
    out = []
    for err in errors:
        err = dict(err)
        err.pop("url", None)
        value = err.get("input")
        if isinstance(value, dict | list | tuple | bytes) or (isinstance(value, str) and len(value) > 200):
            err.pop("input", None)
        out.append(plain_json(err))
    return out


# -- middleware ---------------------------------------------------------------------------------------------


async def _send_json(
    send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] = ()
) -> None:
    payload = dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class GuardMiddleware:
    """Pure-ASGI guard in front of the app: bearer-token auth, then the request-body size limit.

    Auth applies to every path except ``open_paths`` (health and docs); on those, ``scope["state"]
    ["authenticated"]`` says whether the request carried the server's token anyway (``/health`` shows running
    task ids only then; without a token configured, never). The body limit refuses a declared
    ``Content-Length`` above ``max_body_bytes`` before reading anything, and stops a chunked body as soon as
    it passes the limit; both answer 413.
    """

    def __init__(
        self, app: ASGIApp, *, token: str | None, max_body_bytes: int, open_paths: frozenset[str]
    ) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.max_body_bytes = max_body_bytes
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"authorization", b"")
        scheme, _, value = given.partition(b" ")
        authenticated = (
            self.token is not None
            and scheme.lower() == b"bearer"
            and hmac.compare_digest(value.strip(), self.token)
        )
        scope.setdefault("state", {})["authenticated"] = authenticated
        if self.token is not None and scope.get("path") not in self.open_paths and not authenticated:
            message = (
                "missing bearer token: send 'Authorization: Bearer <token>' (the server was started with --token)"
                if not given
                else "wrong bearer token: check the token the server was started with (--token or FIBSERVE_TOKEN)"
            )
            await _send_json(
                send, 401, error_body("unauthorized", message), [(b"www-authenticate", b"Bearer")]
            )
            return
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await _send_json(send, 413, self._too_large(int(declared)))
            return
        received = 0
        too_large = False
        answered = False

        async def limited_receive() -> Message:
            nonlocal received, too_large
            if too_large:
                return {"type": "http.request", "body": b"", "more_body": False}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    # Hand the app an empty end of body; whatever it answers is replaced by the 413 below.
                    too_large = True
                    return {"type": "http.request", "body": b"", "more_body": False}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal answered
            if not too_large:
                await send(message)
            elif not answered:
                answered = True
                await _send_json(send, 413, self._too_large(received))

        await self.app(scope, limited_receive, guarded_send)

    def _too_large(self, size: int) -> dict[str, Any]:
        limit_mib = self.max_body_bytes / (1024 * 1024)
        return error_body(
            "body_too_large",
            f"request body of {size} bytes exceeds this server's limit of {self.max_body_bytes} bytes "
            f"({limit_mib:g} MiB); send smaller sources or start the server with a larger --max-body-mb",
        )
