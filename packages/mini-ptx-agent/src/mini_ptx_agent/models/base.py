"""What every mini-ptx-agent model shares: error types, usage accounting, secret redaction, the retry loop.

The models follow mini-swe-agent 2.4.6's ``Model`` protocol (``minisweagent.Model``): ``config``,
``query(messages) -> dict``, ``format_message``, ``format_observation_messages``, ``get_template_vars``,
``serialize``. ``query`` returns an assistant message ``{"role": "assistant", "content": str, "extra": {...}}``
whose ``extra`` carries ``actions`` (always ``[]``: the kernel agent extracts code blocks itself), ``cost``
(dollars, ``0.0`` when unknown so mini-swe-agent's sums keep working), ``cost_usd`` (``None`` when unknown),
``usage`` (token counts) and ``timestamp``.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from mini_ptx_agent.models.config import RetryPolicy

logger = logging.getLogger("mini_ptx_agent.models")
T = TypeVar("T")


class ModelError(RuntimeError):
    """Base class of every model-layer error."""


class ModelConfigError(ModelError, ValueError):
    """The model is misconfigured (no model named, missing API key variable, served id mismatch, bad file).

    Also a ``ValueError``, so commands that report bad user input cleanly report this too.
    """


class ModelUnavailableError(ModelError):
    """Infrastructure failure: the model API stayed unreachable or overloaded after bounded retries.

    The agent reports this as "model API down", never as a kernel failure.
    """


class ModelRequestError(ModelError):
    """The API rejected the request in a way retrying cannot fix (HTTP 400/401/403/404, context too long)."""

    def __init__(self, message: str, status_code: int | None = None):
        super().__init__(message)
        self.status_code = status_code
        """The HTTP status of the refusal (401: the key was refused), when the API said."""


class ReplayExhaustedError(ModelError):
    """A ``replay:`` model was asked for more assistant messages than its trajectory holds."""


class TransientError(Exception):
    """Internal: one failed attempt that may succeed when retried; ``retry_after_s`` from the server if given."""

    def __init__(self, message: str, retry_after_s: float | None = None):
        super().__init__(message)
        self.retry_after_s = retry_after_s


RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})

_SECRET_NAME = re.compile(r"(API_KEY|_TOKEN|_SECRET|PASSWORD)$|^HF_TOKEN$", re.IGNORECASE)


def secret_values(environ: dict[str, str] | None = None) -> list[str]:
    """Values of environment variables that look like credentials (``*_API_KEY``, ``*_TOKEN``, ...), longest first.

    Values shorter than 6 characters are ignored (too likely to collide with ordinary text).
    """
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if _SECRET_NAME.search(k) and v and len(v) >= 6}
    return sorted(values, key=len, reverse=True)


def redact(text: str) -> str:
    """``text`` with every credential value from the environment replaced by ``***``."""
    for value in secret_values():
        text = text.replace(value, "***")
    return text


class ModelUsage(BaseModel):
    """Cumulative usage of one model object."""

    n_calls: int = 0
    """Successful queries."""
    prompt_tokens: int = 0
    """Sum of prompt tokens reported by the API."""
    completion_tokens: int = 0
    """Sum of completion tokens (reasoning included where the API counts it there)."""
    cost_usd: float | None = 0.0
    """Total dollars, or ``None`` once any call had an unknown price ("unknown", not zero)."""
    retries: int = 0
    """Failed attempts that were retried."""

    def add(self, prompt_tokens: int, completion_tokens: int, cost_usd: float | None) -> None:
        """Record one successful call."""
        self.n_calls += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.cost_usd = None if cost_usd is None or self.cost_usd is None else self.cost_usd + cost_usd


def call_with_retries(
    attempt: Callable[[], T],
    policy: RetryPolicy,
    *,
    what: str,
    usage: ModelUsage | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[T, int]:
    """Run ``attempt`` until it returns, retrying :class:`TransientError` with the policy's backoff.

    Returns:
        ``(result, attempts)``.

    Raises:
        ModelUnavailableError: still failing after ``policy.max_attempts`` attempts; the message names ``what``,
            the attempt count and the last error (redacted).
        Any non-transient exception of ``attempt`` unchanged (e.g. :class:`ModelRequestError`).
    """
    last = ""
    for number in range(1, policy.max_attempts + 1):
        try:
            return attempt(), number
        except TransientError as exc:
            last = redact(str(exc))
            if number == policy.max_attempts:
                break
            wait = policy.backoff_s(number, exc.retry_after_s)
            if usage is not None:
                usage.retries += 1
            logger.warning("%s: attempt %d/%d failed (%s); retrying in %.1f s", what, number,
                           policy.max_attempts, last, wait)  # fmt: skip
            sleep(wait)
    raise ModelUnavailableError(f"{what} is unavailable after {policy.max_attempts} attempts: {last}")


def add_to_global_stats(cost: float) -> None:
    """Count the call in mini-swe-agent's global cost/call limits when mini-swe-agent is in use.

    Imports nothing new: if ``minisweagent.models`` has not been imported by the caller, there is no limit to keep.
    """
    module = sys.modules.get("minisweagent.models")
    if module is not None:
        module.GLOBAL_MODEL_STATS.add(cost)


def prepare_messages(messages: list[dict]) -> list[dict]:
    """Messages as sent to an API: only ``role`` and ``content``; mini-swe-agent's ``exit`` messages dropped."""
    return [
        {"role": m["role"], "content": m.get("content") or ""}
        for m in messages
        if m.get("role") in {"system", "user", "assistant"}
    ]


