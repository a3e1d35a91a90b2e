"""Extract the kernel from a model reply: the LAST fenced code block of the target language.

The model writes one whole kernel per turn in a fenced block: ```` ```cuda ````, ```` ```cu ```` or
```` ```cpp ```` for CUDA, ```` ```python ```` (or ```` ```py ````) for Triton. Earlier blocks are usually drafts or
snippets, so the last complete block wins. Parsing is line based: a fence opens on a line of three or more
backticks followed by an info string and closes on a line of at least as many backticks and nothing else, as in
CommonMark. An unclosed block (often a reply cut off by the token limit) is never used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LANGUAGE_TAGS: dict[str, frozenset[str]] = {
    "cuda": frozenset({"cuda", "cu", "cpp", "c++"}),
    "triton": frozenset({"python", "py"}),
}
"""Fence info strings (lower-cased first word) accepted for each task language."""
FENCE_TAG: dict[str, str] = {"cuda": "cuda", "triton": "python"}
"""The fence info string a kernel of each task language is written with."""

_OPEN = re.compile(r"^ {0,3}(?P<fence>`{3,})[ \t]*(?P<info>[^`\s]*)[^`]*$")
_CLOSE = re.compile(r"^ {0,3}(?P<fence>`{3,})[ \t]*$")


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block of a reply: its info-string tag (lower case, may be empty) and its text."""

    tag: str
    content: str


@dataclass(frozen=True)
class Extraction:
    """What was found in a reply: the kernel source (or None), all complete blocks, and an unclosed tag."""

    source: str | None
    blocks: tuple[CodeBlock, ...]
    unclosed_tag: str | None
    prose: str = ""
    """The reply without its fenced blocks (an unclosed block's text included), stripped."""


def fenced_blocks(text: str) -> Extraction:
    """Split ``text`` into complete fenced code blocks (source not chosen yet; see :func:`extract_kernel`)."""
    blocks: list[CodeBlock] = []
    open_fence: str | None = None
    tag = ""
    body: list[str] = []
    prose: list[str] = []
    for line in text.splitlines():
        if open_fence is None:
            match = _OPEN.match(line)
            if match:
                open_fence, tag, body = match["fence"], match["info"].lower(), [line]
            else:
                prose.append(line)
            continue
        close = _CLOSE.match(line)
        if close and len(close["fence"]) >= len(open_fence):
            blocks.append(CodeBlock(tag=tag, content="\n".join(body[1:])))
            open_fence = None
        else:
            body.append(line)
    if open_fence is not None:
        prose += body
    return Extraction(
        source=None,
        blocks=tuple(blocks),
        unclosed_tag=tag if open_fence is not None else None,
        prose="\n".join(prose).strip(),
    )


def extract_kernel(text: str, language: str) -> Extraction:
    """The last complete fenced block whose tag belongs to ``language`` (``cuda`` or ``triton``).

    Returns an :class:`Extraction` whose ``source`` is the block's text with a trailing newline, or ``None``
    when the reply has no such block (empty blocks do not count).

    Raises:
        KeyError: ``language`` is not ``cuda`` or ``triton``.
    """
    tags = LANGUAGE_TAGS[language]
    found = fenced_blocks(text)
    for block in reversed(found.blocks):
        if block.tag in tags and block.content.strip():
            return Extraction(
                source=block.content.rstrip() + "\n",
                blocks=found.blocks,
                unclosed_tag=found.unclosed_tag,
                prose=found.prose,
            )
    return found


def fenced(source: str, tag: str) -> str:
    """``source`` in a fenced block tagged ``tag`` whose fence is longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", source)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{tag}\n{source.rstrip()}\n{fence}"


def format_error_message(extraction: Extraction, language: str) -> str:
    """The deterministic reply when a model turn carries no usable kernel block; says exactly what to send."""
    tags = sorted(LANGUAGE_TAGS[language])
    wanted = " or ".join(f"```{tag}" for tag in tags)
    what = "one CUDA source file (kernel.cu)" if language == "cuda" else "one Triton Python file (kernel.py)"
    lines = [
        f"FORMAT ERROR: no complete {wanted} code block was found in your reply, so nothing was evaluated."
    ]
    if extraction.unclosed_tag is not None:
        lines.append(
            f"A ```{extraction.unclosed_tag} block was opened but never closed (was the reply cut off?). "
            "Send a shorter reply that closes the block."
        )
    elif extraction.blocks:
        seen = ", ".join(sorted({b.tag or "(no tag)" for b in extraction.blocks}))
        lines.append(f"Blocks found had the tags: {seen}; none of them is accepted for {language}.")
    lines.append(f"Reply with the whole kernel as {what} in a single fenced block that starts with {wanted}.")
    return "\n".join(lines)
