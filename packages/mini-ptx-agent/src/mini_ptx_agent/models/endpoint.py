"""A model served by an OpenAI-compatible endpoint (vLLM, SGLang, ...), selected by ``ACCRL_MODEL_HOST``.

Talks HTTP with httpx directly (no litellm import): ``GET /v1/models`` once at construction to check that the
served id equals the model name, then ``POST /v1/chat/completions`` per query.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from mini_ptx_agent.models.base import (
    RETRYABLE_STATUS,
    KernelModelBase,
    ModelConfigError,
    ModelRequestError,
    ModelUsage,
    TransientError,
    add_to_global_stats,
    call_with_retries,
    prepare_messages,
    redact,
    response_record,
)
from mini_ptx_agent.models.config import ModelPricing, RetryPolicy, SamplingSettings

MODEL_LIST_TIMEOUT_S = 30.0
"""Timeout of one ``GET /v1/models`` (s): a cheap listing, so an endpoint that accepts and never answers is
reported after this long per attempt rather than after the long completion timeout."""

if TYPE_CHECKING:  # httpx costs ~0.3 s to import: only when an endpoint model is built
    import httpx


class EndpointModelConfig(BaseModel):
    """Configuration of :class:`OpenAIEndpointModel` (serialized into trajectories: no secrets here)."""

    model_config = ConfigDict(extra="forbid")

    model_name: str
    """Served model id; must appear in the endpoint's ``/v1/models``."""
    base_url: str
    """Endpoint root, e.g. ``http://10.0.0.5:8000`` (``/v1`` is appended per request)."""
    family: str | None = None
    """Matched family of ``config/models.yaml`` (``None``: default sampling)."""
    sampling: SamplingSettings = Field(default_factory=SamplingSettings)
    """Sampling parameters sent with every request."""
    pricing: ModelPricing | None = None
    """Price per token if configured; otherwise the cost is unknown."""
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    """Backoff for 408/429/5xx and connection errors."""
    api_key_env: str | None = "ACCRL_MODEL_API_KEY"
    """Name of the variable holding an optional bearer token (read per request, never stored)."""


def normalise_base_url(host: str) -> str:
    """``host:port``, ``http(s)://host:port`` or either with ``/v1`` -> ``http(s)://host:port`` without a slash.

    Raises:
        ModelConfigError: empty host.
    """
    host = host.strip().rstrip("/")
    if not host:
        raise ModelConfigError("ACCRL_MODEL_HOST is empty; expected host:port, e.g. 127.0.0.1:8000")
    if not host.startswith(("http://", "https://")):
        host = "http://" + host
    return host[: -len("/v1")] if host.endswith("/v1") else host


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers["retry-after"])
    except (KeyError, ValueError):
        return None


class OpenAIEndpointModel(KernelModelBase):
    """mini-swe-agent-compatible model for an OpenAI-compatible chat-completions server.

    Raises at construction:
        ModelConfigError: the endpoint serves other ids than ``model_name`` (the message lists them).
        ModelUnavailableError: ``/v1/models`` unreachable after the retry policy.
    """

    def __init__(
        self, *, check_served_id: bool = True, transport: httpx.BaseTransport | None = None, **kwargs: Any
    ):
        import httpx

        self.config = EndpointModelConfig(**kwargs)
        self.usage = ModelUsage()
        self._client = httpx.Client(
            base_url=self.config.base_url, timeout=self.config.retry.request_timeout_s, transport=transport
        )
        if check_served_id:
            self.check_served_id()

    def _headers(self) -> dict[str, str]:
        token = os.environ.get(self.config.api_key_env or "") if self.config.api_key_env else None
        return {"Authorization": f"Bearer {token}"} if token else {}

    def _request(self, method: str, path: str, what: str, **kwargs: Any) -> dict[str, Any]:
        """One HTTP attempt: JSON body on 2xx; TransientError on retryable failures; ModelRequestError otherwise."""
        import httpx

        try:
            response = self._client.request(method, path, headers=self._headers(), **kwargs)
        except httpx.TransportError as exc:  # connect refused, reset, read timeout, ...
            raise TransientError(f"{type(exc).__name__} talking to {self.config.base_url}: {exc}") from exc
        if response.status_code in RETRYABLE_STATUS:
            raise TransientError(
                f"HTTP {response.status_code}: {response.text[:300]}", _retry_after(response)
            )
        if response.status_code >= 400:
            raise ModelRequestError(
                redact(
                    f"{what} rejected by {self.config.base_url}: HTTP {response.status_code}: {response.text[:1000]}"
                )
            )
        try:
            return response.json()
        except ValueError as exc:
            raise TransientError(f"invalid JSON from {path}: {response.text[:200]!r}") from exc

    def served_ids(self) -> list[str]:
        """Model ids listed by ``GET /v1/models``.

        Raises:
            ModelUnavailableError: unreachable after retries.
        """
        timeout = min(MODEL_LIST_TIMEOUT_S, self.config.retry.request_timeout_s)
        body, _ = call_with_retries(
            lambda: self._request("GET", "/v1/models", "GET /v1/models", timeout=timeout), self.config.retry,
            what=f"model endpoint {self.config.base_url}", usage=self.usage,
        )  # fmt: skip
        return [str(item.get("id")) for item in body.get("data", []) if isinstance(item, dict)]

    def check_served_id(self) -> None:
        """Fail early and clearly when the endpoint does not serve ``model_name``.

        Raises:
            ModelConfigError: ``model_name`` is not among the served ids.
            ModelUnavailableError: unreachable after retries.
        """
        served = self.served_ids()
        if self.config.model_name not in served:
            raise ModelConfigError(
                f"MODEL_NAME={self.config.model_name!r} is not served by {self.config.base_url}; it serves "
                f"{served or 'no models'}. Set MODEL_NAME to one of these ids."
            )

    def query(self, messages: list[dict], **kwargs: Any) -> dict:
        """One chat completion; returns the assistant message (see :mod:`mini_ptx_agent.models.base`).

        Raises:
            ModelUnavailableError: transient failures exhausted the retry policy.
            ModelRequestError: the server rejected the request (4xx other than 408/409/425/429).
        """
        payload: dict[str, Any] = {
            "model": self.config.model_name,
            "messages": prepare_messages(messages),
            **self.config.sampling.request_params(),
            **self.config.sampling.extra_body,
            **kwargs,
        }

        def attempt() -> dict[str, Any]:
            body = self._request("POST", "/v1/chat/completions", "chat completion", json=payload)
            if not body.get("choices"):
                raise TransientError(f"response without choices: {str(body)[:200]}")
            return body

        started = time.perf_counter()
        body, attempts = call_with_retries(
            attempt, self.config.retry, what=f"model endpoint {self.config.base_url}", usage=self.usage
        )
        choice = body["choices"][0]
        message = choice.get("message") or {}
        usage = body.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        completion_tokens = int(usage.get("completion_tokens") or 0)
        pricing = self.config.pricing
        cost = pricing.cost_usd(prompt_tokens, completion_tokens) if pricing else None
        self.usage.add(prompt_tokens, completion_tokens, cost)
        add_to_global_stats(cost or 0.0)
        extra = {
            "cost_usd": cost,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
            "finish_reason": choice.get("finish_reason"),
            "model": body.get("model", self.config.model_name),
            "attempts": attempts,
            "latency_s": round(time.perf_counter() - started, 3),
            "response": response_record(body),
        }
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if reasoning:
            extra["reasoning_content"] = reasoning
        return self.assistant_message(message.get("content") or "", extra)

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()
