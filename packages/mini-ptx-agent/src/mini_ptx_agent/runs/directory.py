"""The run directory of one trajectory: its layout, ``plan.json`` (what was asked), ``summary.json`` (what happened).

One run directory holds one trajectory (id ``exp_000``) of one definition::

    <run>/plan.json                      what was asked (task, model, prompt tag, limits)
    <run>/summary.json                   what happened (exit status, turns, correct versions, best, target)
    <run>/trajectories/exp_000.traj.json mini-swe-agent-1.1 trajectory, rewritten after every turn
    <run>/exp_000/kernel.cu|py           the latest kernel
    <run>/exp_000/evaluations/turn_NNN.json  the evaluator's result of each evaluated turn
    <run>/exp_000/ncu/<kernel_hash>.json the Nsight Compute result of a correct kernel (feedback options)
    <run>/success/exp_000/kernel_vN.cu|py    every correct version (N = turn)
    <run>/logs/fibserve.log              the embedded FIBServe's log (when this run started one)

The summary keeps three facts apart: the runner completed (no infrastructure failure), a kernel was correct,
and the target was achieved (on a GPU). "A kernel was correct" is ``null`` (unknown) when no version passed and
some kernel was built but never executed (CUDA on a service without a GPU lane), or when no kernel was evaluated
because the run stopped on an infrastructure failure (an outage is never counted against a model): see
:func:`kernel_correctness`.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..evaluation import NotEvaluated
from ..feedback_options import FeedbackOptions
from ..task import TaskConfig

TRAJECTORY_ID = "exp_000"
"""The id of a run directory's one trajectory, in its file names (kept, so older runs still resume; an
experiment of many trajectories gives each its own id in ``plan.json``)."""
TRAJECTORY_SUFFIX = ".traj.json"
"""The suffix of trajectory files: mini-swe-agent's inspector (``mini-extra inspector DIR``) opens every
``*.traj.json`` below DIR."""
RUN_SCHEMA = "ptxbench.run/1"
"""Schema of ``plan.json`` (unchanged, so older runs can still be resumed)."""
SUMMARY_SCHEMA = "ptxbench.run/3"
"""Schema of ``summary.json``. /3: ``kernel_correct`` is also null when no kernel was evaluated and the runner did
not complete (an outage; /2 wrote false there). /2: ``kernel_correct`` may be null (unknown: built, never
executed); /1 wrote false there."""
DEFAULT_OUTPUT_ROOT = Path("data") / "eval_runs"
"""Default parent of run directories, relative to ``$PTXBENCH_ROOT`` or the working directory."""


class RunLayout:
    """Paths inside one run directory (see the module docstring for the tree)."""

    def __init__(self, root: Path, trajectory_id: str = TRAJECTORY_ID):
        self.root = Path(root)
        self.trajectory_id = trajectory_id

    @property
    def plan_path(self) -> Path:
        """``plan.json``."""
        return self.root / "plan.json"

    @property
    def summary_path(self) -> Path:
        """``summary.json``."""
        return self.root / "summary.json"

    @property
    def trajectory_path(self) -> Path:
        """``trajectories/exp_000.traj.json``: the name mini-swe-agent's inspector looks for
        (``mini-extra inspector RUN`` finds it); a run made before it was so named keeps its ``exp_000.json``."""
        folder = self.root / "trajectories"
        older = folder / f"{self.trajectory_id}.json"
        return older if older.is_file() else folder / f"{self.trajectory_id}{TRAJECTORY_SUFFIX}"

    @property
    def trajectory_dir(self) -> Path:
        """``exp_000/``: the latest kernel and the evaluator results."""
        return self.root / self.trajectory_id

    @property
    def success_dir(self) -> Path:
        """``success/exp_000/``: every correct version."""
        return self.root / "success" / self.trajectory_id

    @property
    def ncu_cache_dir(self) -> Path:
        """``exp_000/ncu/``: Nsight Compute results of correct kernels, one ``<kernel_hash>.json`` each."""
        return self.trajectory_dir / "ncu"

    @property
    def service_log_path(self) -> Path:
        """``logs/fibserve.log``: the embedded FIBServe's log."""
        return self.root / "logs" / "fibserve.log"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class RunPlan(_Model):
    """What a run was asked to do (``plan.json``); a resumed run reads it back."""

    schema_version: Literal["ptxbench.run/1"] = RUN_SCHEMA
    run_id: str
    created_at: str
    """UTC, ISO 8601."""
    task: TaskConfig
    model: str
    """Model name as given (``replay:...``, a litellm name, or the served id of an OpenAI-compatible endpoint)."""
    prompt_tag: str
    num_turns: int = Field(ge=1)
    """Model calls before ``LimitsExceeded``."""
    wall_time_limit_s: int = Field(default=0, ge=0)
    """Whole-run limit (s); 0 = none."""
    turn_timeout_s: float = Field(default=900.0, gt=0)
    """Limit on one model call (s); each evaluation's limit is ``min(task.timeout_s, turn_timeout_s)``."""
    service: str
    """``embedded`` or the FIBServe URL used."""
    feedback: FeedbackOptions = Field(default_factory=FeedbackOptions)
    """What the model is shown after each turn and what ends the run (a plan without it: the defaults)."""
    demo: bool = False
    """The model is a demo replay (the bundled demo trajectory, or a replay of a trajectory flagged as one): its
    kernels were written by the PTXBench authors, so the run is never a model's result nor training data."""

    @model_validator(mode="after")
    def _one_sanitizer_setting(self) -> RunPlan:
        """``feedback.sanitizer_gate`` and ``task.sanitizer``/``sanitizer_types`` say one thing: the gate decides,
        and a plan that sets only the task's (written before feedback options existed) fills the gate from it."""
        gate = list(self.feedback.sanitizer_gate)
        if not gate and self.task.sanitizer:
            gate = list(self.task.sanitizer_types)
            self.feedback = FeedbackOptions.model_validate(
                self.feedback.model_dump() | {"sanitizer_gate": gate}
            )
        types = gate or list(self.task.sanitizer_types)
        if (self.task.sanitizer, self.task.sanitizer_types) != (bool(gate), types):
            self.task = self.task.model_copy(update={"sanitizer": bool(gate), "sanitizer_types": types})
        return self


