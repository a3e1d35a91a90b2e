"""Strip comments and string literals from C/C++/CUDA source, keeping line numbers; find the ``#include``s as
the preprocessor does.

The source policy must not reject a kernel because ``cublas`` appears in a comment or a log message, and it
must not accept one because a call hides behind a macro line continuation. So the policy scans *code only*:
this module replaces every comment and the contents of every string and character literal with spaces
(newlines kept, so line numbers stay right).

Include directives are found separately, from the text the preprocessor reads: after line splicing (a
backslash at the end of a line joins the next, even inside ``#inc\\<newline>lude``), with the trigraph ``??=``
and the digraph ``%:`` read as ``#``, and with comments replaced by a space (so ``/* x */ #include <y>`` is a
directive). ``#include``, ``#include_next`` and ``#import`` (a GCC extension nvcc's host compiler accepts) all
count. A directive's header is ``<...>``, ``"..."``, or anything else, which is a computed include.

Handled in comments and literals: ``//`` and ``/* */`` comments, escape sequences in ``"..."`` and ``'...'``,
encoding prefixes (``u8``, ``u``, ``U``, ``L``) and C++11 raw strings ``R"delim( ... )delim"``. An apostrophe
right after a letter or digit is a digit separator (``1'000``), not a character literal.

One compiled regular expression does each scan (about 1 ms for a 300-line kernel; a character loop in Python
was ten times slower). Source: ISO C++ [lex.phases] (phases 1-3) and [lex.digraph].
"""

from __future__ import annotations

import bisect
import re
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field

_TOKENS = re.compile(
    r"""(?P<line_comment>//(?:[^\\\n]|\\[\s\S])*)
      | (?P<block_comment>/\*[\s\S]*?(?:\*/|\Z))
      | (?P<raw>(?<![\w])(?:u8|u|U|L)?R"(?P<delim>[^()\\\s]{0,16})\((?P<raw_body>[\s\S]*?)(?:\)(?P=delim)"|\Z))
      | (?P<string>"(?:[^"\\\n]|\\[\s\S])*"?)
      | (?P<char>(?<![\w])(?:u8|u|U|L)?'(?:[^'\\\n]|\\[\s\S])*'?)
    """,
    re.VERBOSE,
)
_SPLICE = re.compile(r"\\[ \t]*\n")
"""A line splice (GCC also splices when spaces follow the backslash, with a warning)."""
_DIRECTIVE = re.compile(
    r"^[ \t]*(?:#|%:)[ \t]*(?:include_next|include|import)\b[ \t]*(?P<rest>.*)$", re.MULTILINE
)
_HEADER = re.compile(r"^(?:<(?P<angle>[^>\n]*)>|\"(?P<quote>[^\"\n]*)\")")


@dataclass
class StrippedSource:
    """Code with comments and literal contents blanked, and the include directives of the source, found when
    asked for (:meth:`includes`, :meth:`computed_includes`).

    The directives are never listed: each call scans the text again and yields them one at a time, so that
    checking a source of a few million ``#include`` lines holds no object per directive (kept as lists,
    8 MiB of ``#include "/a"`` lines took a 420 MB process)."""

    source: str = field(repr=False)
    """The source as given."""
    code: str
    """Same length and line structure as the input; comments and literal contents are spaces."""

    _newlines: array[int] | None = field(default=None, init=False, repr=False)
    _logical: tuple[str, array[int], array[int]] | None = field(default=None, init=False, repr=False)

    def line_of(self, offset: int) -> int:
        """1-based line number of character ``offset`` in :attr:`code`.

        The newlines' offsets are found once: counting them from the start for every match made the policy
        quadratic (a 2 MiB source of `cute::` or `dlopen(` lines took 100 s in the trusted process).
        """
        if self._newlines is None:
            self._newlines = _newline_offsets(self.code)
        return bisect.bisect_left(self._newlines, offset) + 1

    def includes(self) -> Iterator[tuple[int, str]]:
        """``(line, header)`` for each ``#include <h>`` or ``#include "h"`` directive, in line order; line
        numbers start at 1."""
        for line, header, _rest in self._directives():
            if header is not None:
                yield line, header

    def computed_includes(self) -> Iterator[tuple[int, str]]:
        """``(line, text)`` for each directive that names its header through a macro or anything else."""
        for line, header, rest in self._directives():
            if header is None:
                yield line, rest

    def _directives(self) -> Iterator[tuple[int, str | None, str]]:
        """The include directives as the preprocessor reads them (see the module docstring): ``(line, header
        or None for a computed include, the directive's text after the keyword)``."""
        if self._logical is None:
            self._logical = _logical_text(self.source)
        logical, splices, newlines = self._logical
        for match in _DIRECTIVE.finditer(logical):
            line = (
                bisect.bisect_left(newlines, match.start()) + 1 + bisect.bisect_right(splices, match.start())
            )
            rest = match.group("rest").strip()
            header = _HEADER.match(rest)
            if header:
                yield line, (header.group("angle") or header.group("quote") or "").strip(), rest
            else:
                yield line, None, rest


def _newline_offsets(text: str) -> array[int]:
    """Offsets of every ``\\n`` in ``text``, ascending (8 bytes each)."""
    return array("q", (match.start() for match in re.finditer("\n", text)))


def _logical_text(source: str) -> tuple[str, array[int], array[int]]:
    """The text the preprocessor's directives are read from (trigraphs read, lines spliced, comments blanked),
    the offsets in it where a physical newline was removed by a splice, and its own newlines' offsets."""
    text = source.replace("??=", "#").replace("??/", "\\")
    splices: array[int] = array("q")
    removed = 0
    for match in _SPLICE.finditer(text):
        splices.append(match.start() - removed)
        removed += match.end() - match.start()
    logical = _blank_tokens(_SPLICE.sub("", text), literals=False)
    return logical, splices, _newline_offsets(logical)


def _blank(text: str) -> str:
    """Replace everything but newlines with spaces, so offsets and line numbers are preserved."""
    return "".join("\n" if ch == "\n" else " " for ch in text)


def _blank_tokens(source: str, *, literals: bool) -> str:
    """``source`` with comments blanked, and with the contents of literals blanked too when ``literals``."""

    def replace(match: re.Match[str]) -> str:
        kind, text = match.lastgroup, match.group(0)
        if kind in ("line_comment", "block_comment"):
            return _blank(text)
        if not literals:
            return text
        if kind == "raw":
            body_start = match.start("raw_body") - match.start()
            body_end = match.end("raw_body") - match.start()
            return text[:body_start] + _blank(text[body_start:body_end]) + text[body_end:]
        # string or char literal: keep the prefix and the quotes, blank what is between them
        quote_at = next(i for i, ch in enumerate(text) if ch in "\"'")
        body = text[quote_at + 1 :]
        closed = body.endswith(text[quote_at])
        return (
            text[: quote_at + 1] + _blank(body[:-1] if closed else body) + (text[quote_at] if closed else "")
        )

    return _TOKENS.sub(replace, source)


def strip_c_source(source: str) -> StrippedSource:
    """Blank comments and string/char literal contents in C/C++/CUDA ``source``, and find its includes.

    Returns:
        A :class:`StrippedSource` whose ``code`` has the same length as ``source``; quotes stay in place so
        ``f("x")`` becomes ``f(" ")``.
    """
    return StrippedSource(source=source, code=_blank_tokens(source, literals=True))
