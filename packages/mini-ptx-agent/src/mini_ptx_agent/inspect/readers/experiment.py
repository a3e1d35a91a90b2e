"""An experiment directory as a table: one entry per planned trajectory, with its outcome so far.

The entries follow the experiment's ``plan.json`` (:class:`~mini_ptx_agent.experiments.plan.ExperimentPlan`), so
a trajectory not started yet is listed too (``pending``). Each one's turns come from the per-turn table
``turns.csv`` (:class:`~mini_ptx_agent.runs.turns.TurnRow`) when the experiment wrote one, else from its run
directory; where it stands from :func:`~mini_ptx_agent.experiments.directory.trajectory_state` and its
``summary.json``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...experiments.directory import ExperimentLayout, TrajectoryState, trajectory_state
from ...experiments.plan import PLAN_SCHEMA, ExperimentPlan, PlannedTrajectory
from ...experiments.table import experiment_rows
from ...reports.inputs import ReportError, read_turns_csv
from ...runs.summary import read_summary
from ...runs.turns import TurnRow
from . import InspectError

COLUMNS: dict[str, str] = {
    "trajectory": "trajectory",
    "model": "model",
    "definition": "definition",
    "language": "lang",
    "prompt_tag": "prompt tag",
    "replica": "rep",
    "turns": "turns",
    "best_speedup": "best",
    "correct": "correct",
    "status": "status",
    "demo": "demo",
}
"""The table's columns: entry field -> header. A filter term ``field:text`` names one of these fields."""


@dataclass(frozen=True)
class TrajectoryEntry:
    """One planned trajectory of an experiment and what its turns came to."""

    trajectory: str
    """The stable id (``plan.json``), also its run directory's name under ``runs/``."""
    model: str
    definition: str
    language: str
    prompt_tag: str
    replica: int
    state: TrajectoryState
    exit_status: str | None
    """From ``summary.json``; None while running, pending, or killed."""
    turns: int
    """Turns with a row (answered model calls)."""
    best_speedup: float | None
    """The highest minimum speedup (x) over its correct turns; None when none was timed."""
    correct: bool | None
    """A turn passed every workload: True; None when none did but one was built and not executed; else False."""
    best_on_gpu: bool
    """``best_speedup`` was timed on a GPU (a CPU number is no speedup)."""
    demo: bool
    run_dir: Path

    @property
    def status(self) -> str:
        """The exit status when the run ended, else where the trajectory stands (pending, unfinished)."""
        return self.exit_status or self.state

    def cell(self, column: str) -> str:
        """The text shown (and filtered on) in ``column``."""
        if column == "best_speedup":
            if self.best_speedup is None:
                return "passed, untimed" if self.correct else "-"
            return f"{self.best_speedup:.3f}x" + ("" if self.best_on_gpu else " (cpu)")
        if column == "correct":
            return {True: "yes", False: "no", None: "unknown"}[self.correct]
        if column == "demo":
            return "DEMO" if self.demo else ""
        return str(getattr(self, column))

    def sort_key(self, column: str) -> Any:
        """What ``column`` sorts by (numbers as numbers, a missing speedup below every speedup)."""
        if column == "best_speedup":
            return (self.best_speedup is not None, self.best_speedup or 0.0)
        if column == "correct":
            return {True: 2, None: 1, False: 0}[self.correct]
        if column in ("replica", "turns"):
            return getattr(self, column)
        return self.cell(column).lower()

    def matches(self, query: str) -> bool:
        """Whether every term of ``query`` is in the entry (any case): ``text`` in any column, ``field:text``
        in that column (``model:gpt status:finished``)."""
        for term in query.lower().split():
            field, _, text = term.partition(":")
            if text and field in COLUMNS:
                if text not in self.cell(field).lower():
                    return False
            elif not any(term in self.cell(c).lower() for c in COLUMNS):
                return False
        return True


class ExperimentData:
    """An experiment directory read once: its plan and one :class:`TrajectoryEntry` per planned trajectory."""

    def __init__(self, root: Path, plan: ExperimentPlan, entries: list[TrajectoryEntry], source: str):
        self.root = root
        self.plan = plan
        self.entries = entries
        self.source = source
        """Where the turns came from: ``turns.csv`` or ``run directories``."""

    @classmethod
    def load(cls, root: Path) -> ExperimentData:
        """Read ``root``'s plan.json, turns.csv (else the run directories) and each run's summary.json.

        Raises:
            InspectError: no or unreadable plan.json, another format version, a turns table or run file that
                does not validate.
        """
        layout = ExperimentLayout(root)
        try:
            data = json.loads(layout.plan_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InspectError(f"{layout.plan_path} cannot be read as JSON: {exc}") from None
        if data.get("schema_version") != PLAN_SCHEMA:
            raise InspectError(
                f"{layout.plan_path} has format version {data.get('schema_version')!r}; this inspector reads "
                f"experiment plans {PLAN_SCHEMA!r}"
            )
        try:
            plan = ExperimentPlan.model_validate(data)
        except ValueError as exc:
            raise InspectError(f"{layout.plan_path} is not a valid experiment plan: {exc}") from None
        try:
            if layout.turns_csv.is_file():
                rows, source = read_turns_csv(layout.turns_csv), "turns.csv"
            else:
                rows, source = experiment_rows(plan, root), "run directories"
        except (ReportError, OSError, ValueError) as exc:
            raise InspectError(f"the turns of {root} cannot be read: {exc}") from None
        by_trajectory: dict[str, list[TurnRow]] = {}
        for row in rows:
            by_trajectory.setdefault(row.trajectory, []).append(row)
        entries = [
            _entry(t, layout.run_dir(t.id), plan.num_turns, by_trajectory.get(t.id, []))
            for t in plan.trajectories
        ]
        return cls(Path(root), plan, entries, source)

    def describe(self) -> dict[str, Any]:
        """What ``ptxbench-inspect --json`` prints for an experiment."""
        return {
            "kind": "experiment",
            "path": str(self.root),
            "name": self.plan.name,
            "num_turns": self.plan.num_turns,
            "turns_from": self.source,
            "trajectories": [
                {k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(entry).items()}
                | {"status": entry.status}
                for entry in self.entries
            ],
        }


def _entry(planned: PlannedTrajectory, run_dir: Path, num_turns: int, rows: list[TurnRow]) -> TrajectoryEntry:
    passed = [r for r in rows if r.failure_class == "PASSED"]
    timed = [r for r in passed if r.min_speedup is not None]
    best = max(timed, key=lambda r: (r.executed_on_gpu, r.min_speedup or 0.0)) if timed else None
    state = trajectory_state(run_dir, num_turns)
    evaluated = [r for r in rows if r.failure_class not in ("format", "infrastructure")]
    if passed:
        correct: bool | None = True
    elif any(r.failure_class == "not_executed" for r in rows) or (not evaluated and state != "finished"):
        correct = None  # built but never run, or nothing evaluated yet: unknown, as summary.json says
    else:
        correct = False
    summary = read_summary(run_dir)
    return TrajectoryEntry(
        trajectory=planned.id, model=planned.model, definition=planned.definition, language=planned.language,
        prompt_tag=planned.prompt_tag, replica=planned.replica, state=state,
        exit_status=summary.exit_status if summary else None, turns=len(rows),
        best_speedup=best.min_speedup if best else None, correct=correct,
        best_on_gpu=bool(best and best.executed_on_gpu),
        demo=any(r.demo for r in rows) or bool(summary and summary.demo), run_dir=run_dir,
    )  # fmt: skip
