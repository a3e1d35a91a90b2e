"""A list with a cursor over any number of rows, drawing only the rows on screen (textual's line API).

The rows' labels come from a function of the row index, called when a row is drawn and kept for a while, so
a list of 100,000 SFT rows costs one screenful of labels, not 100,000 widgets (textual's ``OptionList``
measures every option up front). Moving the cursor posts :class:`RowList.Highlighted`; Enter posts
:class:`RowList.Selected`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip


class RowList(ScrollView, can_focus=True):
    """``count`` rows labelled by ``label(index)``; ``cursor`` is the highlighted row."""

    DEFAULT_CSS = """
    RowList { background: $surface; overflow-x: hidden; overflow-y: auto; }
    RowList > .row-list--cursor { background: $accent 40%; }
    RowList:focus > .row-list--cursor { background: $accent; color: $text; text-style: bold; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"row-list--cursor"}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down,j", "move(1)", "next", show=False),
        Binding("up,k", "move(-1)", "previous", show=False),
        Binding("pagedown,space", "page(1)", "page down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("home,g", "jump(0)", "first", show=False),
        Binding("end,G", "jump(-1)", "last", show=False),
        Binding("enter", "select", "open", show=False),
    ]

    cursor: reactive[int] = reactive(0, always_update=True)

    class Highlighted(Message):
        """The cursor moved to ``index``."""

        def __init__(self, row_list: RowList, index: int):
            super().__init__()
            self.row_list = row_list
            self.index = index

    class Selected(Highlighted):
        """Enter (or a double click) on row ``index``."""

    def __init__(self, count: int, label: Callable[[int], Text], *, id: str | None = None):
        super().__init__(id=id)
        self.count = count
        self.label = label
        self._labels: LRUCache[int, Text] = LRUCache(1024)
        self._style = Style()

    def set_rows(self, count: int, label: Callable[[int], Text]) -> None:
        """Replace the rows (the cursor goes to the first)."""
        self.count, self.label = count, label
        self._labels.clear()
        self.virtual_size = Size(self.size.width, count)
        self.cursor = 0

    def refresh_labels(self) -> None:
        """Draw every label again (what they show changed)."""
        self._labels.clear()
        self.refresh()

    def on_mount(self) -> None:
        self.virtual_size = Size(self.size.width, self.count)

    def on_resize(self, event: events.Resize) -> None:
        self.virtual_size = Size(event.size.width, self.count)

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, self.count - 1)) if self.count else 0

    def watch_cursor(self, old: int, new: int) -> None:
        height = max(self.scrollable_content_region.height, 1)
        if new < self.scroll_y:
            self.scroll_to(y=new, animate=False, immediate=True)
            self.refresh()
        elif new >= self.scroll_y + height:
            self.scroll_to(y=new - height + 1, animate=False, immediate=True)
            self.refresh()
        else:  # only the two rows whose highlight changed
            self.refresh_line(old)
            self.refresh_line(new)
        if self.count:
            self.post_message(self.Highlighted(self, new))

    def action_move(self, step: int) -> None:
        self.cursor += step

    def action_page(self, direction: int) -> None:
        self.cursor += direction * max(self.scrollable_content_region.height - 1, 1)

    def action_jump(self, index: int) -> None:
        self.cursor = index if index >= 0 else self.count - 1

    def action_select(self) -> None:
        if self.count:
            self.post_message(self.Selected(self, self.cursor))

    def render_lines(self, crop: Region) -> list[Strip]:
        self._style = self.rich_style  # once per drawing, not once per line (it walks the ancestors)
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        index = int(self.scroll_y) + y
        width = self.scrollable_content_region.width
        if index >= self.count:
            return Strip.blank(width, self._style)
        text = self._labels.get(index)
        if text is None:
            text = self.label(index)
            self._labels[index] = text
        line = text.copy()
        line.no_wrap, line.end = True, ""
        line.truncate(width, overflow="ellipsis", pad=True)
        if index == self.cursor:
            line.stylize(self.get_component_rich_style("row-list--cursor"))
        console = self.app.console
        base = self._style + console.get_style(line.style, default="")  # Text.render leaves out line.style
        segments = Segment.apply_style(line.render(console), base)
        return Strip(list(segments), width)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        index = int(self.scroll_y) + offset.y
        if index < self.count:
            self.cursor = index
            if event.chain == 2:
                self.action_select()
