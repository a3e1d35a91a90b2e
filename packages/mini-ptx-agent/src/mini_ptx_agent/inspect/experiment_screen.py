"""The experiment screen: one row per planned trajectory, filtered as you type, sorted by any column; Enter
opens the row's trajectory (its run directory under ``runs/``)."""

from __future__ import annotations

from collections import Counter

from rich.text import Text
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from ..runs.directory import RunLayout
from .keys import bindings
from .readers import InspectError
from .readers.experiment import COLUMNS, ExperimentData, TrajectoryEntry
from .readers.trajectory import TrajectoryData
from .trajectory_screen import TrajectoryScreen
from .turn_text import STATUS_STYLES

CELL_STYLES = {
    "correct": {"yes": "green", "no": "red", "unknown": "yellow"},
    "demo": {"DEMO": "bold magenta"},
}
"""Colours of some columns' cells."""


class ExperimentScreen(Screen[None]):
    """An experiment's trajectories as a table."""

    DEFAULT_CSS = """
    ExperimentScreen #filter { margin: 0 0; }
    """
    BINDINGS = bindings("experiment")

    def __init__(self, data: ExperimentData):
        super().__init__()
        self.data = data
        self.sort_column = "trajectory"
        self.reverse = False

    def compose(self) -> ComposeResult:
        yield Static(self._header(), id="header")
        yield Input(
            placeholder="filter: words in any column, or column:text (model:gpt status:finished best:x)",
            id="filter",
        )
        yield DataTable(cursor_type="row", zebra_stripes=True, id="table")
        yield Footer()

    def _header(self) -> Text:
        plan = self.data.plan
        states = Counter(entry.status for entry in self.data.entries)
        counts = ", ".join(f"{n} {status}" for status, n in sorted(states.items()))
        text = Text(
            f"{plan.name}  ·  {len(plan.trajectories)} trajectories  ·  {plan.num_turns} turns each  ·  "
        )
        text.append(f"{counts}  ·  turns from {self.data.source}")
        if any(entry.demo for entry in self.data.entries):
            text.append("   DEMO rows are replays, not a model's results", style="bold magenta")
        return text

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for field, title in COLUMNS.items():
            table.add_column(title, key=field)
        self.populate()
        table.focus()

    @property
    def shown(self) -> list[TrajectoryEntry]:
        """The entries that pass the filter, in the sort order."""
        query = self.query_one("#filter", Input).value
        entries = [e for e in self.data.entries if e.matches(query)]
        return sorted(entries, key=lambda e: e.sort_key(self.sort_column), reverse=self.reverse)

    def populate(self) -> None:
        """Fill the table again (filter or sort changed), keeping the cursor on the same trajectory."""
        table = self.query_one(DataTable)
        current = self.current
        table.clear()
        for entry in self.shown:
            cells = []
            for field in COLUMNS:
                value = entry.cell(field)
                style = (
                    STATUS_STYLES.get(value, "")
                    if field == "status"
                    else CELL_STYLES.get(field, {}).get(value, "")
                )
                cells.append(Text(value, style=style))
            table.add_row(*cells, key=entry.trajectory)
        arrow = "▼" if self.reverse else "▲"
        for column in table.columns.values():
            name = COLUMNS[str(column.key.value)]
            column.label = Text(f"{name} {arrow}" if column.key.value == self.sort_column else name)
        if current is not None and current.trajectory in table.rows:
            table.move_cursor(row=table.get_row_index(current.trajectory))

    @property
    def current(self) -> TrajectoryEntry | None:
        """The entry under the cursor."""
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return next((e for e in self.data.entries if e.trajectory == key), None)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.populate()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(DataTable).focus()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        self.sort_by(str(event.column_key.value))

    def sort_by(self, column: str) -> None:
        """Sort by ``column``; again by the same column: the other way."""
        self.reverse = (
            not self.reverse if column == self.sort_column else column in ("best_speedup", "correct")
        )
        self.sort_column = column
        self.populate()

    def action_sort(self) -> None:
        columns = list(COLUMNS)
        self.sort_by(columns[(columns.index(self.sort_column) + 1) % len(columns)])
        self.notify(
            f"sorted by {COLUMNS[self.sort_column]} ({'descending' if self.reverse else 'ascending'})",
            timeout=2,
        )

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_open(self) -> None:
        entry = self.current
        if entry is None:
            return
        path = RunLayout(entry.run_dir).trajectory_path
        if not path.is_file():
            self.notify(f"{entry.trajectory} has no trajectory yet ({entry.status})", severity="warning")
            return
        try:
            data = TrajectoryData.load(path, run_dir=entry.run_dir)
        except InspectError as exc:
            self.notify(str(exc), title="cannot open this trajectory", severity="error", timeout=10)
            return
        self.app.push_screen(TrajectoryScreen(data))

    def action_search(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_back(self) -> None:
        filter_ = self.query_one("#filter", Input)
        if filter_.has_focus and filter_.value:
            filter_.value = ""
        self.query_one(DataTable).focus()

    def action_search_next(self) -> None:
        self.query_one(DataTable).action_cursor_down()

    def action_search_previous(self) -> None:
        self.query_one(DataTable).action_cursor_up()
