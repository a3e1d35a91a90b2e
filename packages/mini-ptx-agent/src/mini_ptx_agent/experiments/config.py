"""The experiment config: one pydantic model, one docstring per field (`ptxbench experiment schema` prints it).

A config names what to cross (definitions x languages x prompt tags x models x replicas) and how each trajectory
runs (turns, target, feedback options, limits). It is YAML or JSON::

    name: gemm-hints
    definitions: gemm                  # a suite, or a list of names, or {names, op_types, tags, suites, exclude}
    languages: [cuda]
    prompt_tags: [hopper-no-hint, hopper-tma-store, hopper-warp-specialization]
    models: [anthropic/claude-sonnet-4-5]
    replicas: 4
    num_turns: 8
    target_speedup: 1.2

The shipped configs (``ptxbench experiment run gemm``) live beside this module in ``configs/``.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..feedback_options import FeedbackOptions
from ..models.config import ModelsConfig
from ..task import Arch, TaskLanguage

CONFIG_SCHEMA = "ptxbench.experiment-config/1"

SUITES: dict[str, str] = {
    "gemm": "suite:ptxbench-gemm",
    "mha-fwd": "suite:ptxbench-mha-with-lse",
    "mha-bwd": "suite:ptxbench-mha-bwd",
    "fp8-mha": "suite:ptxbench-fp8-mha-with-lse",
    "gqa": "suite:ptxbench-gqa",
    "mla": "suite:ptxbench-mla",
    "gdn": "suite:ptxbench-gdn",
    "fp8-gemm": "suite:ptxbench-fp8-gemm",
    "ci": "suite:ptxbench-ci",
}
"""Named suites and the definition tag that puts a definition in each (the bundled trace set tags them)."""


class ExperimentConfigError(ValueError):
    """A config file is missing, unreadable, or does not validate; the message names the field and what to fix."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class DefinitionSelection(_Model):
    """Which definitions an experiment runs: the union of ``names``, ``op_types``, ``tags`` and ``suites``,
    minus ``exclude``. In YAML, a plain string is a suite name (or else a definition name), a list of strings
    a list of definition names."""

    names: list[str] = Field(default_factory=list)
    """Definition names, e.g. ``gemm_n7168_k5120``."""
    op_types: list[str] = Field(default_factory=list)
    """Every definition of these operator families (``gemm``, ``mha``, ``mha_bwd``...)."""
    tags: list[str] = Field(default_factory=list)
    """Every definition carrying one of these tags (e.g. ``head_dim:128``, ``causal``)."""
    suites: list[Literal["gemm", "mha-fwd", "mha-bwd", "fp8-mha", "gqa", "mla", "gdn", "fp8-gemm", "ci"]] = (
        Field(default_factory=list)
    )
    """Named suites: ``gemm``, ``mha-fwd``, ``mha-bwd``, ``fp8-mha``, ``gqa`` (paged decode, paged and ragged
    causal prefill), ``mla``, ``gdn`` (gated delta net decode, mtp, prefill), ``fp8-gemm`` (block-scaled FP8
    GEMMs), ``ci`` (the float32 CI definitions)."""
    exclude: list[str] = Field(default_factory=list)
    """Definition names to leave out of what the other fields select."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"suites": [value]} if value in SUITES else {"names": [value]}
        if isinstance(value, list):
            return {"names": value}
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> DefinitionSelection:
        if not (self.names or self.op_types or self.tags or self.suites):
            raise ValueError("select at least one definition: give names, op_types, tags or suites")
        return self


class ModelSpec(_Model):
    """One model under test. In YAML a plain string is its ``name``."""

    name: str = Field(min_length=1)
    """A litellm name (``anthropic/claude-sonnet-4-5``, its API key from the usual variable) or the served id of
    an OpenAI-compatible endpoint (with ``host``)."""
    host: str | None = None
    """``host:port`` of an OpenAI-compatible endpoint serving ``name``; default ``--model-host``, else
    ``$ACCRL_MODEL_HOST``, else none (a hosted model through litellm)."""
    sampling: dict[str, Any] = Field(default_factory=dict)
    """Overrides of the family's sampling settings from ``models.yaml`` (``temperature``, ``top_p``,
    ``max_tokens``, ``extra_body``)."""
    concurrency: int | None = Field(default=None, ge=1)
    """At most this many of this model's trajectories run at once (an API's rate limit); default: no limit
    beyond the experiment's ``concurrency``."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value


