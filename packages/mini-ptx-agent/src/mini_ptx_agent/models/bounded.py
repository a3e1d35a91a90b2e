"""Waiting for the model: each call bounded by the turn timeout and the wall-time limit, failures classified.

A model call runs in a daemon thread that the agent waits for; a call that outlives its wait is abandoned and
can never keep the process alive. What ends a turn early is an exception carrying the run's exit message:
:class:`InfrastructureError` (the model API or the evaluation service failed or hung), ``TimeExceeded`` (the
wall-time limit), ``LimitsExceeded`` (a replay ran out of recorded replies).

:class:`BoundedModel` lives with the models because it is one: it has the model protocol (``query``, other
attributes forwarded) and wraps any backend. The factory (:mod:`mini_ptx_agent.models`) does not import this
module, because it imports mini-swe-agent; the agent does. The agent also ends a run with
:class:`InfrastructureError` when the evaluation service fails, so a run has one exit status for an outage.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")  # mini-swe-agent prints a banner to stdout on import

from minisweagent.exceptions import InterruptAgentFlow, LimitsExceeded, TimeExceeded

from .base import ReplayExhaustedError


class InfrastructureError(InterruptAgentFlow):
    """The evaluation service or the model API failed; ends the run with exit status ``InfrastructureError``."""


def exit_message(status: str, content: str, **extra: Any) -> dict:
    """The ``exit`` message that ends a run with exit status ``status`` (mini-swe-agent's shape)."""
    return {"role": "exit", "content": content, "extra": {"exit_status": status, "submission": "", **extra}}


class BoundedModel:
    """Wraps a mini-swe-agent model: each ``query`` is waited for at most ``timeout_s`` seconds and no later than
    ``wall_deadline`` (``time.time()`` seconds); any API failure is an InfrastructureError.

    The call runs in a daemon thread, so a model that never answers cannot keep the process alive after the run
    has ended (a pooled worker thread would be joined at interpreter exit, i.e. after the HTTP timeout).
    Past ``timeout_s`` the run ends as ``InfrastructureError``; past ``wall_deadline`` (the run's wall-time limit)
    it ends as ``TimeExceeded``, the run's own rule. ``FormatError`` (and other agent-flow exceptions a model may
    raise) pass through unchanged; a ``replay:`` model that ran out of recorded replies ends the run as
    ``LimitsExceeded``. Everything else a model raises (connection refused, HTTP 5xx after retries,
    authentication) is the model API's failure, not the kernel's. Other attributes are forwarded to the wrapped
    model, so ``serialize`` and ``config`` work.
    """

    def __init__(
        self, model: Any, timeout_s: float, prepare: Callable[[list[dict]], list[dict]] | None = None
    ):
        """``prepare``: turns the conversation into what the model is sent (e.g. :func:`bounded_history`)."""
        self.model = model
        self.timeout_s = timeout_s
        self.prepare = prepare
        self.wall_deadline: float | None = None
        """End of the run's wall time (``time.time()`` seconds); None = no wall limit."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def _wait_s(self) -> tuple[float | None, bool]:
        """Seconds to wait for this call (None = no limit) and whether the wall deadline is what limits it."""
        turn = self.timeout_s or None
        if self.wall_deadline is None:
            return turn, False
        wall = max(0.0, self.wall_deadline - time.time())
        return (wall, True) if turn is None or wall < turn else (turn, False)

    def query(self, messages: list[dict], **kwargs) -> dict:
        """``model.query`` in a daemon thread, waited for as long as :meth:`_wait_s` allows."""
        wait_s, by_wall = self._wait_s()
        if self.prepare is not None:
            messages = self.prepare(messages)
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def call() -> None:
            try:
                outcome["reply"] = self.model.query(messages, **kwargs)
            except BaseException as exc:  # handed to the waiting thread, which decides
                outcome["error"] = exc
            finally:
                done.set()

        threading.Thread(target=call, name="model-query", daemon=True).start()
        if not done.wait(wait_s):
            if by_wall:
                raise TimeExceeded(
                    exit_message("TimeExceeded", "wall time limit reached while waiting for the model")
                )
            raise InfrastructureError(
                exit_message(
                    "InfrastructureError",
                    f"model API: no answer within the turn timeout of {self.timeout_s:g} s",
                    infrastructure={"source": "model", "kind": "timeout"},
                )
            )
        if "reply" in outcome:
            return outcome["reply"]
        raise self._failure(outcome["error"])

    @staticmethod
    def _failure(exc: BaseException) -> BaseException:
        """The exception that ends the turn for an exception the model raised."""
        if isinstance(exc, InterruptAgentFlow):
            return exc
        if isinstance(exc, ReplayExhaustedError):  # a recording ran out: the run's turn limit, not an outage
            return LimitsExceeded(exit_message("LimitsExceeded", f"replay exhausted: {exc}"))
        if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: not the model API's failure
            return exc
        error = InfrastructureError(
            exit_message(
                "InfrastructureError",
                f"model API failed: {type(exc).__name__}: {exc}",
                infrastructure={"source": "model", "kind": type(exc).__name__},
            )
        )
        error.__cause__ = exc
        return error
