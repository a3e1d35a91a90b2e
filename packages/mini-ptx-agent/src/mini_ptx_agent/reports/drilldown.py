"""The page's per-trajectory drill-down: each turn's status, speedup, kernel and the feedback the model read.

The numbers come from the report's rows (:class:`~mini_ptx_agent.runs.turns.TurnRow`); the kernel and the
feedback from the trajectory file of the run directory the rows came from (a ``turns.csv`` without its run
directories has numbers only). Turns are numbered as :func:`~mini_ptx_agent.runs.turns.turn_rows` numbers them:
the N-th reply of the trajectory is turn N. Long kernels and feedback keep their head and tail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path

from ..extraction import extract_kernel
from ..feedback import trim
from ..runs.directory import RunLayout
from ..runs.turns import TurnRow
from ..trajectory import TrajectoryError, load_trajectory
from .metrics import Trajectory

MAX_KERNEL_CHARS = 20_000
"""Longest kernel shown per turn (characters; head and tail kept)."""
MAX_FEEDBACK_CHARS = 6_000
"""Longest feedback shown per turn (characters; head and tail kept)."""


@dataclass(frozen=True)
class TurnDetail:
    """One turn as the drill-down shows it."""

    turn: int
    status: str
    """The evaluator's status, ``FORMAT_ERROR`` for a reply without a kernel."""
    speedup: str
    """Minimum speedup over the workloads (``1.234x``) of a turn that passed and was timed on a GPU, else ``-``."""
    kernel: str | None
    """The kernel the reply held (None: no kernel block, or the trajectory file is not at hand)."""
    feedback: str
    """What the model read after the turn (empty when the trajectory file is not at hand)."""


@dataclass(frozen=True)
class TrajectoryDetail:
    """One trajectory of the report and its turns."""

    experiment: str
    trajectory: str
    about: str
    """Model, definition, language and prompt tag, for people."""
    turns: list[TurnDetail]


def _messages(run_dir: Path | None) -> list[dict]:
    if run_dir is None:
        return []
    try:
        return list(load_trajectory(RunLayout(run_dir).trajectory_path).get("messages", []))
    except (TrajectoryError, OSError):
        return []


def _replies(messages: list[dict]) -> dict[int, tuple[str, str]]:
    """Turn -> (reply, the message after it), numbering replies in order from 1."""
    found: dict[int, tuple[str, str]] = {}
    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            after = messages[index + 1] if index + 1 < len(messages) else {}
            found[len(found) + 1] = (str(message.get("content") or ""), str(after.get("content") or ""))
    return found


def _speedup(row: TurnRow) -> str:
    return f"{row.min_speedup:.3f}x" if row.min_speedup is not None and row.executed_on_gpu else "-"


def trajectory_details(
    trajs: Sequence[Trajectory], run_dirs: Mapping[tuple[str, str], Path]
) -> list[TrajectoryDetail]:
    """The drill-down of ``trajs``; ``run_dirs``: (experiment, trajectory) -> its run directory, where known."""
    details = []
    for traj in trajs:
        first = traj.first
        replies = _replies(_messages(run_dirs.get((traj.experiment, traj.trajectory))))
        turns = []
        for row in traj.turns:
            reply, after = replies.get(row.turn, ("", ""))
            kernel = extract_kernel(reply, first.language).source if reply else None
            turns.append(
                TurnDetail(
                    turn=row.turn, status=row.status, speedup=_speedup(row),
                    kernel=trim(kernel, MAX_KERNEL_CHARS) if kernel else None,
                    feedback=trim(after, MAX_FEEDBACK_CHARS),
                )
            )  # fmt: skip
        about = f"{traj.label('model')}, {first.definition}, {first.language}, {first.prompt_tag}"
        details.append(TrajectoryDetail(traj.experiment, traj.trajectory, about, turns))
    return details


def _turn_html(turn: TurnDetail) -> str:
    kernel = (
        f"<details><summary>kernel ({turn.kernel.count(chr(10)) + 1} lines)</summary><pre>{escape(turn.kernel)}</pre>"
        "</details>"
        if turn.kernel
        else "no kernel"
    )
    feedback = (
        f"<details><summary>feedback</summary><pre>{escape(turn.feedback)}</pre></details>"
        if turn.feedback
        else "-"
    )
    return (
        f'<tr><td class="num">{turn.turn}</td><td>{escape(turn.status)}</td><td class="num">{escape(turn.speedup)}'
        f"</td><td>{kernel}</td><td>{feedback}</td></tr>"
    )


def details_html(details: Sequence[TrajectoryDetail]) -> str:
    """The drill-down section: one collapsed block per trajectory, a table of its turns inside."""
    blocks = []
    for d in details:
        statuses = ", ".join(t.status for t in d.turns)
        rows = "".join(_turn_html(t) for t in d.turns)
        blocks.append(
            f'<details class="trajectory"><summary><code>{escape(d.experiment)} / {escape(d.trajectory)}</code>: '
            f"{escape(d.about)}; {len(d.turns)} turns ({escape(statuses)})</summary>"
            "<table><thead><tr><th>turn</th><th>status</th><th>speedup</th><th>kernel</th><th>feedback</th></tr>"
            f"</thead><tbody>{rows}</tbody></table></details>"
        )
    return (
        '<h2>Trajectories</h2><div id="trajectories"><p>Each trajectory the numbers count: open one for its turns '
        "(status, minimum speedup over the workloads when timed on a GPU), the kernel each reply held and the "
        f"feedback the model read.</p>{''.join(blocks)}</div>"
    )
