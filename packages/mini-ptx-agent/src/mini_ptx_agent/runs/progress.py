"""Live progress of one run for people: one line per finished turn, and a spinner while the run waits.

Used by `ptxbench run` and `ptxbench quickstart --run`. Each finished turn prints one line::

      turn 2/3: PASSED, 0.986x; PTX: cp.async.bulk.tensor, mbarrier, wgmma; SASS: HGMMA, UTMALDG; 41.2 s

(status, minimum speedup, the instruction families found in the PTX and the SASS, seconds for the model call
plus the evaluation). On a terminal the status is coloured and a transient spinner says whether the run waits
for the model or for FIBServe; piped, the same lines come out plain (rich drops colours and the live display
when its console is not a terminal), so logs and programs can read them.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from rich.console import Console
from rich.text import Text

from ..agent import TurnOutcome

_STYLE = {"PASSED": "green", "NOT_EXECUTED": "yellow", "FORMAT_ERROR": "yellow"}


def turn_line(outcome: TurnOutcome, num_turns: int) -> Text:
    """The progress line of one turn (styled; plain text when printed to a non-terminal)."""
    line = Text(f"  turn {outcome.turn}/{num_turns}: ")
    line.append(outcome.status, style=_STYLE.get(outcome.status, "red"))
    if outcome.min_speedup is not None:
        line.append(
            f", {outcome.min_speedup:.3f}x" + ("" if outcome.executed_on_gpu else " (not a GPU timing)")
        )
    if outcome.status == "FORMAT_ERROR":
        line.append(" (no kernel block in the reply)")
    if outcome.ptx_families:
        line.append(f"; PTX: {', '.join(outcome.ptx_families)}")
    if outcome.sass_families:
        line.append(f"; SASS: {', '.join(outcome.sass_families)}")
    line.append(f"; {outcome.seconds:.1f} s")
    return line


class RunProgress:
    """Use as a context manager around a run; pass :meth:`model` as the run's model and :meth:`on_turn` to
    :class:`~mini_ptx_agent.agent.KernelAgent` (``run_trajectory(on_turn=...)``).

    ``where``: the service, as the spinner names it (``embedded FIBServe``, a URL, lanes).
    """

    def __init__(self, console: Console, num_turns: int, where: str):
        self.console = console
        self.num_turns = num_turns
        self.where = where
        self._live: Any = None
        self._task: Any = None

    def __enter__(self) -> RunProgress:
        if self.console.is_terminal:
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._live = Progress(
                SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                console=self.console, transient=True,
            )  # fmt: skip
            self._live.start()
            self._task = self._live.add_task("starting")
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def show(self, text: str) -> None:
        """Set the spinner's text (nothing when not on a terminal)."""
        if self._live is not None:
            self._live.update(self._task, description=text)

    def on_turn(self, outcome: TurnOutcome) -> None:
        """Print the turn's line."""
        self.console.print(turn_line(outcome, self.num_turns), highlight=False)

    def model(self, model: Any) -> Any:
        """``model`` with every ``query`` shown on the spinner (other attributes forwarded unchanged)."""
        return _ShownModel(model, self)


class _ShownModel:
    def __init__(self, model: Any, progress: RunProgress):
        self._model = model
        self._progress = progress

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def query(self, messages: list[dict], **kwargs: Any) -> dict:
        self._progress.show("waiting for the model")
        reply = self._model.query(messages, **kwargs)
        self._progress.show(f"evaluating on {self._progress.where}")
        return reply
