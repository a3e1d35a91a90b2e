"""System prompts, architecture knowledge and the first user message of the kernel agent.

Prompt tags are listed in ``tags.toml`` (see :mod:`~mini_ptx_agent.prompts.registry`); fragments are markdown files
in ``fragments/``; helper headers (``headers/``) and example kernels (``examples/``) are real source files included
verbatim, so CI compiles exactly what the model reads.
"""

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
