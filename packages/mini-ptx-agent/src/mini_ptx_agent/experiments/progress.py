"""Live progress of an experiment for people: trajectories done, correct so far, best speedup, failures by
class, ETA.

On a terminal, a rich bar over the turns still to run (its ETA from the turns' pace) and one status line::

    ━━━━━━━━━━━━╸━━━━━━━━━  23/48 turns  0:01:10 left
    trajectories 7/16 done, 4 correct; best 1.031x (GPU); failures: format 3, incorrect 6, infrastructure 1

Piped, one plain line per finished trajectory instead, so logs and programs can follow it.
"""

from __future__ import annotations

import threading
from collections import Counter
from types import TracebackType
from typing import Any

from rich.console import Console

from ..agent import TurnOutcome
from ..runs.summary import RunSummary
from ..runs.turns import failure_class
from .plan import PlannedTrajectory


def outcome_class(outcome: TurnOutcome) -> str:
    """The failure class of a finished turn (``format`` for a reply without a kernel)."""
    if outcome.status == "FORMAT_ERROR":
        return "format"
    try:
        return failure_class(outcome.status)
    except ValueError:
        return "runtime"


class ExperimentProgress:
    """Counts turns and trajectories from the runner's callbacks (any thread) and shows them.

    ``trajectories``: in the plan; ``done_before``: finished before this invocation; ``turns_to_run``: an upper
    bound on the turns left (the ETA's total).
    """

    def __init__(self, console: Console, *, trajectories: int, done_before: int, turns_to_run: int):
        self.console = console
        self.trajectories = trajectories
        self.done = done_before
        self.correct = 0
        self.turns = 0
        self.best: tuple[float, bool] | None = None
        self.failures: Counter[str] = Counter()
        self.unfinished = 0
        self.turns_to_run = max(1, turns_to_run)
        self._lock = threading.Lock()
        self._live: Any = None
        self._task: Any = None

    def __enter__(self) -> ExperimentProgress:
        if self.console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._live = Progress(
                BarColumn(), MofNCompleteColumn(), TextColumn("turns"), TimeRemainingColumn(),
                TextColumn("\n{task.description}"), console=self.console,
            )  # fmt: skip
            self._live.start()
            self._task = self._live.add_task(self.status_line(), total=self.turns_to_run)
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def status_line(self) -> str:
        """``trajectories 7/16 done, 4 correct; best 1.031x (GPU); failures: format 3, incorrect 6``."""
        text = f"trajectories {self.done}/{self.trajectories} done, {self.correct} correct"
        if self.best is not None:
            text += f"; best {self.best[0]:.3f}x ({'GPU' if self.best[1] else 'not a GPU timing'})"
        if self.failures:
            text += "; failures: " + ", ".join(f"{k} {v}" for k, v in sorted(self.failures.items()))
        if self.unfinished:
            text += f"; {self.unfinished} to resume"
        return text

    def on_turn(self, trajectory: PlannedTrajectory, outcome: TurnOutcome) -> None:
        """Count one finished turn."""
        with self._lock:
            self.turns += 1
            kind = outcome_class(outcome)
            if kind != "PASSED":
                self.failures[kind] += 1
            if outcome.min_speedup is not None:
                candidate = (outcome.min_speedup, outcome.executed_on_gpu)
                if self.best is None or (candidate[1], candidate[0]) > (self.best[1], self.best[0]):
                    self.best = candidate
            self._refresh(advance=1)

    def on_done(self, trajectory: PlannedTrajectory, summary: RunSummary | None) -> None:
        """Count one trajectory whose run ended (``summary`` None: it crashed)."""
        from .directory import COMPLETED_BY_RULE

        with self._lock:
            finished = summary is not None and summary.exit_status in COMPLETED_BY_RULE
            if finished:
                self.done += 1
                self.correct += bool(summary.kernel_correct)
            else:
                self.unfinished += 1
                if summary is not None and summary.exit_status == "InfrastructureError":
                    self.failures["infrastructure"] += 1
            self._refresh(advance=0)
            if self._live is None:
                status = summary.exit_status if summary else "crashed"
                best = (summary.best or {}).get("min_speedup") if summary else None
                line = f"[{self.done}/{self.trajectories}] {trajectory.id}: {status}"
                line += f", {summary.turns} turns" if summary else ""
                if finished:
                    verdict = {True: "yes", False: "no", None: "unknown"}[summary.kernel_correct]
                    line += f", kernel correct: {verdict}"
                line += f", best {best:.3f}x" if best is not None else ""
                self.console.print(line, highlight=False, markup=False)

    def _refresh(self, advance: int) -> None:
        if self._live is not None:
            self._live.update(self._task, advance=advance, description=self.status_line())
