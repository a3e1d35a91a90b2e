"""The static analysis of one solution, as data: what ``fibserve check``, ``POST /compile`` and an evaluation's
``analysis`` report (:mod:`fibserve.static_analysis` computes it). A light module: pydantic and the build and
analysis result models only, so the wire contract (:mod:`fibserve.api`) can carry it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, computed_field

from fibserve.analysis.verdict import KernelAnalysis, Verdict
from fibserve.build.policy_config import PolicyViolation
from fibserve.build.result import BuildResult

CheckStatus = Literal[
    "clean", "policy_violation", "abi_mismatch", "compile_error", "build_timeout", "infra_error"
]


class Analysis(BaseModel):
    """The static analysis of one solution for one target (the body of ``POST /compile``)."""

    # "ignore", not "forbid": the JSON carries the computed ``ok``, and a client must be able to read it back.
    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)

    solution: str
    """Solution name."""
    definition: str
    """Definition name the solution claims to implement."""
    language: str
    """cuda, cpp, triton or python."""
    arch: str | None
    """Target architecture of the build (None for Python/Triton)."""
    status: CheckStatus
    """``clean``; ``policy_violation`` (not built); ``abi_mismatch`` (built, but the entry point does not fit
    the definition given: see ``abi``; the evaluator would reject it); ``compile_error``; ``build_timeout``;
    ``infra_error`` (the toolchain failed, not the candidate). Policy and build failures take precedence."""
    executed: bool = False
    """Always False: static analysis never runs the kernel."""
    policy: list[PolicyViolation] = Field(default_factory=list)
    """Source policy violations (the build is skipped when there are any), then violations found in the
    built library (imported cuBLAS/cuDNN symbols, CUTLASS kernels: see :mod:`fibserve.build.binary_policy`)."""
    abi: list[str] = Field(default_factory=list)
    """Entry-point problems found against the definition (argument count), when a definition was given."""
    build: BuildResult | None = None
    """The build, with its status and (trimmed) log; None when the policy stopped it."""
    kernels: list[KernelAnalysis] = Field(default_factory=list)
    """Per-kernel PTX families, notable SASS opcodes and ptxas resources."""
    ptx_families: dict[str, int] = Field(default_factory=dict)
    """PTX family totals over all functions."""
    sass_opcodes: dict[str, int] = Field(default_factory=dict)
    """Base SASS opcode totals over all kernels."""
    verdict: Verdict | None = None
    """Architecture verdict for the target; None when nothing was compiled."""
    sass_tool: str | None = None
    """Path of the cuobjdump that disassembled the SASS (None when none was found: see the verdict's notes)."""
    sass_tool_version: str | None = None
    """Its release line (``Cuda compilation tools, release 12.8, V12.8.55``); a note warns when its release
    differs from the nvcc that compiled the build."""
    notes: list[str] = Field(default_factory=list)
    """Plain statements about what was and was not analysed."""
    timings_ms: dict[str, float] = Field(default_factory=dict)
    """Milliseconds per stage: policy, build, ptx (parse), cuobjdump (run and parse), resources, total;
    ``analysis_cached`` replaces the three analysis stages when the build's analysis was cached."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """Clean policy, a successful build and (when a definition was given) an entry point that fits it; the
        verdict may still say the kernel uses nothing special."""
        return self.status == "clean"


class AnalysisUnavailable(BaseModel):
    """What an evaluation records instead of an :class:`Analysis` when the static analysis itself failed (the
    toolchain broke, not the candidate). A CUDA/C++ evaluation that enforces the source policy then stops as a
    task error before the candidate runs (its policy is read from the analysis); others go on without it. On
    the wire: ``{"error": "..."}``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    error: str
    """Why, e.g. ``static analysis unavailable: RuntimeError('...')``."""


AnalysisOutcome = Analysis | AnalysisUnavailable
"""The ``analysis`` of an evaluation (a task answer's ``analysis``): the analysis, or why there is none."""

_OUTCOME: TypeAdapter[AnalysisOutcome] = TypeAdapter(AnalysisOutcome)


def read_analysis(raw: object) -> AnalysisOutcome | None:
    """Validate the JSON of an evaluation's ``analysis`` (None stays None): how a client reads it typed.

    Raises:
        pydantic.ValidationError: ``raw`` is neither an :class:`Analysis` nor an :class:`AnalysisUnavailable`.
    """
    return None if raw is None else _OUTCOME.validate_python(raw)
