"""Hosted models through litellm (``anthropic/claude-...``, ``openai/gpt-...``, ``gemini/...``, ``openrouter/...``).

litellm is imported only when such a model is built (it takes seconds), and with
``LITELLM_LOCAL_MODEL_COST_MAP=True`` so that its price table comes from the installed package instead of a
network fetch. API keys stay in their usual variables (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ...); litellm
reads them per request, and nothing here stores them.
"""

from __future__ import annotations

import os
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mini_ptx_agent.models_base import (
    KernelModelBase,
    ModelConfigError,
    ModelRequestError,
    ModelUsage,
    TransientError,
    add_to_global_stats,
    call_with_retries,
    prepare_messages,
    redact,
)
from mini_ptx_agent.models_config import ModelPricing, RetryPolicy, SamplingSettings


def import_litellm() -> Any:
    """Import litellm with the local price table and quiet logging; returns the module."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    litellm.drop_params = True  # e.g. top_p for a model that does not take it: drop instead of failing
    return litellm


class LitellmModelConfig(BaseModel):
    """Configuration of :class:`LitellmHostedModel` (serialized into trajectories: no secrets here)."""

    model_config = ConfigDict(extra="forbid")

    model_name: str
    """litellm model name, provider-prefixed where ambiguous, e.g. ``anthropic/claude-sonnet-4-5``."""
    family: str | None = None
    """Matched family of ``config/models.yaml``."""
    sampling: SamplingSettings = Field(default_factory=SamplingSettings)
    """Sampling parameters (``extra_body`` is not sent to hosted APIs)."""
    pricing: ModelPricing | None = None
    """Price override; otherwise litellm's bundled price table, else unknown."""
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    """Backoff for rate limits, 5xx, timeouts and connection errors."""
    api_base: str | None = None
    """Optional API base URL (a proxy or gateway); the key variable is still the provider's usual one."""


class LitellmHostedModel(KernelModelBase):
    """mini-swe-agent-compatible model calling ``litellm.completion``.

    Raises at construction:
        ModelConfigError: a key variable the provider needs is unset (the message names it).
    """

    def __init__(self, **kwargs: Any):
        self._litellm = import_litellm()
        config = LitellmModelConfig(**kwargs)
        try:
            env = self._litellm.validate_environment(model=config.model_name)
        except Exception:  # unknown provider: let the first request say what is wrong
            env = {"keys_in_environment": True, "missing_keys": []}
        missing = [k for k in env.get("missing_keys", []) if not os.environ.get(k)]
        if missing and not config.api_base:
            raise ModelConfigError(
                f"model {config.model_name!r} needs the environment variable(s) {', '.join(missing)}; set them "
                "(never on the command line or in a config file), or use ACCRL_MODEL_HOST for a self-hosted endpoint"
            )
        self.config = config
        self.usage = ModelUsage()

    def _classify(self, exc: Exception) -> Exception:
        """Map a litellm exception to TransientError (retry) or ModelRequestError (give up now)."""
        ex = self._litellm.exceptions
        transient = (ex.RateLimitError, ex.InternalServerError, ex.ServiceUnavailableError, ex.APIConnectionError,
                     ex.Timeout, ex.BadGatewayError)  # fmt: skip
        message = redact(f"{type(exc).__name__}: {exc}")[:1000]
        if isinstance(exc, transient):
            return TransientError(message)
        status = getattr(exc, "status_code", None)
        if isinstance(status, int) and (status >= 500 or status == 429):
            return TransientError(message)
        return ModelRequestError(f"model {self.config.model_name!r} rejected the request: {message}")

    def query(self, messages: list[dict], **kwargs: Any) -> dict:
        """One completion through litellm; returns the assistant message (see :mod:`mini_ptx_agent.models_base`).

        Raises:
            ModelUnavailableError: transient failures exhausted the retry policy.
            ModelRequestError: authentication, permission, bad request, context window, unknown model.
        """
        params = {**self.config.sampling.request_params(), **kwargs}
        if self.config.api_base:
            params["api_base"] = self.config.api_base

        def attempt() -> Any:
            try:
                return self._litellm.completion(
                    model=self.config.model_name, messages=prepare_messages(messages), num_retries=0, max_retries=0,
                    timeout=self.config.retry.request_timeout_s, **params,
                )  # fmt: skip
            except Exception as exc:
                raise self._classify(exc) from exc

        started = time.perf_counter()
        response, attempts = call_with_retries(
            attempt, self.config.retry, what=f"model API for {self.config.model_name}", usage=self.usage
        )
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        cost = self._cost(response, prompt_tokens, completion_tokens)
        self.usage.add(prompt_tokens, completion_tokens, cost)
        add_to_global_stats(cost or 0.0)
        choice = response.choices[0]
        try:
            raw = response.model_dump(mode="json")
        except Exception:
            raw = repr(response)
        extra = {
            "cost_usd": cost,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
            "finish_reason": choice.finish_reason,
            "model": getattr(response, "model", self.config.model_name),
            "attempts": attempts,
            "latency_s": round(time.perf_counter() - started, 3),
            "response": raw,
        }
        reasoning = getattr(choice.message, "reasoning_content", None)
        if reasoning:
            extra["reasoning_content"] = reasoning
        return self.assistant_message(choice.message.content or "", extra)

    def _cost(self, response: Any, prompt_tokens: int, completion_tokens: int) -> float | None:
        """Dollars for one call: configured price, else litellm's table, else ``None`` (unknown, not a crash)."""
        if self.config.pricing is not None:
            return self.config.pricing.cost_usd(prompt_tokens, completion_tokens)
        try:
            cost = float(
                self._litellm.completion_cost(completion_response=response, model=self.config.model_name)
            )
        except Exception:
            return None
        return cost if cost > 0 else None