class RunSummary(_Model):
    """What happened (``summary.json``)."""

    schema_version: Literal["ptxbench.run/3"] = SUMMARY_SCHEMA
    run_id: str
    exit_status: str
    """Submitted, LimitsExceeded, TimeExceeded, RepeatedFormatError, InfrastructureError, or an exception name."""
    exit_message: str = ""
    runner_completed: bool
    """The loop ended by its own rules (not by an infrastructure failure or a crash)."""
    kernel_correct: bool | None
    """True: at least one version passed every workload. None (unknown): none passed and at least one kernel was
    built but not executed (``NOT_EXECUTED``: CUDA without a GPU lane), or no kernel was evaluated and the runner
    did not complete (service or model API down). False: none passed otherwise (each evaluated kernel failed, or
    the runner completed without a kernel, e.g. only format errors)."""
    target_met: bool
    """A version passed every workload on a GPU at or above the target speedup."""
    turns: int
    """Model calls made."""
    num_turns: int | None = None
    """The run's turn limit when it ended (None: a summary written before this was recorded). ``LimitsExceeded``
    with fewer ``turns`` is a replay that ran out of recorded replies: the run ended by its rule all the same;
    an experiment extended past ``num_turns`` continues it."""
    correct_versions: list[int] = Field(default_factory=list)
    """Turns whose kernel passed every workload (``success/exp_000/kernel_v<turn>``)."""
    best: dict[str, Any] | None = None
    """``{turn, min_speedup, executed_on_gpu}`` of the fastest correct version."""
    infrastructure_error: str | None = None
    elapsed_s: float
    trajectory: str = f"trajectories/{TRAJECTORY_ID}{TRAJECTORY_SUFFIX}"
    resumed: bool = False
    demo: bool = False
    """A demo replay, not a model's output (as ``plan.json`` and the trajectory's ``info.ptxbench.demo`` say):
    never count it as a model's result, never use it as training data."""


