"""System prompts, architecture knowledge and the first user message of the kernel agent.

Prompt tags are listed in ``tags.toml`` (see :mod:`~mini_ptx_agent.prompts.registry`); fragments are markdown files
in ``fragments/``; helper headers (``headers/``) and example kernels (``examples/``) are real source files included
verbatim, so CI compiles exactly what the model reads.

The names below are imported on first use (PEP 562), so registering the ``ptxbench prompts`` commands does not
load the registry or pydantic, and ``ptxbench --help`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "PROMPT_TAGS": "registry",
    "PromptRegistryError": "registry",
    "PromptTag": "registry",
    "UnknownPromptTagError": "registry",
    "get_prompt_tag": "registry",
    "list_prompt_tags": "registry",
    "load_tag_registry": "registry",
    "compose_system_prompt": "composer",
    "read_prompt_file": "composer",
    "render_fragment": "composer",
    "expected_signature": "task_message",
    "first_user_message": "task_message",
}

__all__ = [
    "PROMPT_TAGS",
    "PromptRegistryError",
    "PromptTag",
    "UnknownPromptTagError",
    "compose_system_prompt",
    "expected_signature",
    "first_user_message",
    "get_prompt_tag",
    "list_prompt_tags",
    "load_tag_registry",
    "read_prompt_file",
    "render_fragment",
]

if TYPE_CHECKING:
    from mini_ptx_agent.prompts.composer import compose_system_prompt, read_prompt_file, render_fragment
    from mini_ptx_agent.prompts.registry import (
        PROMPT_TAGS,
        PromptRegistryError,
        PromptTag,
        UnknownPromptTagError,
        get_prompt_tag,
        list_prompt_tags,
        load_tag_registry,
    )
    from mini_ptx_agent.prompts.task_message import expected_signature, first_user_message


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
