"""The model factory of mini-ptx-agent: one call turns ``MODEL_NAME`` / ``ACCRL_MODEL_HOST`` into a model.

=====================================  ==============================================================
input                                  model
=====================================  ==============================================================
``replay:PATH``                        :class:`ReplayModel`: the trajectory's assistant messages in order
``demo``                               :class:`ReplayModel` of the bundled demo of the run's definition and language
``ACCRL_MODEL_HOST=host:port`` + name  :class:`OpenAIEndpointModel`: vLLM/SGLang; the served id must equal the name
a litellm name (``anthropic/...``)     :class:`LitellmHostedModel`: hosted API, key from its usual variable
nothing, ``fallback_replay`` given     :class:`ReplayModel` of that file, with a loud warning
=====================================  ==============================================================

Every model follows mini-swe-agent 2.4.6's model protocol (see :mod:`mini_ptx_agent.models.base`). Importing
this module is cheap: litellm is imported only when a hosted model is built.

One module per backend: :mod:`~mini_ptx_agent.models.endpoint`, :mod:`~mini_ptx_agent.models.litellm`,
:mod:`~mini_ptx_agent.models.replay`; what they share is in :mod:`~mini_ptx_agent.models.base` and
:mod:`~mini_ptx_agent.models.config`. :mod:`~mini_ptx_agent.models.bounded` wraps any of them with the turn
timeout and the wall-time limit (the agent uses it; the factory does not).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mini_ptx_agent.demo import DEMO_MODEL_NAMES
from mini_ptx_agent.models.base import (
    KernelModelBase,
    ModelConfigError,
    ModelError,
    ModelRequestError,
    ModelUnavailableError,
    ModelUsage,
    ReplayExhaustedError,
)
from mini_ptx_agent.models.config import ModelsConfig, RetryPolicy, SamplingSettings, load_models_config
from mini_ptx_agent.models.endpoint import OpenAIEndpointModel, normalise_base_url
from mini_ptx_agent.models.replay import REPLAY_PREFIX, ReplayModel, demo_model

# litellm fetches its price table from the network at import unless told otherwise; nobody may import it
# through us without this set first.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

logger = logging.getLogger("mini_ptx_agent.models")

__all__ = [
    "KernelModelBase",
    "ModelConfigError",
    "ModelError",
    "ModelRequestError",
    "ModelUnavailableError",
    "ModelUsage",
    "ModelsConfig",
    "OpenAIEndpointModel",
    "ReplayExhaustedError",
    "ReplayModel",
    "RetryPolicy",
    "SamplingSettings",
    "load_models_config",
    "make_model",
]


def make_model(
    name: str | None = None,
    *,
    model_host: str | None = None,
    config: ModelsConfig | Mapping[str, Any] | str | Path | None = None,
    sampling: Mapping[str, Any] | None = None,
    retry: RetryPolicy | None = None,
    fallback_replay: str | Path | None = None,
    check_served_id: bool = True,
    api_base: str | None = None,
    request_timeout_s: float | None = None,
    definition: str | None = None,
    language: str | None = None,
) -> KernelModelBase:
    """Build the model for a run.

    Args:
        name: model name; ``None`` reads ``MODEL_NAME``. ``replay:PATH`` selects a replay.
        model_host: ``host:port`` of an OpenAI-compatible endpoint; ``None`` reads ``ACCRL_MODEL_HOST``.
        config: model configuration (sampling per family, retry policy); ``None`` = bundled ``models.yaml``.
        sampling: per-run overrides of the family's sampling settings (``temperature``, ``top_p``, ...).
        retry: retry policy overriding the configuration's (tests use short backoffs).
        fallback_replay: trajectory to replay when no model is configured at all (the bundled demo); a warning
            is logged and printed to stderr, and ``config.fallback`` is true.
        check_served_id: endpoint only: verify ``GET /v1/models`` lists ``name`` at construction.
        api_base: hosted models only: send litellm requests to this base URL (a gateway or proxy).
        request_timeout_s: cap on one HTTP request (s), below the policy's ``request_timeout_s``; a run passes its
            turn timeout, so no request outlives the turn that waits for it.
        definition, language: the run's task; ``demo`` replays the bundled demo of this pair
            (:mod:`mini_ptx_agent.demo`).

    Raises:
        ModelConfigError: nothing configured and no fallback; a host without a name; a missing API key
            variable; a served-id mismatch; an unreadable replay file; ``demo`` for a task without a demo.
        ModelUnavailableError: the endpoint's ``/v1/models`` is unreachable after retries.
    """
    name = name or os.environ.get("MODEL_NAME") or None
    model_host = model_host or os.environ.get("ACCRL_MODEL_HOST") or None
    if name and name.startswith(REPLAY_PREFIX):
        return ReplayModel(path=name[len(REPLAY_PREFIX) :], model_name=name)
    if name in DEMO_MODEL_NAMES:
        return demo_model(definition, language)
    if not name:
        if model_host:
            raise ModelConfigError(
                f"ACCRL_MODEL_HOST={model_host} is set but MODEL_NAME is not; set MODEL_NAME to the served model id"
            )
        if fallback_replay is None:
            raise ModelConfigError(
                "no model configured: set MODEL_NAME (a litellm name such as anthropic/claude-sonnet-4-5 with its "
                "API key variable, or a served id together with ACCRL_MODEL_HOST=host:port), or MODEL_NAME=replay:PATH"
            )
        warning = (
            f"NO MODEL CONFIGURED (MODEL_NAME unset): replaying the recorded trajectory {fallback_replay}. "
            "This is a demo, not a model under evaluation."
        )
        logger.warning(warning)
        print(f"WARNING: {warning}", file=sys.stderr)
        return ReplayModel(
            path=fallback_replay, model_name=f"{REPLAY_PREFIX}{fallback_replay}", fallback=True
        )

    models_config = load_models_config(config)
    family = models_config.family_for(name)
    settings = models_config.sampling_for(name).merged(sampling)
    policy = retry or models_config.retry
    if request_timeout_s is not None and request_timeout_s < policy.request_timeout_s:
        policy = policy.model_copy(update={"request_timeout_s": request_timeout_s})
    common: dict[str, Any] = {
        "model_name": name,
        "family": family.name if family else None,
        "sampling": settings,
        "pricing": family.pricing if family else None,
        "retry": policy,
    }
    if model_host:
        return OpenAIEndpointModel(
            base_url=normalise_base_url(model_host), check_served_id=check_served_id, **common
        )
    from mini_ptx_agent.models.litellm import LitellmHostedModel  # imports litellm (seconds): only here

    return LitellmHostedModel(api_base=api_base, **common)
