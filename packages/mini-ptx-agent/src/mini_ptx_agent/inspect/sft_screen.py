"""The SFT screen: the rows of a ``ptxbench.sft/1`` file in a list, and the selected row with its tokens, flags,
fix and provenance above its messages, the trained (loss-masked) message marked."""

from __future__ import annotations

from typing import Any

from rich.style import Style
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Footer, Static

from ..data.rows import SFTRow
from .dialogs import SearchBar, SearchingScreen
from .keys import bindings
from .readers import InspectError
from .readers.sft import SftFile
from .row_list import RowList
from .text_pane import Lines, TextPane

TRAINED = Style(bgcolor="#17361f")
"""The background of trained text (the part the loss is computed on)."""
MARK = "▌ "
"""The gutter of a trained line; an untrained line has two spaces there."""
SECTIONS = {"messages", "loss_mask", "tokens", "provenance", "fix", "flags"}
"""The row's fields shown in sections of their own; every other field is a line of the row's head."""


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = text.replace("\n", "⏎")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def row_label(rows: SftFile, index: int) -> Text:
    """A row of the list: number, recipe, tokens, definition and the turn's class, ``⚑n`` for n flags."""
    label = Text(f"{index + 1:>7} ")
    try:
        row = rows.row(index)
    except InspectError:
        return label.append("not a ptxbench.sft/1 row", style="red")
    origin = row.provenance
    label.append(f"{row.recipe:<9} ").append(f"{row.tokens.total:>7,} tok ", style="green")
    label.append(f"{origin.definition} · {origin.failure_class}", style="dim")
    return label.append(f" ⚑{len(row.flags)}", style="bold red") if row.flags else label


def _fields(values: dict[str, Any]) -> list[str | Text]:
    """One indented ``name: value`` line per item."""
    return [
        Text(f"  {name}: ", style="cyan").append(_short(value, 400), style="")
        for name, value in values.items()
    ]


def row_document(index: int, row: SFTRow) -> Lines:
    """A row: its id and scalar fields, tokens, flags, the fix (Fixit), the provenance, the loss mask, then
    each message, the trained one highlighted."""
    lines: list[str | Text] = [Text(f"row {index + 1}", style="bold")]
    lines += _fields(row.model_dump(mode="json", exclude=SECTIONS))
    tokens = row.tokens
    lines.append(
        Text("  tokens: ", style="cyan").append(
            f"prompt {tokens.prompt:,} · completion {tokens.completion:,} · total {tokens.total:,} "
            f"({tokens.tokenizer})"
        )
    )
    if row.flags:
        lines.append(
            Text(
                f"flags: {len(row.flags)} (kept by --include-flagged: the evaluator doubted this kernel)",
                style="bold red",
            )
        )
        lines += [
            Text(f"  ⚑ {f.kind} · {f.workload or 'every workload'} · {f.detail}", style="red")
            for f in row.flags
        ]
    else:
        lines.append(Text("flags: none", style="bold"))
    if row.fix is not None:
        lines += [Text("fix:", style="bold"), *_fields(row.fix.model_dump(mode="json"))]
    lines += [Text("provenance:", style="bold"), *_fields(row.provenance.model_dump(mode="json"))]
    trained = [n for n, bit in enumerate(row.loss_mask, start=1) if bit]
    lines.append(
        Text(
            f"loss_mask: {row.loss_mask} · trained: message {', '.join(map(str, trained)) or 'none'}",
            style="bold green",
        )
    )
    for number, (message, bit) in enumerate(zip(row.messages, row.loss_mask, strict=True), start=1):
        mark = "TRAINED (loss)" if bit else "not trained"
        lines += [
            "",
            Text(
                f"── {number} · {message.role} · {mark} · {len(message.content):,} characters ──",
                style="bold",
            ),
        ]
        for line in message.content.splitlines() or [""]:
            lines.append(Text(MARK + line, style=TRAINED) if bit else Text("  " + line, style="dim"))
    return Lines(lines)


class SftScreen(SearchingScreen):
    """The rows of one SFT file (JSONL or parquet)."""

    DEFAULT_CSS = """
    SftScreen #rows { width: 64; border-right: solid $primary-darken-2; }
    """
    BINDINGS = bindings("sft")

    def __init__(self, rows: SftFile):
        super().__init__()
        self.rows = rows
        self.index = 0

    def compose(self) -> ComposeResult:
        kind = "parquet" if self.rows.path.suffix == ".parquet" else "JSONL"
        yield Static(f"{self.rows.path.name}  ·  {kind}  ·  {self.rows.count:,} rows", id="header")
        with Horizontal():
            yield RowList(self.rows.count, lambda i: row_label(self.rows, i), id="rows")
            yield TextPane(wrap=True, id="messages")
        yield SearchBar("search the rows' messages (any case); Enter: next row that holds it, Esc: close")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#rows", RowList).focus()
        self.show_row(0)

    def show_row(self, index: int) -> None:
        """Show row ``index`` (0-based) and put the list's cursor on it."""
        self.index = index
        rows = self.query_one("#rows", RowList)
        if rows.cursor != index:
            rows.cursor = index
        pane = self.query_one("#messages", TextPane)
        try:
            row = self.rows.row(index)
        except InspectError as exc:
            pane.show(Lines([Text(str(exc), style="red")]), title=f"row {index + 1}")
            return
        pane.show(row_document(index, row), title=f"row {index + 1} of {self.rows.count:,}")

    def on_row_list_highlighted(self, event: RowList.Highlighted) -> None:
        if event.index != self.index:
            self.show_row(event.index)

    def highlight(self, query: str) -> None:
        self.query_one("#messages", TextPane).highlight(query)

    def after_search(self) -> None:
        self.query_one("#rows", RowList).focus()

    def search(self, query: str, *, backwards: bool) -> None:
        """Go to the next row (previous, ``backwards``) holding ``query``, at its first matching line. The
        rows are searched in a thread (a scan of a large file takes seconds); the screen stays live."""
        self.query_one(
            "#messages", TextPane
        ).border_subtitle = f"searching {self.rows.count:,} rows for {query!r} …"
        self._find(query, self.index, backwards)

    @work(thread=True, exclusive=True)
    def _find(self, query: str, start: int, backwards: bool) -> None:
        try:
            found = self.rows.find(query, start, backwards=backwards)
        except (OSError, ValueError) as exc:  # the file changed or broke under the inspector
            self.app.call_from_thread(self.notify, f"the search stopped: {exc}", severity="error")
            return
        self.app.call_from_thread(self._found, query, found)

    def _found(self, query: str, found: int | None) -> None:
        pane = self.query_one("#messages", TextPane)
        if found is None:
            pane.border_subtitle = ""
            self.notify(f"no row holds {query!r}", severity="warning")
            return
        self.show_row(found)
        line = pane.find(query, -1)
        if line is not None:
            pane.scroll_to_line(line)
        pane.border_subtitle = f"{query!r} in row {found + 1} · n next, N previous"

    def action_back(self) -> None:
        self.close_search()
