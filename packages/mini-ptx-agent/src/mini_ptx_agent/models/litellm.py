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

from mini_ptx_agent.models.base import (
    KernelModelBase,
    ModelConfigError,
    ModelRequestError,
    ModelUnavailableError,
    ModelUsage,
    TransientError,
    add_to_global_stats,
    call_with_retries,
    prepare_messages,
    redact,
    response_record,
)
from mini_ptx_agent.models.config import ModelPricing, RetryPolicy, SamplingSettings


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


PROBE_TIMEOUT_S = 10.0
"""Timeout of :meth:`LitellmHostedModel.probe`, the one-token request of ``quickstart --check`` (s)."""


def close_model_names(litellm: Any, name: str, n: int = 3) -> list[str]:
    """Chat models in litellm's bundled model list whose names are closest to ``name`` (difflib ratio >= 0.6)."""
    import difflib

    chat = [model for model, info in litellm.model_cost.items() if info.get("mode") == "chat"]
    return difflib.get_close_matches(name, chat, n=n, cutoff=0.6)


def resolve_provider(litellm: Any, name: str, api_base: str | None = None) -> tuple[str, bool]:
    """The provider litellm would send ``name`` to, and whether ``name`` is in its bundled model list.

    Offline: litellm's name rules and its package's model table, no request.

    Raises:
        ModelConfigError: litellm cannot tell which provider serves ``name`` (no provider prefix and not a name it
            knows); the message gives close names and what to set instead.
    """
    try:
        _, provider, _, _ = litellm.get_llm_provider(model=name, api_base=api_base)
    except Exception:
        close = close_model_names(litellm, name)
        hint = f"Did you mean {', '.join(close)}? " if close else ""
        raise ModelConfigError(
            f"litellm {litellm_version()} does not know model {name!r}: the name has no provider prefix and is not "
            f"in its model list. {hint}Give a provider-prefixed name (anthropic/claude-sonnet-4-5, openai/gpt-4o, "
            "openrouter/<vendor>/<model>), or set ACCRL_MODEL_HOST=host:port for a vLLM or SGLang endpoint that "
            "serves it, or MODEL_NAME=replay:PATH to replay a trajectory"
        ) from None
    try:
        litellm.get_model_info(name)
        listed = True
    except Exception:
        listed = False
    return str(provider), listed


def litellm_version() -> str:
    """The installed litellm's version (``unknown`` when its metadata is missing)."""
    from importlib import metadata

    try:
        return metadata.version("litellm")
    except metadata.PackageNotFoundError:
        return "unknown"


class LitellmHostedModel(KernelModelBase):
    """mini-swe-agent-compatible model calling ``litellm.completion``.

    Raises at construction:
        ModelConfigError: litellm cannot tell which provider serves the name (:func:`resolve_provider`), or a key
            variable the provider needs is unset (the message names it).
    """

    def __init__(self, **kwargs: Any):
        self._litellm = import_litellm()
        config = LitellmModelConfig(**kwargs)
        # listed: the name is in litellm's model list; when it is not, only a request (probe) can tell whether
        # the provider serves it.
        self.provider, self.listed = resolve_provider(self._litellm, config.model_name, config.api_base)
        try:
            env = self._litellm.validate_environment(model=config.model_name)
        except Exception:  # a provider without a key rule: the first request says what is wrong
            env = {"keys_in_environment": True, "missing_keys": []}
        missing = [k for k in env.get("missing_keys", []) if not os.environ.get(k)]
        if missing and not config.api_base:
            raise ModelConfigError(
                f"model {config.model_name!r} needs the environment variable(s) {', '.join(missing)}; set them "
                "(never on the command line or in a config file), or use ACCRL_MODEL_HOST for a self-hosted endpoint"
            )
        self.config = config
        self.usage = ModelUsage()

    def probe(self) -> None:
        """One request for one token (one attempt, at most :data:`PROBE_TIMEOUT_S` and the retry policy's request
        timeout): whether the provider serves the model
        and accepts the key. Costs one prompt of a few tokens; not counted in :attr:`usage`.

        Raises:
            ModelRequestError: the provider rejected it (unknown model, bad key, ...); the message is its answer.
            ModelUnavailableError: no answer (unreachable, overloaded, timeout).
        """
        params = {"api_base": self.config.api_base} if self.config.api_base else {}
        timeout = min(PROBE_TIMEOUT_S, self.config.retry.request_timeout_s)
        try:
            self._litellm.completion(
                model=self.config.model_name, messages=[{"role": "user", "content": "Reply with OK."}], max_tokens=1,
                num_retries=0, max_retries=0, timeout=timeout, **params,
            )  # fmt: skip
        except Exception as exc:
            error = self._classify(exc)
            if isinstance(error, TransientError):
                raise ModelUnavailableError(f"model API for {self.config.model_name}: {error}") from exc
            raise error from exc

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
        return ModelRequestError(
            f"model {self.config.model_name!r} rejected the request: {message}",
            status if isinstance(status, int) else None,
        )

    def query(self, messages: list[dict], **kwargs: Any) -> dict:
        """One completion through litellm; returns the assistant message (see :mod:`mini_ptx_agent.models.base`).

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
            "response": response_record(raw),
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
