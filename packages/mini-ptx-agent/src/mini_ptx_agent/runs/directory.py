"""The run directory of one trajectory: its layout, ``plan.json`` (what was asked), and naming new ones.

One run directory holds one trajectory (id ``exp_000``) of one definition::

    <run>/plan.json                      what was asked (task, model, prompt tag, limits)
    <run>/summary.json                   what happened (exit status, turns, correct versions, best, target)
    <run>/trajectories/exp_000.traj.json mini-swe-agent-1.1 trajectory, rewritten after every turn
    <run>/exp_000/kernel.cu|py           the latest kernel
    <run>/exp_000/evaluations/turn_NNN.json  the evaluator's result of each evaluated turn
    <run>/exp_000/ncu/<kernel_hash>.json the Nsight Compute result of a correct kernel (feedback options)
    <run>/success/exp_000/kernel_vN.cu|py    every correct version (N = turn)
    <run>/logs/fibserve.log              the embedded FIBServe's log (when this run started one)
    <run>/logs/quickstart-context.json   the quickstart's: what it knew at start
    <run>/quickstart-result.json         the quickstart's: its result, rebuilt from the files above
    <run>/demo/trajectory_<language>.json    the quickstart's: the demo trajectory it replays (demo mode)

:class:`RunLayout` names every one of these paths; nothing else spells them. :func:`load_plan` and
:func:`read_evaluation` read the plan and an evaluator result back as their models; ``summary.json`` is
:mod:`~mini_ptx_agent.runs.summary`'s.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..environment.report import KernelReport
from ..feedback_options import FeedbackOptions
from ..task import TaskConfig

TRAJECTORY_ID = "exp_000"
"""The id of a run directory's one trajectory, in its file names (kept, so older runs still resume; an
experiment of many trajectories gives each its own id in ``plan.json``)."""
TRAJECTORY_SUFFIX = ".traj.json"
"""The suffix of trajectory files: mini-swe-agent's inspector (``mini-extra inspector DIR``) opens every
``*.traj.json`` below DIR."""
PLAN_FILE = "plan.json"
"""The plan's file name, in a run directory and (by the same name) in an experiment directory: a reader given
either tells them apart by its ``schema_version`` (:func:`plan_schema`)."""
SUMMARY_FILE = "summary.json"
"""What happened (:class:`mini_ptx_agent.runs.summary.RunSummary`)."""
TRAJECTORIES_DIR = "trajectories"
"""The folder of the trajectory file (``trajectories/exp_000.traj.json``)."""
RUN_SCHEMA = "ptxbench.run/1"
"""Schema of ``plan.json`` (unchanged, so older runs can still be resumed)."""
DEFAULT_OUTPUT_ROOT = Path("data") / "eval_runs"
"""Default parent of run directories, relative to ``$PTXBENCH_ROOT`` or the working directory."""


class RunLayout:
    """Every path inside one run directory (see the module docstring for the tree): writers and readers ask it
    rather than spell a name, so the layout is written down once."""

    def __init__(self, root: Path, trajectory_id: str = TRAJECTORY_ID):
        self.root = Path(root)
        self.trajectory_id = trajectory_id

    @property
    def plan_path(self) -> Path:
        """``plan.json``."""
        return self.root / PLAN_FILE

    @property
    def summary_path(self) -> Path:
        """``summary.json``."""
        return self.root / SUMMARY_FILE

    @property
    def trajectory_path(self) -> Path:
        """``trajectories/exp_000.traj.json``: the name mini-swe-agent's inspector looks for
        (``mini-extra inspector RUN`` finds it); a run made before it was so named keeps its ``exp_000.json``."""
        folder = self.root / TRAJECTORIES_DIR
        older = folder / f"{self.trajectory_id}.json"
        return older if older.is_file() else folder / f"{self.trajectory_id}{TRAJECTORY_SUFFIX}"

    @staticmethod
    def run_dir_of(trajectory: PurePath) -> PurePath | None:
        """The run directory a trajectory file sits in by this layout (``<run>/trajectories/<file>``), judged by
        its path alone (a model name ``replay:PATH`` need not exist here); None when it sits elsewhere."""
        if trajectory.parent.name == TRAJECTORIES_DIR and trajectory.parent.parent.name:
            return trajectory.parent.parent
        return None

    @property
    def trajectory_dir(self) -> Path:
        """``exp_000/``: the latest kernel and the evaluator results."""
        return self.root / self.trajectory_id

    def kernel_path(self, extension: str) -> Path:
        """The latest kernel: ``exp_000/kernel.cu`` or ``kernel.py`` (``extension`` with its dot)."""
        return self.trajectory_dir / f"kernel{extension}"

    def latest_kernel(self) -> Path | None:
        """The latest kernel that exists, whatever its language; None before the first kernel."""
        return next(iter(sorted(self.trajectory_dir.glob("kernel.*"))), None)

    @property
    def evaluations_dir(self) -> Path:
        """``exp_000/evaluations/``: one KernelReport per evaluated turn."""
        return self.trajectory_dir / "evaluations"

    def evaluation_path(self, turn: int) -> Path:
        """The evaluator's result of one turn (1-based): ``exp_000/evaluations/turn_001.json``."""
        return self.evaluations_dir / f"turn_{turn:03d}.json"

    def evaluation_paths(self) -> list[Path]:
        """The evaluator results that exist, in turn order."""
        return sorted(self.evaluations_dir.glob("turn_*.json"))

    @staticmethod
    def evaluation_turn(path: Path) -> int:
        """The turn of an evaluator result path (``turn_003.json`` -> 3)."""
        return int(path.stem.removeprefix("turn_"))

    @property
    def success_dir(self) -> Path:
        """``success/exp_000/``: every correct version."""
        return self.root / "success" / self.trajectory_id

    def version_path(self, turn: int, extension: str) -> Path:
        """A correct version: ``success/exp_000/kernel_v<turn>.cu|.py`` (``extension`` with its dot)."""
        return self.success_dir / f"kernel_v{turn}{extension}"

    def version_paths(self) -> list[Path]:
        """The correct versions that exist, in turn order."""
        return sorted(self.success_dir.glob("kernel_v*"), key=lambda p: int(p.stem.removeprefix("kernel_v")))

    @property
    def ncu_cache_dir(self) -> Path:
        """``exp_000/ncu/``: Nsight Compute results of correct kernels, one ``<kernel_hash>.json`` each."""
        return self.trajectory_dir / "ncu"

    @property
    def logs_dir(self) -> Path:
        """``logs/``: the service's log and the quickstart's context."""
        return self.root / "logs"

    def log_paths(self) -> list[Path]:
        """The files in ``logs/``, sorted."""
        return sorted(p for p in self.logs_dir.glob("*") if p.is_file())

    @property
    def service_log_path(self) -> Path:
        """``logs/fibserve.log``: the embedded FIBServe's log."""
        return self.logs_dir / "fibserve.log"

    @property
    def quickstart_context_path(self) -> Path:
        """``logs/quickstart-context.json``: what the quickstart knew at start (the service, demo, a refusal)."""
        return self.logs_dir / "quickstart-context.json"

    @property
    def quickstart_result_path(self) -> Path:
        """``quickstart-result.json``: the quickstart's result, rebuilt from the other files."""
        return self.root / "quickstart-result.json"

    def demo_trajectory_path(self, language: str) -> Path:
        """``demo/trajectory_<language>.json``: the bundled demo trajectory a quickstart in demo mode replays."""
        return self.root / "demo" / f"trajectory_{language}.json"

    def relative(self, path: Path) -> str:
        """``path`` relative to the run directory, with forward slashes (how results name files)."""
        return Path(path).relative_to(self.root).as_posix()


