"""The small screens and bars the inspector opens over its main screens (help, writing a kernel, search), and
the base of the screens that search."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
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
    SearchBar { dock: bottom; }
    """

    def __init__(self, placeholder: str):
        super().__init__(placeholder=placeholder, id="search")
        self.display = False  # (not a CSS class: a class change restyles the whole screen, 0.1-0.5 s here)

    def open(self) -> None:
        """Show the bar, focused, with its last query selected (typing replaces it)."""
        self.display = True
        self.focus()
        self.select_all()

    def close(self) -> None:
        """Hide the bar (its query is kept for n and N)."""
        self.display = False

    @property
    def is_open(self) -> bool:
        return self.display


class SearchingScreen(Screen[None]):
    """A screen with a :class:`SearchBar`: ``/`` opens it, Enter searches, ``n``/``N`` go on, Esc closes it.

    Subclasses say what a search does (:meth:`search`), what a query lights up (:meth:`highlight`) and where
    the focus goes after it (:meth:`after_search`); their ``action_back`` calls :meth:`close_search` first.
    """

    def search(self, query: str, *, backwards: bool) -> None:
        """Go to the next match of ``query`` (the previous, ``backwards``)."""
        raise NotImplementedError

    def highlight(self, query: str) -> None:
        """Mark ``query`` wherever the screen shows text."""

    def after_search(self) -> None:
        """Focus what the reader looks at after a search."""

    def action_search(self) -> None:
        self.query_one(SearchBar).open()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if not isinstance(event.input, SearchBar):
            return
        event.input.close()
        self.highlight(event.value)
        self.after_search()
        self.search(event.value, backwards=False)

    def action_search_next(self) -> None:
        self._again(backwards=False)

    def action_search_previous(self) -> None:
        self._again(backwards=True)

    def _again(self, *, backwards: bool) -> None:
        query = self.query_one(SearchBar).value
        if query:
            self.search(query, backwards=backwards)
        else:
            self.action_search()

    def close_search(self) -> bool:
        """Close the search bar if it is open (the focus goes where :meth:`after_search` puts it); whether it was."""
        bar = self.query_one(SearchBar)
        if not bar.is_open:
            return False
        bar.close()
        self.after_search()
        return True