def utc_stamp() -> str:
    """``20260130T071500Z``: a sortable UTC timestamp for directory names."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def default_output_root(environ: Mapping[str, str] | None = None) -> Path:
    """Where run directories go when no ``--output-root`` is given (`ptxbench run` and the quickstart alike):
    ``$PTXBENCH_DATA_ROOT/eval_runs``, else ``$PTXBENCH_ROOT/data/eval_runs``, else ``data/eval_runs`` under the
    working directory. ``environ``: the environment to read (default ``os.environ``)."""
    env = os.environ if environ is None else environ
    if env.get("PTXBENCH_DATA_ROOT"):
        return Path(env["PTXBENCH_DATA_ROOT"]) / "eval_runs"
    if env.get("PTXBENCH_ROOT"):
        return Path(env["PTXBENCH_ROOT"]) / DEFAULT_OUTPUT_ROOT
    return DEFAULT_OUTPUT_ROOT


def kernel_correctness(
    versions: Sequence[int], statuses: Sequence[str], *, runner_completed: bool
) -> bool | None:
    """Whether a kernel was correct: True when ``versions`` (correct turns) is not empty; None (unknown) when some
    evaluated kernel has status ``NOT_EXECUTED``, or when no kernel was evaluated and the runner did not complete
    (an outage says nothing about the model); else False. ``statuses``: evaluator status per evaluated turn."""
    if versions:
        return True
    if NotEvaluated.NOT_EXECUTED in statuses or (not statuses and not runner_completed):
        return None
    return False


def evaluation_statuses(layout: RunLayout) -> list[str]:
    """The evaluator status of each evaluated turn (``exp_000/evaluations/turn_NNN.json``), in turn order."""
    statuses = []
    for path in sorted((layout.trajectory_dir / "evaluations").glob("turn_*.json")):
        try:
            statuses.append(str(json.loads(path.read_text(encoding="utf-8")).get("status")))
        except (OSError, ValueError, AttributeError):
            continue
    return statuses


def summarize(
    run_id: str,
    result: dict[str, Any],
    trajectory: dict[str, Any],
    *,
    resumed: bool,
    statuses: Sequence[str] = (),
    num_turns: int | None = None,
    trajectory_file: str | None = None,
) -> RunSummary:
    """Build the summary from the agent's final message and the saved trajectory's ``info.ptxbench``.

    ``statuses``: the evaluator status of each evaluated turn (:func:`evaluation_statuses`); they decide whether
    "no correct version" means False or unknown (:func:`kernel_correctness`). ``demo`` comes from the
    trajectory's ``info.ptxbench.demo``. ``num_turns``: the run's turn limit; ``trajectory_file``: the
    trajectory's path relative to the run directory (default: the current name).
    """
    state = trajectory.get("info", {}).get("ptxbench", {})
    last = trajectory["messages"][-1] if trajectory.get("messages") else {}
    status = str(result.get("exit_status") or "")
    infra = status == "InfrastructureError"
    best = state.get("best")
    completed = status in ("Submitted", "LimitsExceeded", "TimeExceeded", "RepeatedFormatError")
    return RunSummary(
        run_id=run_id,
        exit_status=status,
        exit_message=str(last.get("content", "")) if last.get("role") == "exit" else "",
        runner_completed=completed,
        kernel_correct=kernel_correctness(
            list(state.get("versions", [])), statuses, runner_completed=completed
        ),
        target_met=status == "Submitted",
        turns=int(state.get("turns", 0)),
        num_turns=num_turns,
        correct_versions=list(state.get("versions", [])),
        best=best,
        infrastructure_error=str(last.get("content", "")) if infra else None,
        elapsed_s=float(state.get("elapsed_s", 0.0)),
        resumed=resumed,
        demo=state.get("demo") is True,
        **({"trajectory": trajectory_file} if trajectory_file else {}),
    )


def failed_summary(
    plan: RunPlan, status: str, message: str, started: float, *, resumed: bool = False
) -> RunSummary:
    """The summary of a run of ``plan`` that ended before its first turn: ``status`` ``InfrastructureError``
    (the service or the model API was down) or ``Refused``; ``started`` is ``time.time()`` at its start. Nothing
    was evaluated, so ``kernel_correct`` is None (unknown)."""
    return RunSummary(
        run_id=plan.run_id, exit_status=status, exit_message=message, runner_completed=False, kernel_correct=None,
        target_met=False, turns=0, num_turns=plan.num_turns,
        infrastructure_error=message if status == "InfrastructureError" else None,
        elapsed_s=round(time.time() - started, 3), resumed=resumed, demo=plan.demo,
    )  # fmt: skip


def load_plan(run_dir: Path) -> RunPlan:
    """Read ``plan.json`` of a run directory.

    Raises:
        FileNotFoundError: the directory does not exist, or it is not a run directory (no plan.json).
    """
    if not Path(run_dir).is_dir():
        raise FileNotFoundError(f"run directory {run_dir} does not exist")
    path = RunLayout(run_dir).plan_path
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir} is not a run directory: {path.name} is missing")
    return RunPlan.model_validate(json.loads(path.read_text(encoding="utf-8")))


def new_run_dir(output_root: Path, task: TaskConfig, name: str | None = None) -> Path:
    """Create ``<output_root>/<name or run-<UTC>-<language>-<definition>>`` (a new, empty directory).

    Raises:
        FileExistsError: the directory exists already.
    """
    run_dir = Path(output_root) / (name or f"run-{utc_stamp()}-{task.language}-{task.definition}")
    run_dir.mkdir(parents=True, exist_ok=False)
    return run_dir
