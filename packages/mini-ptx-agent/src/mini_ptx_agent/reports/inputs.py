"""What a report reads: the per-turn rows of run directories, and the files that say what ran them.

A report's input is a directory of one of two kinds:

- a **trajectory run directory** (``ptxbench run``, ``ptxbench quickstart --run``, or one trajectory of an
  experiment): it has a run ``plan.json`` (``ptxbench.run/1``); its rows come from
  :func:`mini_ptx_agent.runs.turns.turn_rows`;
- an **experiment directory**: its ``turns.csv`` when present, else the rows of every trajectory run
  directory below it. Its ``manifest.json``, when present, is read for provenance.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..experiments.directory import ExperimentLayout, load_experiment
from ..experiments.plan import ExperimentPlan
from ..runs.directory import PLAN_FILE, is_run_dir, load_plan
from ..runs.turns import TurnRow, turn_rows

_JSON_FIELDS = ("speedups", "ptx_families", "sass_families", "executed_families")
"""TurnRow fields a CSV cell holds as JSON (a mapping or a list)."""


class ReportError(Exception):
    """An input a report cannot use; the message says which and what to do."""


@dataclass
class Source:
    """One directory given to ``ptxbench report`` and what was read from it."""

    path: Path
    kind: str
    """``run`` (one trajectory) or ``experiment``."""
    rows: list[TurnRow] = field(default_factory=list)
    run_dirs: list[Path] = field(default_factory=list)
    """Trajectory run directories found (read for hardware and baselines)."""
    pending: int = 0
    """Trajectory run directories without a finished turn (not started, or stopped before its first reply)."""
    manifest: dict[str, Any] = field(default_factory=dict)
    trajectory_dirs: dict[tuple[str, str], Path] = field(default_factory=dict)
    """(experiment, trajectory) of the rows -> the run directory holding that trajectory (its kernels and
    feedback, for the page's drill-down)."""


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_turns_csv(path: Path) -> list[TurnRow]:
    """The TurnRows of a ``turns.csv`` (one header row of TurnRow field names; mappings and lists as JSON).

    An empty cell is a missing value (the field's default).

    Raises:
        ReportError: a row does not validate as a TurnRow (the message names the line).
    """
    rows = []
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            for line, record in enumerate(csv.DictReader(handle), start=2):
                try:
                    values = {
                        k: json.loads(v) if k in _JSON_FIELDS else v for k, v in record.items() if k and v
                    }
                    rows.append(TurnRow.model_validate(values))
                except (ValueError, ValidationError) as exc:
                    raise ReportError(f"{path}, line {line}: not a ptxbench.turns/1 row: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"cannot read {path}: {exc}") from None
    return rows


def _trajectory_id(run_dir: Path, planned: dict[str, int]) -> str:
    """The trajectory id of a run directory: its name under an experiment's plan, else its plan's ``run_id``
    (else, when the plan does not read, its name)."""
    if run_dir.name in planned:
        return run_dir.name
    try:
        return load_plan(run_dir).run_id
    except (OSError, ValueError):
        return run_dir.name


def _run_rows(run_dir: Path, experiment: str, planned: dict[str, int] | None = None) -> list[TurnRow]:
    """The rows of one trajectory; under an experiment's plan the trajectory is its directory's name (its id)."""
    planned = planned or {}
    try:
        return turn_rows(
            run_dir, experiment=experiment, trajectory=_trajectory_id(run_dir, planned),
            replica=planned.get(run_dir.name, 0),
        )  # fmt: skip
    except (OSError, ValueError) as exc:
        raise ReportError(f"cannot read the turns of {run_dir}: {exc}") from None


def _experiment_plan(path: Path) -> ExperimentPlan | None:
    """The experiment's plan, or None when it has none that validates (its run directories are read alone)."""
    try:
        return load_experiment(path)
    except (OSError, ValueError):
        return None


def read_source(path: Path) -> Source:
    """Read one input directory (see the module docstring).

    An experiment's trajectories *pending* are those its plan.json lists (else the run directories found) with
    no row yet.

    Raises:
        ReportError: the directory does not exist, is neither kind, or holds a file that does not validate.
    """
    path = Path(path)
    if not path.is_dir():
        raise ReportError(f"{path} is not a directory: give run or experiment directories")
    if is_run_dir(path):
        rows = _run_rows(path, path.name)
        return Source(
            path=path, kind="run", rows=rows, run_dirs=[path], pending=0 if rows else 1,
            trajectory_dirs={(path.name, _trajectory_id(path, {})): path},
        )  # fmt: skip
    layout = ExperimentLayout(path)
    source = Source(path=path, kind="experiment", manifest=_read_json(layout.manifest_path) or {})
    plan = _experiment_plan(path)
    name = plan.name if plan else path.name
    planned = {t.id: t.replica for t in plan.trajectories} if plan else {}
    source.run_dirs = sorted(
        p.parent for p in path.rglob(PLAN_FILE) if p.parent != path and is_run_dir(p.parent)
    )
    if layout.turns_csv.is_file():
        source.rows = read_turns_csv(layout.turns_csv)
    elif source.run_dirs:
        source.rows = [row for run_dir in source.run_dirs for row in _run_rows(run_dir, name, planned)]
    else:
        raise ReportError(
            f"{path} holds no {layout.turns_csv.name} and no run directory (a folder with a ptxbench.run/1 plan.json): "
            "give a `ptxbench run`, quickstart or experiment directory"
        )
    source.trajectory_dirs = {(name, _trajectory_id(d, planned)): d for d in source.run_dirs}
    done = {row.trajectory for row in source.rows}
    expected = set(planned) or {trajectory for _, trajectory in source.trajectory_dirs}
    source.pending = len(expected - done)
    return source
