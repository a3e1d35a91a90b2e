"""One row per turn: the per-turn table that experiments write and reports and data pipelines read.

:class:`TurnRow` is the row of ``turns.csv`` / ``turns.parquet`` (schema ``ptxbench.turns/1``). A turn is one
model call and what became of its reply: a format error (no kernel block), or a kernel and its evaluation.
:func:`failure_class` maps the evaluator's status to the coarse classes a report counts.
"""

from __future__ import annotations

from typing import Literal

from fibserve.trace import EvaluationStatus
from pydantic import BaseModel, ConfigDict, Field

from ..evaluation import NotEvaluated

TURNS_SCHEMA = "ptxbench.turns/1"

FailureClass = Literal[
    "PASSED", "format", "policy", "compile", "runtime", "incorrect", "timeout", "not_executed", "infrastructure"
]
"""What a turn came to: ``PASSED`` (every workload), or why not. ``format``: the reply held no kernel block;
``policy``: the source policy refused the kernel; ``compile``: it did not build; ``runtime``: it crashed, raised,
or the sanitizer gate found an error; ``incorrect``: wrong shape, dtype or values; ``timeout``: over the time
limit; ``not_executed``: built but not run (CUDA without a GPU lane: correctness unknown); ``infrastructure``:
the model endpoint or the service failed (says nothing about the kernel)."""

_CLASS_OF_STATUS: dict[str, FailureClass] = {
    EvaluationStatus.PASSED: "PASSED",
    EvaluationStatus.INCORRECT_SHAPE: "incorrect",
    EvaluationStatus.INCORRECT_NUMERICAL: "incorrect",
    EvaluationStatus.INCORRECT_DTYPE: "incorrect",
    EvaluationStatus.RUNTIME_ERROR: "runtime",
    EvaluationStatus.COMPILE_ERROR: "compile",
    EvaluationStatus.TIMEOUT: "timeout",
    NotEvaluated.NOT_EXECUTED: "not_executed",
    NotEvaluated.SANITIZER_FAILED: "runtime",
    NotEvaluated.INFRASTRUCTURE_ERROR: "infrastructure",
}


def failure_class(status: str, *, policy_violations: bool = False) -> FailureClass:
    """The :data:`FailureClass` of an evaluated kernel's overall status (``KernelReport.status``).

    A COMPILE_ERROR with source-policy findings is ``policy`` (the service refuses such kernels before building).

    Raises:
        ValueError: ``status`` is not an ``EvaluationStatus`` or ``NotEvaluated`` value.
    """
    if status not in _CLASS_OF_STATUS:
        raise ValueError(f"unknown evaluation status {status!r}; expected one of {sorted(_CLASS_OF_STATUS)}")
    if status == EvaluationStatus.COMPILE_ERROR and policy_violations:
        return "policy"
    return _CLASS_OF_STATUS[status]


class TurnRow(BaseModel):
    """One turn of one trajectory (a row of ``turns.csv`` / ``turns.parquet``).

    Speedups are comparator latency / kernel latency (x), against the definition's baseline Solution when it
    has one (``speedup_basis``), else against its reference; they are set only for PASSED workloads.
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    schema_version: Literal["ptxbench.turns/1"] = TURNS_SCHEMA
    experiment: str
    """The experiment's name (a single run or quickstart: its run directory's name)."""
    trajectory: str
    """The trajectory's stable id within the experiment (``plan.json``)."""
    model: str
    definition: str
    language: str
    """``cuda`` or ``triton``."""
    arch: str
    """Target architecture, e.g. ``sm_90a``."""
    prompt_tag: str
    replica: int = Field(ge=0)
    turn: int = Field(ge=1)
    """1-based model call number within the trajectory."""
    failure_class: FailureClass
    status: str
    """The evaluator's overall status (``FORMAT_ERROR`` for a reply without a kernel)."""
    executed_on_gpu: bool = False
    """Every workload was timed on a GPU (speedups mean nothing otherwise)."""
    target_speedup: float
    target_met: bool = False
    speedups: dict[str, float | None] = Field(default_factory=dict)
    """Workload uuid -> speedup (x), None where that workload did not pass."""
    min_speedup: float | None = None
    """Minimum of ``speedups`` over workloads (x), set only when every workload PASSED."""
    speedup_basis: Literal["baseline", "reference"] | None = None
    latency_ms: float | None = None
    """The kernel's median latency (ms) on the workload that gave ``min_speedup``."""
    ptx_families: list[str] = Field(default_factory=list)
    """Instruction families found in the PTX, e.g. ``wgmma``, ``cp.async.bulk.tensor``."""
    sass_families: list[str] = Field(default_factory=list)
    """Instruction families found in the SASS, e.g. ``HGMMA``, ``UTMALDG``."""
    executed_families: list[str] | None = None
    """SASS families Nsight Compute saw execute (None: not profiled)."""
    tokens_in: int | None = None
    """Prompt tokens of this model call (None: the endpoint did not say)."""
    tokens_out: int | None = None
    """Completion tokens, reasoning included."""
    reasoning_tokens: int | None = None
    cost_usd: float | None = None
    """This call's cost in USD (None: the model has no known price)."""
    seconds: float | None = None
    """Wall time of the turn: the model call plus the evaluation (s)."""
    demo: bool = False
    """From a demo replay: never a model's result, never training data."""
