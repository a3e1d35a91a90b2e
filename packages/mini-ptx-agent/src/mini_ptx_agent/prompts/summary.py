"""One row per prompt tag, for ``ptxbench prompts list``: its target, size in characters and in tokens."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from mini_ptx_agent.prompts.composer import compose_system_prompt
from mini_ptx_agent.prompts.registry import get_prompt_tag, list_prompt_tags
from mini_ptx_agent.prompts.tokens import TOKENIZER, TOKENIZER_DESCRIPTION, count_tokens


class TagSummary(BaseModel):
    """Size and make-up of one composed system prompt."""

    model_config = ConfigDict(frozen=True)

    name: str
    """The tag."""
    target: str
    """Its target in ``tags.toml`` (``hopper-cuda``, ...)."""
    language: str
    """``cuda`` or ``triton``."""
    sm: str
    """``sm_90a`` or ``sm_100a``."""
    chars: int
    """Length of the composed prompt in characters."""
    tokens: int
    """Length in tokens of :data:`~mini_ptx_agent.prompts.tokens.TOKENIZER`."""
    parts: list[str]
    """The tag's parts as written (fragments and tags)."""
    description: str
    """One line for humans."""


class TagListing(BaseModel):
    """Every tag, and how its tokens were counted."""

    tokenizer: str
    """Encoding name (``cl100k_base``)."""
    tokenizer_description: str
    """Where the tokenizer comes from, in words."""
    tags: list[TagSummary]
    """Sorted by name."""


def summarize_tags() -> TagListing:
    """Compose every tag and measure it.

    Raises:
        TokenizerUnavailableError: no offline tokenizer is installed.
    """
    rows = []
    for name in list_prompt_tags():
        tag, text = get_prompt_tag(name), compose_system_prompt(name)
        rows.append(
            TagSummary(
                name=name,
                target=tag.target,
                language=tag.language,
                sm=tag.sm,
                chars=len(text),
                tokens=count_tokens(text),
                parts=list(tag.parts),
                description=tag.description,
            )
        )
    return TagListing(tokenizer=TOKENIZER, tokenizer_description=TOKENIZER_DESCRIPTION, tags=rows)
