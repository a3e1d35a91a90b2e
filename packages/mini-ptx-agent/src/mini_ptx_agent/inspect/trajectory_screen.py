"""The trajectory screen: the turns in a list, and for the selected turn five panes in tabs.

Reply, Kernel (or its diff), Feedback, Evaluation, Analysis (:mod:`.turn_text` makes their documents). Only
the pane on show is filled when the turn changes; the others are filled when their tab opens. The evaluator's
notes of every turn are counted by a background thread after the screen opens (each report is read and
validated once), and the turn list shows them as they come.
"""

from __future__ import annotations

import time
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Footer, Static, TabbedContent, TabPane

from .dialogs import SaveKernelScreen, SearchBar, SearchingScreen
from .keys import bindings
from .readers.trajectory import TrajectoryData, Turn
from .row_list import RowList
from .text_pane import Document, TextPane
from .turn_text import (
    REASONING_LINE,
    analysis_document,
    evaluation_document,
    feedback_document,
    header,
    kernel_document,
    reply_document,
    turn_label,
)

VIEWS = ("reply", "kernel", "feedback", "evaluation", "analysis")
"""The panes, in tab order (keys 1 to 5)."""

SEARCHED = ("reply", "kernel")
"""The panes a search goes through turn by turn."""


class TrajectoryScreen(SearchingScreen):
    """One trajectory (alone or from a run directory)."""

    DEFAULT_CSS = """
    TrajectoryScreen #turns { width: 46; border-right: solid $primary-darken-2; }
    TrajectoryScreen #views { width: 1fr; height: 1fr; }
    TrajectoryScreen TabPane { padding: 0; }
    """
    BINDINGS = bindings("trajectory")

    def __init__(self, data: TrajectoryData):
        super().__init__()
        self.data = data
        self.index = 0
        self.diff = False
        self.reasoning = False
        self.notes: dict[int, int] = {}
        """Turn number -> evaluator notes on its result (filled by a background thread)."""
        self._shown: dict[str, tuple[int, bool, bool]] = {}
        """Pane -> (turn, diff, reasoning) it shows, so a pane is filled again only when that changed."""
        self._match: tuple[int, str, int] | None = None
        """(turn, pane, line) of the last search match: the next search starts after it."""

    def compose(self) -> ComposeResult:
        yield Static(header(self.data), id="header")
        with Horizontal():
            yield RowList(len(self.data.turns), self._label, id="turns")
            with TabbedContent(initial="reply", id="views"):
                for number, view in enumerate(VIEWS, start=1):
                    with TabPane(f"{number} {view.capitalize()}", id=view):
                        yield TextPane(wrap=view != "kernel", id=f"{view}-pane")
        yield SearchBar("search replies and kernels of every turn (any case); Enter: next match, Esc: close")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#turns", RowList).focus()
        if self.data.turns:
            self.show_turn(0)
            self._count_notes()
        else:
            self.pane("reply").show(_message_document("this trajectory has no replies yet"), title="no turns")

    # -- showing a turn ------------------------------------------------------------------------------------------

    @property
    def turn(self) -> Turn:
        return self.data.turns[self.index]

    @property
    def view(self) -> str:
        return self.query_one("#views", TabbedContent).active or "reply"

    def pane(self, view: str) -> TextPane:
        return self.query_one(f"#{view}-pane", TextPane)

    def _label(self, index: int):
        turn = self.data.turns[index]
        return turn_label(self.data, turn, self.notes.get(turn.number))

    def show_turn(self, index: int) -> None:
        """Select turn ``index`` (0-based): the list's cursor and the pane on show."""
        self.index = index
        turns = self.query_one("#turns", RowList)
        if turns.cursor != index:
            turns.cursor = index
        self.fill(self.view)

    def fill(self, view: str) -> None:
        """Fill ``view``'s pane for the current turn, unless it shows that already."""
        if not self.data.turns:
            return
        state = (self.turn.number, self.diff, self.reasoning)
        before = self._shown.get(view)
        if before == state:
            return
        self._shown[view] = state
        keep = before is not None and before[:2] == state[:2]  # the reasoning shown or hidden: stay in place
        title = f"{view} · turn {self.turn.number}"
        document: Document
        if view == "reply":
            document = reply_document(self.data, self.turn, reasoning=self.reasoning)
        elif view == "kernel":
            document, title = kernel_document(self.data, self.turn, diff=self.diff)
        elif view == "feedback":
            document = feedback_document(self.data, self.turn)
        elif view == "evaluation":
            document = evaluation_document(self.data, self.turn)
        else:
            document = analysis_document(self.data, self.turn)
        self.pane(view).show(document, title=title, keep_position=keep)

    def on_row_list_highlighted(self, event: RowList.Highlighted) -> None:
        if event.index != self.index or not self._shown:
            self.show_turn(event.index)

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id:
            self.fill(event.pane.id)

    def on_text_pane_clicked(self, event: TextPane.Clicked) -> None:
        if event.pane.id == "reply-pane":
            text = event.pane.document.plain(event.line)
            if text.startswith((REASONING_LINE, "▾ reasoning", "▴ end of reasoning")):
                self.action_toggle_reasoning()

    @work(
        thread=True, exclusive=True, exit_on_error=False
    )  # the markers are a help: a failure costs only them
    def _count_notes(self) -> None:
        """Read every evaluated turn's report once and count its notes (off the screen's thread; a pause
        after each report leaves the interpreter to the screen, so keys stay quick while it reads)."""
        for turn in self.data.turns:
            time.sleep(0.005)
            count = len(self.data.notes(turn))
            if count:
                self.notes[turn.number] = count
                self.app.call_from_thread(self.query_one("#turns", RowList).refresh_labels)

    # -- actions -------------------------------------------------------------------------------------------------

    def action_view(self, view: str) -> None:
        self.query_one("#views", TabbedContent).active = view
        self.fill(view)

    def action_toggle_diff(self) -> None:
        self.diff = not self.diff
        self.action_view("kernel")

    def action_toggle_reasoning(self) -> None:
        self.reasoning = not self.reasoning
        self.action_view("reply")

    def action_save_kernel(self) -> None:
        if not self.data.turns or self.data.kernel(self.turn) is None:
            self.notify("this turn sent no kernel", severity="warning")
            return
        source = self.data.kernel(self.turn) or ""
        suffix = Path(self.data.task.entry_file).suffix if self.data.task else ".txt"
        name = (self.data.run_dir or self.data.path).name.removesuffix(".json")
        default = Path.cwd() / f"{name}-turn{self.turn.number:03d}{suffix}"

        def written(path: Path | None) -> None:
            if path is not None:
                self.notify(f"wrote the kernel of turn {self.turn.number} to {path}")

        self.app.push_screen(
            SaveKernelScreen(source, default, f"the kernel of turn {self.turn.number}"), written
        )

    def action_back(self) -> None:
        if not self.close_search() and len(self.app.screen_stack) > 2:
            self.app.pop_screen()  # back to the experiment table this trajectory was opened from

    # -- search (the bar and its keys: SearchingScreen) ----------------------------------------------------------

    def highlight(self, query: str) -> None:
        for view in VIEWS:
            self.pane(view).highlight(query)

    def after_search(self) -> None:
        self.pane(self.view).focus()

    def search(self, query: str, *, backwards: bool) -> None:
        """The next match of ``query``: in the pane on show after its current match, else in the next turn's
        reply or kernel (wrapping around), whose pane is then shown at the matching line. A pane other than
        the reply and the kernel is searched on its own first (wrapping around)."""
        view, pane = self.view, self.pane(self.view)
        if self._match is not None and self._match[:2] == (self.turn.number, view):
            start = self._match[2]
        else:
            start = pane.top_line if backwards else pane.top_line - 1
        line = pane.find(query, start, backwards=backwards, wrap_around=view not in SEARCHED)
        if line is None:
            where = (self.turn.number, view if view in SEARCHED else "kernel")
            hit = self.data.search(query, where, backwards=backwards)
            if hit is None:
                self.notify(f"no match for {query!r}", severity="warning")
                return
            turn, view = hit
            self.index = turn.number - 1
            self.action_view(view)
            pane = self.pane(view)
            if view == "reply" and not self.reasoning and pane.find(query, -1) is None:
                self.action_toggle_reasoning()  # the match is in the collapsed reasoning
            self.show_turn(self.index)  # the list's cursor
            line = pane.find(query, len(pane.document) if backwards else -1, backwards=backwards)
            if line is None:
                return
        self._match = (self.turn.number, view, line)
        pane.scroll_to_line(line)
        pane.border_subtitle = f"{query!r} at line {line + 1} · n next, N previous"


def _message_document(text: str) -> Document:
    from .text_pane import Lines

    return Lines.of_text(text, style="yellow")
