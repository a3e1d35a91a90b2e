"""Kernels with syntax highlighting and line numbers, highlighted a block of lines at a time when drawn.

Pygments lexes CUDA and Python (rich's ``ansi_dark`` theme colours the tokens). Lexing is slow for a large file
(about 10 µs a character on a loaded machine: 0.4 s for a 40 KB kernel), so a :class:`CodeDocument` lexes
:data:`BLOCK` lines at a time, the first time one of them is drawn, and keeps the result: opening a turn costs
one screenful whatever the kernel's size. A block that starts inside a multi-line comment or string is
coloured as code until that comment ends (display only; the text is unchanged).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from rich.syntax import Syntax
from rich.text import Text

BLOCK = 64
"""Lines lexed together."""

LEXERS = {"cuda": "cuda", "triton": "python", "python": "python"}
"""Task language -> pygments lexer name."""


@lru_cache(maxsize=4)
def _lexer(name: str) -> Any:
    from pygments.lexers import get_lexer_by_name

    return get_lexer_by_name(name, stripnl=False, ensurenl=False)


class CodeDocument:
    """A kernel as a :class:`~mini_ptx_agent.inspect.text_pane.Document`: numbered, highlighted lazily."""

    def __init__(self, source: str, language: str):
        self.lines = source.splitlines() or [""]
        self.lexer = _lexer(LEXERS.get(language, "text"))
        self.theme = Syntax.get_theme("ansi_dark")
        self.gutter = len(str(len(self.lines))) + 3
        """Cells in front of each line: its number and a rule."""
        self._blocks: dict[int, list[Text]] = {}

    def __len__(self) -> int:
        return len(self.lines)

    def plain(self, index: int) -> str:
        return self.lines[index]

    def line(self, index: int) -> Text:
        block = index // BLOCK
        if block not in self._blocks:
            self._blocks[block] = self._lex(block)
        number = Text(f"{index + 1:>{self.gutter - 3}} │ ", style="dim")
        return number + self._blocks[block][index % BLOCK]

    def _lex(self, block: int) -> list[Text]:
        lines = self.lines[block * BLOCK : (block + 1) * BLOCK]
        out = [Text()]
        for token_type, value in self.lexer.get_tokens("\n".join(lines)):
            style = self.theme.get_style_for_token(token_type)
            parts = value.split("\n")
            for k, part in enumerate(parts):
                if k:
                    out.append(Text())
                if part:
                    out[-1].append(part, style=style)
        while len(out) < len(lines):
            out.append(Text())
        return out[: len(lines)]


DIFF_STYLES = {"+++": "bold", "---": "bold", "@@": "cyan", "+": "green", "-": "red"}
"""Styles of unified-diff lines by their first characters (longest prefix first)."""


def diff_lines(lines: list[str]) -> list[Text]:
    """Unified-diff lines coloured: additions green, deletions red, hunk headers cyan."""
    out = []
    for line in lines:
        style = next((s for prefix, s in DIFF_STYLES.items() if line.startswith(prefix)), "")
        out.append(Text(line, style=style))
    return out
