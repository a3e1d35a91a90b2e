"""A scrolling text pane that renders only the lines on screen (textual's line API).

A pane shows a :class:`Document`: numbered lines whose plain text is cheap and whose styled text is made when a
line is drawn. Prose is word-wrapped to the pane's width (the layout is a list of row offsets, computed once
per width); code is not wrapped and scrolls sideways. A search query is highlighted in the rows drawn, and
:meth:`TextPane.find` finds the next line holding it. So a reply of megabytes or a kernel of thousands of lines
shows and scrolls at the cost of one screenful.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar, Protocol

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

MATCH_STYLE = Style(bgcolor="yellow", color="black", bold=True)
"""How a search match is shown."""


class Document(Protocol):
    """Lines a :class:`TextPane` shows."""

    def __len__(self) -> int: ...

    def plain(self, index: int) -> str:
        """Line ``index`` as plain text (what wrapping and search use)."""
        ...

    def line(self, index: int) -> Text:
        """Line ``index`` as styled text (made when the line is drawn). In a wrapped pane its plain text is
        :meth:`plain`; a code document may put a line-number gutter in front (its width: ``gutter``)."""
        ...


class Lines:
    """A :class:`Document` of lines given whole (strings or styled :class:`~rich.text.Text`)."""

    def __init__(self, lines: Sequence[str | Text]):
        self.lines = list(lines)

    @classmethod
    def of_text(cls, text: str, style: str = "") -> Lines:
        """``text`` split into lines, each in ``style``."""
        return cls([Text(line, style=style) if style else line for line in text.splitlines()] or [""])

    def __len__(self) -> int:
        return len(self.lines)

    def plain(self, index: int) -> str:
        line = self.lines[index]
        return line.plain if isinstance(line, Text) else line

    def line(self, index: int) -> Text:
        line = self.lines[index]
        return line if isinstance(line, Text) else Text(line)


def wrap_rows(text: str, width: int) -> list[tuple[int, int]]:
    """``(start, end)`` character offsets of the rows ``text`` takes at ``width`` cells: greedy word wrap,
    a word longer than the width cut where the width ends."""
    if len(text) <= width or width < 2:
        return [(0, len(text))]
    rows = []
    start = 0
    while len(text) - start > width:
        cut = text.rfind(" ", start, start + width + 1)
        cut = start + width if cut <= start else cut + 1
        rows.append((start, cut))
        start = cut
    rows.append((start, len(text)))
    return rows


class TextPane(ScrollView, can_focus=True):
    """Shows a :class:`Document`; ``wrap`` for prose, sideways scrolling for code."""

    DEFAULT_CSS = """
    TextPane {
        background: $surface; overflow-y: auto; overflow-x: auto;
        border: round $primary-darken-2; border-title-color: $accent;
    }
    TextPane:focus { background-tint: $foreground 4%; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "scroll_down", "down", show=False),
        Binding("k", "scroll_up", "up", show=False),
        Binding("h", "scroll_left", "left", show=False),
        Binding("l", "scroll_right", "right", show=False),
        Binding("g", "scroll_home", "top", show=False),
        Binding("G", "scroll_end", "bottom", show=False),
        Binding("space", "page_down", "page down", show=False),
    ]

    class Clicked(Message):
        """A line of the pane was clicked."""

        def __init__(self, pane: TextPane, line: int):
            super().__init__()
            self.pane = pane
            self.line = line

    def __init__(self, *, wrap: bool = True, id: str | None = None):
        super().__init__(id=id)
        self.wrap = wrap
        if wrap:
            self.styles.overflow_x = "hidden"
        self.document: Document = Lines([""])
        self.query = ""
        self._pattern: re.Pattern[str] | None = None
        self._rows: list[tuple[int, int, int]] = [(0, 0, 0)]
        self._first_row: list[int] = [0]
        self._layout_width = -1
        self._strips: LRUCache[int, Strip] = LRUCache(512)
        self._style = Style()

    # -- content -------------------------------------------------------------------------------------------------

    def show(self, document: Document, *, title: str = "", keep_position: bool = False) -> None:
        """Show ``document`` from its top (or at the same line, ``keep_position``), titled ``title``."""
        line = self.top_line if keep_position else 0
        self.document = document
        self.border_title = title
        self.border_subtitle = ""
        self._layout_width = -1
        self._layout()
        self.scroll_to_line(line, center=False)
        self.refresh()

    def highlight(self, query: str) -> None:
        """Mark every occurrence of ``query`` (any case) in the lines drawn; an empty query marks none."""
        self.query = query
        self._pattern = re.compile(re.escape(query), re.IGNORECASE) if query else None
        self._strips.clear()
        self.refresh()

    def find(
        self, query: str, after: int, *, backwards: bool = False, wrap_around: bool = True
    ) -> int | None:
        """The first line after line ``after`` (before it, ``backwards``) holding ``query`` (any case); with
        ``wrap_around`` the search goes on from the other end up to ``after`` itself. None when no line does.
        ``after`` may be -1 (search from the top) or the line count (from the bottom, backwards)."""
        count = len(self.document)
        if not query or not count:
            return None
        needle = query.lower()
        step = -1 if backwards else 1
        if wrap_around:
            order = ((after + step * k) % count for k in range(1, count + 1))
        else:
            order = iter(range(after - 1, -1, -1) if backwards else range(after + 1, count))
        return next((i for i in order if 0 <= i < count and needle in self.document.plain(i).lower()), None)

    @property
    def top_line(self) -> int:
        """The document line at the top of the pane."""
        row = min(int(self.scroll_y), len(self._rows) - 1)
        return self._rows[row][0] if self._rows else 0

    def scroll_to_line(self, line: int, *, center: bool = True) -> None:
        """Scroll so that document line ``line`` is in view (a few rows below the top when ``center``)."""
        line = max(0, min(line, len(self._first_row) - 1))
        row = self._first_row[line] if self._first_row else 0
        self.scroll_to(y=max(0, row - (3 if center else 0)), animate=False, immediate=True)

    # -- layout and drawing --------------------------------------------------------------------------------------

    def _layout(self) -> None:
        width = max(self.scrollable_content_region.width, 1)
        if self.wrap and width == self._layout_width:
            return
        self._layout_width = width
        rows: list[tuple[int, int, int]] = []
        first: list[int] = []
        widest = 0
        for index in range(len(self.document)):
            text = self.document.plain(index)
            first.append(len(rows))
            if self.wrap:
                rows.extend((index, a, b) for a, b in wrap_rows(text, width))
            else:
                rows.append((index, 0, len(text)))
                widest = max(widest, cell_len(text))
        self._rows, self._first_row = rows or [(0, 0, 0)], first or [0]
        self._strips.clear()
        gutter = getattr(self.document, "gutter", 0)
        self.virtual_size = Size(width if self.wrap else widest + gutter, len(self._rows))

    def on_resize(self, event: events.Resize) -> None:
        if self.wrap:
            top = self.top_line
            self._layout()
            self.scroll_to_line(top, center=False)

    def render_lines(self, crop: Region) -> list[Strip]:
        self._style = self.rich_style  # once per drawing, not once per line (it walks the ancestors)
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.scrollable_content_region.width
        if row >= len(self._rows) or len(self.document) == 0:
            return Strip.blank(width, self._style)
        strip = self._strips.get(row)
        if strip is None:
            strip = self._draw(row)
            self._strips[row] = strip
        return strip.crop_extend(scroll_x, scroll_x + width, self._style)

    def _draw(self, row: int) -> Strip:
        index, start, end = self._rows[row]
        text = self.document.line(index)
        text = text[start:end] if self.wrap and (start, end) != (0, len(text.plain)) else text.copy()
        text.no_wrap = True
        text.end = ""
        if self._pattern is not None:
            for match in self._pattern.finditer(text.plain):
                text.stylize(MATCH_STYLE, match.start(), match.end())
        console = self.app.console
        base = self._style + console.get_style(text.style, default="")  # Text.render leaves out text.style
        segments = Segment.apply_style(text.render(console), base)
        return Strip(list(segments), text.cell_len)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        row = int(self.scroll_y) + offset.y
        if row < len(self._rows):
            self.post_message(self.Clicked(self, self._rows[row][0]))
