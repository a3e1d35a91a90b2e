"""Strip comments and string literals from C/C++/CUDA source, keeping line numbers.

The source policy must not reject a kernel because ``cublas`` appears in a comment or a log message, and it
must not accept one because a call hides behind a macro line continuation. So the policy scans *code only*:
this module replaces every comment and the contents of every string and character literal with spaces
(newlines kept, so line numbers stay right) and returns ``#include`` targets separately, because a header name
such as ``"cublas_v2.h"`` looks like a string literal but is code.

Handled: ``//`` and ``/* */`` comments, backslash-newline continuations inside ``//`` comments (they extend
the comment, as in the C standard's translation phase 2), escape sequences in ``"..."`` and ``'...'``,
encoding prefixes (``u8``, ``u``, ``U``, ``L``) and C++11 raw strings ``R"delim( ... )delim"``.
Not handled: trigraphs, and digit separators (``1'000``) in numbers; an apostrophe in a number starts a
character literal that ends at the next ``'`` or at the end of the line, which may blank a little code on that
line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_INCLUDE = re.compile(r"[ \t]*#[ \t]*include[ \t]*([<\"])([^>\"\n]*)[>\"]")
_RAW_PREFIX = re.compile(r"(?:u8|u|U|L)?R\"([^()\\\s]{0,16})\(")
_STRING_PREFIX = re.compile(r"(?:u8|u|U|L)[\"']")


@dataclass
class StrippedSource:
    """Code with comments and literal contents blanked, plus the ``#include`` directives found."""

    code: str
    """Same length and line structure as the input; comments and literal contents are spaces."""
    includes: list[tuple[int, str]] = field(default_factory=list)
    """``(line, header)`` for each ``#include`` directive outside comments; line numbers start at 1."""

    def line_of(self, offset: int) -> int:
        """1-based line number of character ``offset`` in :attr:`code`."""
        return self.code.count("\n", 0, offset) + 1


def _blank(text: str) -> str:
    """Replace everything but newlines with spaces, so offsets and line numbers are preserved."""
    return "".join("\n" if ch == "\n" else " " for ch in text)


def strip_c_source(source: str) -> StrippedSource:
    """Blank comments and string/char literal contents in C/C++/CUDA ``source``.

    Returns:
        A :class:`StrippedSource` whose ``code`` has the same length as ``source``; quotes stay in place so
        ``f("x")`` becomes ``f(" ")``.
    """
    out: list[str] = []
    includes: list[tuple[int, str]] = []
    i, n, line = 0, len(source), 1
    at_line_start = True
    while i < n:
        ch = source[i]
        if at_line_start and (match := _INCLUDE.match(source, i)):
            includes.append((line, match.group(2).strip()))
            out.append(match.group(0))
            i, at_line_start = match.end(), False
            continue
        if source.startswith("//", i):
            end = i
            while end < n and source[end] != "\n":
                # A backslash before the newline continues the comment onto the next line.
                end = end + 2 if source.startswith("\\\n", end) else end + 1
            kept = _blank(source[i:end])
        elif source.startswith("/*", i):
            close = source.find("*/", i + 2)
            end = n if close < 0 else close + 2
            kept = _blank(source[i:end])
        elif ch in "uULR" and _starts_token(source, i) and (raw := _RAW_PREFIX.match(source, i)):
            terminator = ")" + raw.group(1) + '"'
            close = source.find(terminator, raw.end())
            end = n if close < 0 else close + len(terminator)
            body_end = end if close < 0 else close
            kept = source[i : raw.end()] + _blank(source[raw.end() : body_end]) + source[body_end:end]
        elif ch in "uUL" and _starts_token(source, i) and (prefix := _STRING_PREFIX.match(source, i)):
            end = prefix.end() - 1  # keep the encoding prefix; the quote is handled next round
            kept = source[i:end]
        elif ch in "\"'":
            end = _quoted_end(source, i)
            body_end = end - 1 if end - 1 > i and source[end - 1] == ch else end
            kept = ch + _blank(source[i + 1 : body_end]) + source[body_end:end]
        else:
            end, kept = i + 1, ch
        out.append(kept)
        line += kept.count("\n")
        if kept.strip():
            at_line_start = False
        elif "\n" in kept:
            at_line_start = True
        i = end
    return StrippedSource(code="".join(out), includes=includes)


def _starts_token(source: str, i: int) -> bool:
    """Whether position ``i`` begins a new token (so ``xR"(`` is not a raw string)."""
    return i == 0 or not (source[i - 1].isalnum() or source[i - 1] == "_")


def _quoted_end(source: str, start: int) -> int:
    """End offset (exclusive) of the quoted literal opening at ``start``; stops at an unescaped newline."""
    quote = source[start]
    i = start + 1
    n = len(source)
    while i < n:
        ch = source[i]
        if ch == "\\":
            i += 2
            continue
        if ch == quote:
            return i + 1
        if ch == "\n":
            return i  # unterminated: the compiler will report it; do not swallow the rest of the file
        i += 1
    return n