class RunPlan(BaseModel):
    """What a run was asked to do (``plan.json``); a resumed run reads it back."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

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


def read_evaluation(path: Path) -> KernelReport | None:
    """One turn's evaluator result (a :class:`RunLayout.evaluation_path`); None when it is missing or does not
    validate (a run killed while writing it)."""
    try:
        return KernelReport.model_validate(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def load_plan(run_dir: Path) -> RunPlan:
    """Read ``plan.json`` of a run directory.

    Raises:
        FileNotFoundError: the directory does not exist, or it is not a run directory (no plan.json).
        ValueError: plan.json is not JSON or does not validate as a run plan.
    """
    if not Path(run_dir).is_dir():
        raise FileNotFoundError(f"run directory {run_dir} does not exist")
    path = RunLayout(run_dir).plan_path
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir} is not a run directory: {path.name} is missing")
    return RunPlan.model_validate(json.loads(path.read_text(encoding="utf-8")))


def plan_schema(directory: Path) -> Any:
    """The ``schema_version`` of ``directory``'s plan.json: :data:`RUN_SCHEMA` for a run directory,
    ``ptxbench.experiment/1`` for an experiment directory; None when the plan has none.

    Raises:
        OSError: there is no readable plan.json (FileNotFoundError when there is none).
        ValueError: plan.json is not JSON.
    """
    data = json.loads((Path(directory) / PLAN_FILE).read_text(encoding="utf-8"))
    return data.get("schema_version") if isinstance(data, dict) else None


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` is one trajectory's run directory (its plan.json is a ``ptxbench.run/1`` plan)."""
    try:
        return plan_schema(path) == RUN_SCHEMA
    except (OSError, ValueError):
        return False


def run_name(task: TaskConfig, *, kind: str = "run", label: str | None = None) -> str:
    """``<kind>-<UTC>-<language>-<label>``: the name (and run id) of a new run directory, e.g.
    ``run-20260130T071500Z-triton-vector_add_f32``; ``label`` defaults to the definition (the quickstart's
    runs are ``quickstart-...-gemm``)."""
    return f"{kind}-{utc_stamp()}-{task.language}-{label or task.definition}"


def new_run_dir(output_root: Path, name: str, *, attempts: int = 1) -> Path:
    """Create ``<output_root>/<name>`` (a new, empty directory) and return it. With ``attempts`` > 1 a name that
    is taken is tried again as ``<name>-1``, ``<name>-2``, ... (a name from the clock is taken by a run started
    in the same second).

    Raises:
        FileExistsError: the directory exists already (each of the ``attempts`` names).
    """
    for attempt in range(attempts):
        run_dir = Path(output_root) / (name if attempt == 0 else f"{name}-{attempt}")
        try:
            run_dir.mkdir(parents=True, exist_ok=False)
            return run_dir
        except FileExistsError:
            continue
    raise FileExistsError(f"{Path(output_root) / name} exists already")
