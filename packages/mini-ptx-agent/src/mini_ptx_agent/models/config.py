"""Model-layer configuration: sampling settings per model family, optional prices, and the retry policy.

The bundled defaults live in ``mini_ptx_agent/config/models.yaml``; a run may pass its own file or object.
Families are matched by shell-style patterns (``fnmatch``, case-insensitive) against the model name, first
match wins, so put specific families (``*qwen3-coder*``) before general ones (``*qwen3*``).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class SamplingSettings(BaseModel):
    """Sampling parameters sent with every request; ``None`` means "not sent" (the server's default applies)."""

    model_config = ConfigDict(extra="forbid")

    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    """Softmax temperature. Some reasoning models accept only their default: leave ``None`` for them."""
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    """Nucleus sampling mass. Anthropic's newer models reject ``top_p`` together with ``temperature``."""
    max_tokens: int | None = Field(default=None, gt=0)
    """Upper bound on generated tokens per reply (reasoning tokens included for most servers)."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Extra JSON fields for OpenAI-compatible servers only (vLLM/SGLang: ``top_k``, ``repetition_penalty``)."""

    def request_params(self) -> dict[str, Any]:
        """The standard parameters that are set, as keyword arguments of a chat-completions request."""
        fields = {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens}
        return {k: v for k, v in fields.items() if v is not None}

    def merged(self, overrides: Mapping[str, Any] | None) -> SamplingSettings:
        """A copy with ``overrides`` applied (keys of this model; ``extra_body`` is merged key by key)."""
        if not overrides:
            return self
        data = self.model_dump()
        for key, value in overrides.items():
            if key == "extra_body":
                data["extra_body"] = {**data["extra_body"], **dict(value)}
            else:
                data[key] = value
        return SamplingSettings.model_validate(data)


class ModelPricing(BaseModel):
    """Price of a model in US dollars per million tokens (for endpoints litellm has no price for)."""

    model_config = ConfigDict(extra="forbid")

    input_usd_per_mtok: float = Field(ge=0.0)
    """Dollars per 1e6 prompt tokens."""
    output_usd_per_mtok: float = Field(ge=0.0)
    """Dollars per 1e6 completion tokens."""

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        """Cost of one call in dollars."""
        return (prompt_tokens * self.input_usd_per_mtok + completion_tokens * self.output_usd_per_mtok) / 1e6


class ModelFamily(BaseModel):
    """Settings shared by the models whose name matches one of ``match``."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Family name, recorded in the model's serialized config."""
    match: list[str] = Field(min_length=1)
    """``fnmatch`` patterns on the lower-cased model name, e.g. ``*qwen3-coder*``."""
    sampling: SamplingSettings = Field(default_factory=SamplingSettings)
    """Sampling settings for the family (usually the vendor's recommended ones)."""
    pricing: ModelPricing | None = None
    """Optional price; without it the cost is litellm's (hosted models) or unknown."""

    def matches(self, model_name: str) -> bool:
        """Whether ``model_name`` belongs to this family."""
        lowered = model_name.lower()
        return any(fnmatch.fnmatchcase(lowered, pattern.lower()) for pattern in self.match)


class RetryPolicy(BaseModel):
    """Bounded exponential backoff for transient failures (HTTP 408/429/5xx, connection errors, timeouts).

    Attempt ``n`` (1-based) that fails transiently waits ``min(max_backoff_s, initial_backoff_s * multiplier**(n-1))``
    seconds (or the server's ``Retry-After``, capped the same way) before attempt ``n + 1``. After
    ``max_attempts`` attempts the model raises ``ModelUnavailableError``.
    """

    model_config = ConfigDict(extra="forbid")

    max_attempts: int = Field(default=6, ge=1)
    """Total attempts per query, the first included."""
    initial_backoff_s: float = Field(default=2.0, ge=0.0)
    """Wait after the first failure, seconds."""
    multiplier: float = Field(default=2.0, ge=1.0)
    """Growth factor of the wait per failure."""
    max_backoff_s: float = Field(default=60.0, ge=0.0)
    """Cap on a single wait, seconds."""
    request_timeout_s: float = Field(default=900.0, gt=0.0)
    """Timeout of one HTTP request, seconds (long: reasoning models may think for minutes)."""

    def backoff_s(self, attempt: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based)."""
        if retry_after_s is not None and retry_after_s >= 0:
            return min(self.max_backoff_s, retry_after_s)
        return min(self.max_backoff_s, self.initial_backoff_s * self.multiplier ** (attempt - 1))


class ModelsConfig(BaseModel):
    """The whole model-layer configuration (the schema of ``config/models.yaml``)."""

    model_config = ConfigDict(extra="forbid")

    default_sampling: SamplingSettings = Field(default_factory=SamplingSettings)
    """Sampling for models that match no family."""
    families: list[ModelFamily] = Field(default_factory=list)
    """Families in match order (first match wins)."""
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    """Retry policy for every remote model."""

    def family_for(self, model_name: str) -> ModelFamily | None:
        """The first family matching ``model_name``, or ``None``."""
        return next((family for family in self.families if family.matches(model_name)), None)

    def sampling_for(self, model_name: str) -> SamplingSettings:
        """Sampling settings for ``model_name``: its family's, else ``default_sampling``."""
        family = self.family_for(model_name)
        return family.sampling if family else self.default_sampling


def load_models_config(source: ModelsConfig | Mapping[str, Any] | str | Path | None = None) -> ModelsConfig:
    """Load the model configuration.

    Args:
        source: ``None`` for the bundled ``config/models.yaml``; a path to a YAML file; a mapping with the same
            structure; or a ready :class:`ModelsConfig`.

    Raises:
        FileNotFoundError: the path does not exist.
        pydantic.ValidationError: the content does not match :class:`ModelsConfig` (unknown keys are errors).
    """
    if isinstance(source, ModelsConfig):
        return source
    if isinstance(source, Mapping):
        return ModelsConfig.model_validate(dict(source))
    import yaml  # only where used: keeps `import mini_ptx_agent.models` cheap

    if source is None:
        text = resources.files("mini_ptx_agent").joinpath("config", "models.yaml").read_text(encoding="utf-8")
    else:
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"model config {path} does not exist")
        text = path.read_text(encoding="utf-8")
    return ModelsConfig.model_validate(yaml.safe_load(text) or {})
