"""The result of one :meth:`Evaluator.evaluate` call: traces plus everything needed to trust them.

Representation of "not executed" (CUDA candidates without a GPU): each workload gets a trace whose
``evaluation`` is null (the FlashInfer Trace form for "no result"), ``executed`` is False and ``notes`` says
why. No PASSED status is ever produced for code that did not run on the target device.

``task_error`` is for harness or infrastructure failures (a worker that does not start, a broken reference,
inputs that cannot be generated, a missing toolchain): they are never reported as the candidate's
RUNTIME_ERROR. ``workload_errors`` names the workloads they affected.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from fibserve.analysis.report import AnalysisOutcome
from fibserve.bench.config import EvalConfig
from fibserve.build.result import BuildStatus
from fibserve.trace import EvaluationStatus, Trace


class DeviceSnapshot(BaseModel):
    """One reading of the device state (None where unavailable)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Device name, e.g. ``NVIDIA H200``, or ``cpu``."""
    driver: str | None = None
    """NVIDIA driver version."""
    sm_clock_mhz: float | None = None
    """Current SM clock in MHz."""
    max_sm_clock_mhz: float | None = None
    """Maximum SM clock in MHz."""
    power_w: float | None = None
    """Board power draw in watts."""
    temperature_c: float | None = None
    """GPU temperature in degrees Celsius."""
    memory_used_mib: float | None = None
    """Device memory in use (all processes) in MiB."""
    source: str = "none"
    """Where the numbers came from: ``pynvml``, ``nvidia-smi``, ``torch`` or ``none``."""


class BuildSummary(BaseModel):
    """What an evaluation records of the candidate's build (the answer's ``build``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    status: BuildStatus
    """OK, COMPILE_ERROR, TIMEOUT or INFRA_ERROR."""
    arch: str | None = None
    """CUDA target of a compiled build (``sm_90a``); None for Python/Triton."""
    cached: bool = False
    """Read from the build cache rather than built now."""
    timings_ms: dict[str, float] = Field(default_factory=dict)
    """Milliseconds: ``compile`` (the compiler) and ``total``."""
    sandbox: str = "none"
    """How the compiler was confined: ``bwrap``, or ``unsafe-none`` under ``--unsafe-no-sandbox``."""
    log: str = ""
    """The compiler's output, its last 8,000 characters."""


class DeviceInfo(BaseModel):
    """The device of an evaluation and its state at the start and end of the evaluation."""

    model_config = ConfigDict(extra="forbid")

    device: str
    """``cpu`` or ``cuda:N``."""
    name: str
    """Device name, e.g. ``NVIDIA H200`` or ``cpu``."""
    driver: str | None = None
    """NVIDIA driver version (None on CPU)."""
    start: DeviceSnapshot | None = None
    """Clocks, power and temperature when the evaluation started."""
    end: DeviceSnapshot | None = None
    """The same when it ended."""


class EvaluationReport(BaseModel):
    """Everything one evaluation produced."""

    # "NaN"/"Infinity" strings for non-finite errors in the traces (the outermost model decides, see trace/evaluation)
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    definition: str
    """Definition name."""
    solution: str
    """Solution name."""
    traces: list[Trace] = Field(default_factory=list)
    """One trace per workload, in request order (``evaluation`` null when not executed or a task error)."""
    analysis: AnalysisOutcome | None = None
    """Static analysis from ``fibserve.check`` (CUDA: policy, PTX/SASS families, resources), why it is
    unavailable, or None (not a compiled candidate)."""
    build: BuildSummary | None = None
    """The candidate's build: status, arch, cached, timings (ms), log (trimmed)."""
    config: EvalConfig
    """The configuration used (with the layer that set each value in ``config.origin``)."""
    device_info: DeviceInfo
    """Device and its state at start and end."""
    executed: bool = False
    """Whether the candidate actually ran (False for CUDA candidates on a machine without a GPU)."""
    sandbox: str = "none"
    """How candidate code was confined: ``bwrap``, ``unsafe-none`` (``--unsafe-no-sandbox``: not at all) or
    ``unavailable`` (nothing was run)."""
    limits_hit: dict[str, str] = Field(default_factory=dict)
    """Workload uuid -> the resource limit the candidate ran into there (``limit exceeded: memory (...)``)."""
    task_error: str | None = None
    """A harness or infrastructure failure (never the candidate's fault), or None."""
    workload_errors: dict[str, str] = Field(default_factory=dict)
    """Workload uuid -> the task-level error that kept it from being evaluated."""
    notes: list[str] = Field(default_factory=list)
    """Facts a reader must know: CPU mode, missing bubblewrap, plausibility flags, worker replacements."""
    timings_s: dict[str, float] = Field(default_factory=dict)
    """Wall seconds per phase: ``analysis`` (CUDA: fibserve.check, which builds through the cache), ``build``,
    ``worker_start``, ``load``, ``inputs``, ``reference``,
    ``correctness``, ``timing``, ``total``; ``gpu_timed`` and ``gpu_timed_reference`` are the sums of the timed
    candidate and reference calls (the pairs, warmup excluded)."""

    @property
    def statuses(self) -> list[EvaluationStatus | None]:
        """Per-trace status (None when a trace has no evaluation)."""
        return [t.evaluation.status if t.evaluation else None for t in self.traces]

    @property
    def all_passed(self) -> bool:
        """True when the candidate ran and every workload PASSED (never True when not executed)."""
        return (
            self.executed
            and self.task_error is None
            and bool(self.traces)
            and all(s is EvaluationStatus.PASSED for s in self.statuses)
        )
