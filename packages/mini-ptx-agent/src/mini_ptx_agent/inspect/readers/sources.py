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

from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

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


def open_directory(path: Path) -> TrajectoryData | ExperimentData:
    """A run or experiment directory, told apart by its ``plan.json``.

    Raises:
        InspectError: no plan.json, a plan of an unknown format version, or a file inside that cannot be read.
    """
    from ...experiments.plan import PLAN_SCHEMA
    from ...runs.directory import RUN_SCHEMA, RunLayout, plan_schema

    layout = RunLayout(path)
    plan = layout.plan_path  # an experiment's plan has the same name
    if not plan.is_file():
        raise InspectError(
            f"{path} has no plan.json: it is neither a run nor an experiment directory (give {KINDS})"
        )
    try:
        schema = plan_schema(path)
    except (OSError, ValueError) as exc:
        raise InspectError(f"{plan} cannot be read as JSON: {exc}") from None
    if schema == PLAN_SCHEMA:
        from .experiment import ExperimentData

        return ExperimentData.load(path)
    if schema == RUN_SCHEMA:
        from .trajectory import TrajectoryData

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


def _names_its_directory(path: Path) -> bool:
    """Whether ``path`` is an experiment's turns table or a run's plan or summary (beside a plan.json)."""
    from ...experiments.directory import ExperimentLayout
    from ...runs.directory import RunLayout

    run, experiment = RunLayout(path.parent), ExperimentLayout(path.parent)
    names = {
        p.name for p in (run.plan_path, run.summary_path, experiment.turns_csv, experiment.turns_parquet)
    }
    return path.name in names and run.plan_path.is_file()


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
    if _names_its_directory(path):
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
