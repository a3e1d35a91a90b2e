"""What the model is sent of its earlier replies: bounded, however long a reply was.

The trajectory keeps every reply whole, once. When the model is asked for the next turn, an earlier reply
whose prose (the text outside the kernel's fenced block) is longer than :data:`RESENT_PROSE_CHARS`, or whose
kernel is longer than :data:`RESENT_KERNEL_CHARS`, is resent as the head of its prose, a line saying how much
was left out, and the kernel it sent (the block the agent evaluated; head and tail kept past the cap). A reply
within both caps is resent unchanged, so ordinary conversations are exactly what the model wrote.

So one 1 MB reply costs about ``RESENT_PROSE_CHARS + RESENT_KERNEL_CHARS`` characters on each later request
instead of 1 MB. The caps: 4,000 characters of prose (a page of reasoning) and 64,000 of kernel (twice the
30,958 characters of fibserve's TMA + wgmma reference GEMM kernel).
"""

from __future__ import annotations

from .extraction import LANGUAGE_TAGS, extract_kernel, fenced, fenced_blocks
from .feedback import trim

RESENT_PROSE_CHARS = 4_000
"""Longest prose of an earlier reply resent to the model (characters; the head is kept)."""
RESENT_KERNEL_CHARS = 64_000
"""Longest kernel of an earlier reply resent to the model (characters; head and tail kept past it)."""

_FENCE_TAG = {"cuda": "cuda", "triton": "python"}


def bounded_reply(content: str, language: str) -> str:
    """``content`` (one assistant reply) as it is resent: unchanged within the caps, else condensed."""
    source = extract_kernel(content, language).source
    kernel_chars = len(source) if source is not None else 0
    prose_chars = len(content) - kernel_chars
    if prose_chars <= RESENT_PROSE_CHARS and kernel_chars <= RESENT_KERNEL_CHARS:
        return content
    head = content[:RESENT_PROSE_CHARS]
    if fenced_blocks(head).unclosed_tag is not None:  # the cut fell inside a block: end before its fence
        head = head[: max(0, head.rfind("\n```"))]
    head = head.rstrip()
    left_out = len(content) - len(head) - kernel_chars
    lines = [head, f"[... {left_out} characters of this reply are not repeated here ...]"]
    if source is not None and source.rstrip() not in head:
        kernel = source if kernel_chars <= RESENT_KERNEL_CHARS else trim(source, RESENT_KERNEL_CHARS)
        lines.append("The kernel this reply sent:\n" + fenced(kernel, _FENCE_TAG[language]))
    return "\n".join(lines)


def bounded_history(messages: list[dict], language: str) -> list[dict]:
    """``messages`` with every assistant reply as :func:`bounded_reply` resends it (other messages as they are).

    Raises:
        KeyError: ``language`` is not one of :data:`mini_ptx_agent.extraction.LANGUAGE_TAGS`.
    """
    LANGUAGE_TAGS[language]  # fail early on a language the extraction does not know
    return [
        {**m, "content": bounded_reply(m.get("content") or "", language)}
        if m.get("role") == "assistant"
        else m
        for m in messages
    ]