STORED_ELSEWHERE = "<stored once, in the assistant message>"
"""What replaces a reply's text inside the raw response kept in ``extra.response``."""


def response_record(body: Any) -> Any:
    """The API's response body as the trajectory keeps it (``extra.response``): each choice's message
    ``content`` and reasoning replaced by :data:`STORED_ELSEWHERE`, because the assistant message holds the
    content and ``extra.reasoning_content`` the reasoning. A 1 MB reply is then stored once, not twice."""
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
        return body
    choices = []
    for choice in body["choices"]:
        message = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(message, dict):
            texts = {
                k: STORED_ELSEWHERE for k in ("content", "reasoning_content", "reasoning") if message.get(k)
            }
            choice = {**choice, "message": {**message, **texts}}
        choices.append(choice)
    return {**body, "choices": choices}


def is_demo_model(model: Any) -> bool:
    """Whether ``model``'s replies are a demo, not a model's output (``config.demo``: a replay of a flagged
    trajectory or the no-model fallback; see :class:`mini_ptx_agent.models.replay.ReplayModelConfig`)."""
    return bool(getattr(getattr(model, "config", None), "demo", False))


class KernelModelBase:
    """Shared protocol methods; subclasses set ``config`` (a pydantic model) and implement ``query``."""

    config: BaseModel
    usage: ModelUsage

    def format_message(self, **kwargs: Any) -> dict:
        """A message dict from keyword arguments (``role``, ``content``, optional ``extra``)."""
        return dict(kwargs)

    def format_observation_messages(
        self, message: dict, outputs: list[dict], template_vars: dict | None = None
    ) -> list[dict]:
        """One user message per environment output (``output["output"]`` as content), as mini-swe-agent expects."""
        return [
            {
                "role": "user",
                "content": str(output.get("output", "")),
                "extra": {
                    "returncode": output.get("returncode"),
                    "timestamp": time.time(),
                    **output.get("extra", {}),
                },
            }
            for output in outputs
        ]

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        """The model's config as template variables (``model_name``, ...); never contains credentials."""
        return self.config.model_dump()

    def serialize(self) -> dict:
        """Trajectory ``info`` section: config, class path and usage. Never contains credentials."""
        return {
            "info": {
                "config": {
                    "model": self.config.model_dump(mode="json"),
                    "model_type": f"{self.__class__.__module__}.{self.__class__.__name__}",
                },
                "model_usage": self.usage.model_dump(mode="json"),
            }
        }

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.config!r})"

    @staticmethod
    def assistant_message(content: str, extra: dict[str, Any]) -> dict:
        """The message ``query`` returns, with the mandatory ``extra`` keys filled in."""
        cost = extra.get("cost_usd")
        return {
            "role": "assistant",
            "content": content,
            "extra": {"actions": [], "cost": float(cost or 0.0), "timestamp": time.time(), **extra},
        }