class ExperimentConfig(_Model):
    """An experiment: definitions x languages x prompt tags x models x replicas trajectories, each a run."""

    schema_version: Literal["ptxbench.experiment-config/1"] = CONFIG_SCHEMA
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """The experiment's name (letters, digits, ``.``, ``_``, ``-``): the prefix of its directory and the
    ``experiment`` column of the per-turn table."""
    description: str = ""
    """What the experiment asks, for people."""
    definitions: DefinitionSelection
    """Which definitions (see :class:`DefinitionSelection`)."""
    workloads: Literal["all"] | int | list[str] = "all"
    """``all``; N (each definition's first N workloads, in the catalog's order); or workload uuids (each
    definition keeps its own, and must have at least one)."""
    languages: list[TaskLanguage] = Field(default_factory=lambda: ["cuda"], min_length=1)
    """Kernel languages: ``cuda``, ``triton``."""
    arch: Arch = "sm_90a"
    """Target architecture: ``sm_90a`` (Hopper) or ``sm_100a`` (Blackwell)."""
    prompt_tags: list[str] = Field(default_factory=list)
    """System prompt tags (`ptxbench prompts list`). Each applies to the languages it is written for; empty:
    each language's default tag."""
    models: list[ModelSpec] = Field(min_length=1)
    """The models under test."""
    models_config: ModelsConfig | None = None
    """Replaces the bundled ``models.yaml`` for this experiment: sampling per model family, prices (an endpoint's
    cost is ``unknown`` without one) and the retry policy. Same structure as that file."""
    replicas: int = Field(default=1, ge=1)
    """Independent trajectories per cell (definition, language, prompt tag, model)."""
    num_turns: int = Field(default=3, ge=1)
    """Model calls per trajectory before ``LimitsExceeded``."""
    target_speedup: float = Field(default=1.0, gt=0)
    """A trajectory stops (``Submitted``) when a kernel passes every workload on a GPU at this minimum speedup
    over the baseline (x)."""
    feedback: FeedbackOptions = Field(default_factory=FeedbackOptions)
    """Feedback options of every trajectory (sanitizer gate, context policy...), recorded in each plan.json."""
    concurrency: int | None = Field(default=None, ge=1)
    """Trajectories in flight at once; default twice the service's lanes (so a lane has the next kernel while
    its last trajectory waits for the model). Evaluations in flight are capped at twice the lanes either way."""
    turn_timeout_s: float = Field(default=900.0, gt=0)
    """Limit on one model call and on one evaluation (s)."""
    wall_time_limit_s: int = Field(default=0, ge=0)
    """Limit on one trajectory (s); 0 = none."""
    seed: int = Field(default=0, ge=0)
    """Base seed. Each trajectory's seed is derived from it and the trajectory's id (stable under reordering)
    and sent as ``seed`` to OpenAI-compatible endpoints (vLLM and SGLang honour it; hosted APIs do not)."""

    @field_validator("prompt_tags", "languages")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"listed twice: {sorted({v for v in value if value.count(v) > 1})}")
        return value

    @field_validator("models")
    @classmethod
    def _unique_models(cls, value: list[ModelSpec]) -> list[ModelSpec]:
        names = [m.name for m in value]
        if len(set(names)) != len(names):
            raise ValueError(f"model listed twice: {sorted({n for n in names if names.count(n) > 1})}")
        return value


def config_hash(config: ExperimentConfig) -> str:
    """``sha256:<hex>`` of the config's canonical JSON (sorted keys): equal configs, equal hashes."""
    text = json.dumps(config.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def shipped_configs() -> dict[str, Path]:
    """The shipped configs by name (``gemm``, ``mha-fwd``, ``gemm-smoke``...), from ``configs/*.yaml``."""
    folder = resources.files(__package__) / "configs"
    return {Path(p.name).stem: Path(str(p)) for p in folder.iterdir() if p.name.endswith(".yaml")}


def load_config(source: str | Path) -> ExperimentConfig:
    """Read a config: a YAML or JSON file, or the name of a shipped config (:func:`shipped_configs`).

    Raises:
        ExperimentConfigError: no such file or shipped config; not YAML/JSON; a field does not validate (the
            message names each field and what is wrong).
    """
    import yaml

    path = Path(source)
    shipped = shipped_configs()
    if not path.is_file() and str(source) in shipped:
        path = shipped[str(source)]
    if not path.is_file():
        import difflib

        close = difflib.get_close_matches(str(source), list(shipped), n=3, cutoff=0.6)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise ExperimentConfigError(
            f"{source}: no such config file, nor a shipped config; {hint}shipped: {', '.join(sorted(shipped))}"
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ExperimentConfigError(f"{path}: not readable as YAML or JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ExperimentConfigError(f"{path}: expected a mapping of fields, got {type(data).__name__}")
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'config'}: {err['msg']}" for err in exc.errors()
        )
        raise ExperimentConfigError(f"{path}: {problems}") from None


def config_schema() -> dict[str, Any]:
    """The JSON Schema of :class:`ExperimentConfig` (field docstrings as descriptions)."""
    return ExperimentConfig.model_json_schema()
