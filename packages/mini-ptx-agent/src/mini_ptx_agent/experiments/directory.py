"""The experiment directory: its files, and where each trajectory stands (to run, to resume, finished)::

    <experiment>/plan.json            the config and its expansion (ExperimentPlan, ptxbench.experiment/1)
    <experiment>/manifest.json        versions, service, models, seeds, per-trajectory tokens/cost/wall time
    <experiment>/turns.csv            the per-turn table (ptxbench.turns/1), also as turns.parquet
    <experiment>/runs/<id>/           one run directory per trajectory, the layout of `ptxbench run`
    <experiment>/logs/fibserve.log    the embedded FIBServe's log (when the experiment started one)

A trajectory is *finished* when its last run ended by the loop's own rules (``Submitted``, ``LimitsExceeded``
at the plan's turn limit, ``TimeExceeded``, ``RepeatedFormatError``), whatever its kernels did: a kernel that
failed is a result, and so is a replay that ran out of recorded replies before the limit (``LimitsExceeded``
with fewer turns; its summary's ``num_turns`` is the limit it had). It is *unfinished* when its run ended in an infrastructure failure (model endpoint or service down),
was interrupted, crashed, or was killed (no ``summary.json``: the runner removes it when a run starts), or when
``--extend-turns`` raised the turns of a ``LimitsExceeded`` trajectory; unfinished trajectories resume from their
last complete turn. A trajectory never started is *pending*.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from ..runs.directory import PLAN_FILE, RunLayout
from ..runs.summary import read_summary
from .plan import ExperimentPlan

TrajectoryState = Literal["pending", "unfinished", "finished"]

COMPLETED_BY_RULE = ("Submitted", "LimitsExceeded", "TimeExceeded", "RepeatedFormatError")
"""Exit statuses that end a trajectory by the loop's own rules."""


class ExperimentLayout:
    """Paths inside one experiment directory (see the module docstring)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    @property
    def plan_path(self) -> Path:
        return self.root / PLAN_FILE

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    @property
    def turns_csv(self) -> Path:
        return self.root / "turns.csv"

    @property
    def turns_parquet(self) -> Path:
        return self.root / "turns.parquet"

    @property
    def service_log_path(self) -> Path:
        return self.root / "logs" / "fibserve.log"

    def run_dir(self, trajectory_id: str) -> Path:
        """``runs/<id>/``: the trajectory's run directory."""
        return self.root / "runs" / trajectory_id


def load_experiment(root: Path) -> ExperimentPlan:
    """Read ``plan.json`` of an experiment directory.

    Raises:
        FileNotFoundError: the directory or its plan.json does not exist.
        ValueError: plan.json does not validate.
    """
    path = ExperimentLayout(root).plan_path
    if not path.is_file():
        raise FileNotFoundError(f"{root} is not an experiment directory: {path.name} is missing")
    return ExperimentPlan.model_validate(json.loads(path.read_text(encoding="utf-8")))


def trajectory_state(run_dir: Path, num_turns: int) -> TrajectoryState:
    """Where the trajectory in ``run_dir`` stands, for a plan of ``num_turns`` turns (module docstring)."""
    layout = RunLayout(run_dir)
    if not layout.trajectory_path.is_file():
        return "pending"
    summary = read_summary(run_dir)
    if summary is None or summary.exit_status not in COMPLETED_BY_RULE:
        return "unfinished"
    limit = (
        summary.num_turns if summary.num_turns is not None else summary.turns
    )  # older summaries: turns made
    if summary.exit_status == "LimitsExceeded" and limit < num_turns:
        return "unfinished"  # --extend-turns raised the limit
    return "finished"
