"""What the model is sent of the conversation: the run's context policy, earlier replies bounded.

:func:`context_messages` is what one model call is sent; the trajectory keeps every message whatever the
policy. ``full`` sends every message; ``latest-pair`` the system prompt, the task message, the latest reply
and its feedback; ``single-user`` the system prompt and one user message that holds the task, the kernel of
the latest reply and its feedback (a model that sees no conversation at all, only a task with a draft).

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

from .extraction import FENCE_TAG, LANGUAGE_TAGS, extract_kernel, fenced, fenced_blocks
from .feedback import trim
from .feedback_options import ContextPolicy

RESENT_PROSE_CHARS = 4_000
"""Longest prose of an earlier reply resent to the model (characters; the head is kept)."""
RESENT_KERNEL_CHARS = 64_000
"""Longest kernel of an earlier reply resent to the model (characters; head and tail kept past it)."""


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
        lines.append("The kernel this reply sent:\n" + fenced(kernel, FENCE_TAG[language]))
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


def _latest_pair(messages: list[dict]) -> tuple[dict, dict | None] | None:
    """The latest assistant reply after the task and the message that answered it (None: no reply yet)."""
    for index in range(len(messages) - 1, 1, -1):
        if messages[index].get("role") == "assistant":
            answer = messages[index + 1] if index + 1 < len(messages) else None
            return messages[index], answer
    return None


def single_user_message(task: str, reply: str, feedback: str | None, language: str) -> str:
    """The one user message of ``single-user``: the task, the latest reply's kernel and its feedback."""
    source = extract_kernel(reply, language).source
    if source is None:
        draft = "Your previous reply had no kernel block."
    else:
        kernel = source if len(source) <= RESENT_KERNEL_CHARS else trim(source, RESENT_KERNEL_CHARS)
        draft = "Your previous kernel:\n" + fenced(kernel, FENCE_TAG[language])
    parts = [task, draft]
    if feedback:
        parts.append("Its evaluation:\n" + feedback)
    parts.append("Write the next version of the kernel.")
    return "\n\n".join(parts)


def context_messages(messages: list[dict], policy: ContextPolicy, language: str) -> list[dict]:
    """What one model call is sent of ``messages`` (system, task, then the turns) under ``policy``.

    Raises:
        KeyError: ``language`` is not one of :data:`mini_ptx_agent.extraction.LANGUAGE_TAGS`.
        ValueError: an unknown ``policy``.
    """
    bounded = bounded_history(messages, language)
    if policy == "full" or len(bounded) <= 2:
        return bounded
    head = bounded[:2]
    pair = _latest_pair(bounded)
    if policy == "latest-pair":
        return head if pair is None else [*head, *(m for m in pair if m is not None)]
    if policy == "single-user":
        if pair is None:
            return head
        reply, answer = pair
        content = single_user_message(
            head[1].get("content") or "", reply.get("content") or "", (answer or {}).get("content"), language
        )
        return [head[0], {"role": "user", "content": content}]
    raise ValueError(f"unknown context policy {policy!r}: use full, latest-pair or single-user")
