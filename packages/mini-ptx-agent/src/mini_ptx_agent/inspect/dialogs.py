"""The small screens and bars the inspector opens over its main screens: help, writing a kernel, search."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from .keys import help_rows


class HelpScreen(ModalScreen[None]):
    """Every key, by where it works (from :mod:`.keys`). Escape, q or ? closes it."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: 90; height: auto; max-height: 90%; border: thick $accent; background: $panel; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, pad_edge=False, expand=True)
        table.add_column(style="bold", no_wrap=True)
        table.add_column(style="cyan", no_wrap=True)
        table.add_column()
        section = ""
        for title, keys, description in help_rows():
            table.add_row(title if title != section else "", keys, description)
            section = title
        with Vertical():
            yield Static(
                "ptxbench-inspect: keys (the mouse works too: click rows, tabs, headers; wheel scrolls)"
            )
            yield Static(table, id="keys")


class SaveKernelScreen(ModalScreen[Path | None]):
    """Asks where to write a kernel (a file that does not exist yet) and writes it; dismisses with the path
    written, or None when cancelled."""

    DEFAULT_CSS = """
    SaveKernelScreen { align: center middle; }
    SaveKernelScreen > Vertical { width: 80; height: auto; border: thick $accent; background: $panel; padding: 0 1; }
    SaveKernelScreen #problem { color: $error; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, source: str, default: Path, what: str):
        super().__init__()
        self.source = source
        self.default = default
        self.what = what

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Write {self.what} to (Enter writes, Esc cancels):")
            yield Input(str(self.default), id="path")
            yield Label("", id="problem")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        path = Path(event.value).expanduser()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("x", encoding="utf-8") as handle:  # never overwrite: a kept kernel may be there
                handle.write(self.source)
        except FileExistsError:
            self.query_one("#problem", Label).update(f"{path} exists: choose another name")
            return
        except OSError as exc:
            self.query_one("#problem", Label).update(f"cannot write {path}: {exc.strerror or exc}")
            return
        self.dismiss(path)

    def action_cancel(self) -> None:
        self.dismiss(None)


class SearchBar(Input):
    """The search line at the bottom of a screen: hidden until opened with ``/``; Enter searches, Esc closes."""

    DEFAULT_CSS = """
    SearchBar { dock: bottom; display: none; }
    SearchBar.open { display: block; }
    """

    def __init__(self, placeholder: str):
        super().__init__(placeholder=placeholder, id="search")

    def open(self) -> None:
        """Show the bar, focused, with its last query selected (typing replaces it)."""
        self.add_class("open")
        self.focus()
        self.select_all()

    def close(self) -> None:
        """Hide the bar (its query is kept for n and N)."""
        self.remove_class("open")

    @property
    def is_open(self) -> bool:
        return self.has_class("open")
