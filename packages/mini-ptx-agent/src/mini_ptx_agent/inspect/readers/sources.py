"""What a path given to ``ptxbench-inspect`` is, and opening it as the reader of its kind.

| path | kind | read by |
| --- | --- | --- |
| a directory whose ``plan.json`` is ``ptxbench.run/1`` | run directory (one trajectory) | :class:`~.trajectory.TrajectoryData` |
| a directory whose ``plan.json`` is ``ptxbench.experiment/1`` | experiment directory | :class:`~.experiment.ExperimentData` |
| a ``.json`` file | one trajectory (``mini-swe-agent-1.1``) | :class:`~.trajectory.TrajectoryData` |
| a ``.jsonl`` or ``.parquet`` file | SFT rows | :func:`~.sft.open_sft` |

An experiment's ``turns.csv``/``turns.parquet`` opens its experiment directory, and a run's ``plan.json`` or
``summary.json`` its run directory. Anything else is an :class:`~mini_ptx_agent.inspect.readers.InspectError`
that says what was found and what is read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from . import InspectError

if TYPE_CHECKING:  # each reader is imported when an input of its kind is opened
    from .experiment import ExperimentData
    from .sft import SftFile
    from .trajectory import TrajectoryData

Opened: TypeAlias = "TrajectoryData | ExperimentData | SftFile"
"""What :func:`open_path` returns: one trajectory (alone or in its run directory), an experiment, SFT rows."""

KINDS = (
    "a run directory (plan.json ptxbench.run/1), an experiment directory (plan.json ptxbench.experiment/1), "
    "a trajectory .json, or SFT rows in .jsonl or .parquet"
)


def _schema(plan: Path) -> Any:
    try:
        data = json.loads(plan.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InspectError(f"{plan} cannot be read as JSON: {exc}") from None
    return data.get("schema_version") if isinstance(data, dict) else None


def open_directory(path: Path) -> TrajectoryData | ExperimentData:
    """A run or experiment directory, told apart by its ``plan.json``.

    Raises:
        InspectError: no plan.json, a plan of an unknown format version, or a file inside that cannot be read.
    """
    from ...experiments.plan import PLAN_SCHEMA
    from ...runs.directory import RUN_SCHEMA

    plan = path / "plan.json"
    if not plan.is_file():
        raise InspectError(
            f"{path} has no plan.json: it is neither a run nor an experiment directory (give {KINDS})"
        )
    schema = _schema(plan)
    if schema == PLAN_SCHEMA:
        from .experiment import ExperimentData

        return ExperimentData.load(path)
    if schema == RUN_SCHEMA:
        from ...runs.directory import RunLayout
        from .trajectory import TrajectoryData

        layout = RunLayout(path)
        if not layout.trajectory_path.is_file():
            raise InspectError(
                f"{path} is a run directory without a trajectory yet ({layout.trajectory_path.relative_to(path)} "
                "is missing: the run stopped before its first turn)"
            )
        return TrajectoryData.load(layout.trajectory_path, run_dir=path)
    raise InspectError(
        f"{plan} has format version {schema!r}; this inspector reads {RUN_SCHEMA!r} (a run) and "
        f"{PLAN_SCHEMA!r} (an experiment)"
    )


def open_path(path: Path) -> Opened:
    """Open ``path`` as the reader of its kind (module docstring).

    Raises:
        InspectError: the path does not exist or is none of the kinds; the message says which were expected.
    """
    path = Path(path)
    if path.is_dir():
        return open_directory(path)
    if not path.exists():
        raise InspectError(f"{path} does not exist")
    if (
        path.name in ("turns.csv", "turns.parquet", "plan.json", "summary.json")
        and (path.parent / "plan.json").is_file()
    ):
        return open_directory(path.parent)
    if path.suffix == ".json":
        from .trajectory import TrajectoryData

        return TrajectoryData.load(path)
    if path.suffix in (".jsonl", ".parquet"):
        from .sft import open_sft

        return open_sft(path)
    raise InspectError(
        f"{path}: {path.suffix or 'no suffix'} is not a kind the inspector reads (give {KINDS})"
    )
