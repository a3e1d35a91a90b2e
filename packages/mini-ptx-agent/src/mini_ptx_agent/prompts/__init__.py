"""System prompts, architecture knowledge and the first user message of the kernel agent.

Fragments are markdown files in ``fragments/``; helper headers (``headers/``) and example kernels
(``examples/``) are real source files included verbatim, so CI compiles exactly what the model reads.
"""

from mini_ptx_agent.prompts.composer import (
    PROMPT_TAGS,
    PromptTag,
    compose_system_prompt,
    expected_signature,
    first_user_message,
    get_prompt_tag,
    list_prompt_tags,
    read_prompt_file,
)

__all__ = [
    "PROMPT_TAGS",
    "PromptTag",
    "compose_system_prompt",
    "expected_signature",
    "first_user_message",
    "get_prompt_tag",
    "list_prompt_tags",
    "read_prompt_file",
]
