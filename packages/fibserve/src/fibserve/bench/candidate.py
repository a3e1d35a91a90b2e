"""Turning a Solution into what the sandbox worker loads (trusted side; runs no candidate code).

Every language is built by :func:`fibserve.build.build_solution` (CUDA/C++: nvcc with the tvm-ffi binding;
Python/Triton: a private package), through the build cache. The result is a *load request* for the worker's
``load`` operation, or a failure with a status that says whose fault it was.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fibserve.analysis.report import Analysis, AnalysisOutcome
from fibserve.bench.report import BuildSummary
from fibserve.build import BuildResult, BuildStatus, build_solution, check_policy
from fibserve.trace import Definition, EvaluationStatus, Solution


@dataclass
class Prepared:
    """Outcome of preparing a candidate."""

    load: dict[str, Any] | None = None
    """The worker ``load`` request (None on failure)."""
    status: EvaluationStatus | None = None
    """COMPILE_ERROR or TIMEOUT when the candidate is at fault (None otherwise)."""
    task_error: str | None = None
    """Infrastructure failure (missing toolchain, broken builder)."""
    log: str = ""
    """Compiler log or the reason for the failure."""
    summary: BuildSummary | None = None
    """Build facts recorded in the report (None when the builder itself failed)."""
    seconds: float = 0.0
    """Wall time of the build (nvcc included)."""
    result: BuildResult | None = None
    """The build; holding it keeps its lease on the build cache (:class:`fibserve.build.cache.BuildLease`)."""


def check_solution(definition: Definition, solution: Solution) -> str | None:
    """A message when ``solution`` cannot be a candidate for ``definition`` (else None)."""
    if solution.definition != definition.name:
        return (
            f"solution {solution.name!r} implements definition {solution.definition!r}, "
            f"not {definition.name!r}; pick the matching definition"
        )
    if solution.spec.language.value in ("cuda", "cpp") and not solution.spec.destination_passing_style:
        return "CUDA/C++ solutions must use destination passing style (outputs preallocated by the harness)"
    return None


def policy_problems(solution: Solution, analysis: AnalysisOutcome | None) -> list[str]:
    """Source-policy violations (CUDA: from ``analysis``; Triton and Python: the AST check with the module
    allowlist of their language) and, for CUDA, entry-point ABI problems found statically; each is one line
    naming the rule, file and line. The trusted side's own references never come through here."""
    problems: list[str] = []
    if isinstance(analysis, Analysis):
        problems.extend(f"{v.file}:{v.line}: [{v.rule}] {v.message}" for v in analysis.policy)
        problems.extend(f"ABI: {message}" for message in analysis.abi)
        return problems
    if solution.spec.language.value in ("triton", "python"):
        for v in check_policy(solution):
            problems.append(f"{v.file}:{v.line}: [{v.rule}] {v.message}")
    return problems


def arity(definition: Definition, solution: Solution) -> int:
    """How many positional arguments ``run`` receives: inputs, plus outputs in destination passing style."""
    n = len(definition.inputs)
    return n + len(definition.outputs) if solution.spec.destination_passing_style else n


def prepare(definition: Definition, solution: Solution, *, arch: str, timeout: float) -> Prepared:
    """Build ``solution`` (:func:`fibserve.build.build_solution`, through the cache) and describe how the worker
    loads it.

    Args:
        arch: CUDA target such as ``sm_90a`` (ignored for Python/Triton).
        timeout: build time limit in seconds.
    """
    spec = solution.spec
    started = time.monotonic()
    try:
        result = build_solution(solution, arch=arch, timeout_s=timeout)
    except Exception as exc:  # the builder's own failure, never the candidate's
        return Prepared(
            task_error=f"build infrastructure failed: {exc!r}", seconds=time.monotonic() - started
        )
    seconds = time.monotonic() - started
    summary = BuildSummary(
        status=result.status, arch=result.arch, cached=result.cached, timings_ms=result.timings_ms,
        sandbox=result.sandbox, log=result.log[-8000:],
    )  # fmt: skip
    outcome = Prepared(log=result.log, summary=summary, seconds=seconds, result=result)
    if result.status is BuildStatus.COMPILE_ERROR:
        outcome.status = EvaluationStatus.COMPILE_ERROR
    elif result.status is BuildStatus.TIMEOUT:
        outcome.status = EvaluationStatus.TIMEOUT
    elif result.status is not BuildStatus.OK:
        outcome.task_error = f"build infrastructure error: {result.log[-2000:]}"
    else:
        load: dict[str, Any] = {
            "language": spec.language.value,
            "entry_file": spec.entry_file,
            "symbol": spec.entry_symbol,
            "dps": spec.destination_passing_style,
            "arity": arity(definition, solution),
        }
        if result.library_path is not None:
            load["library"] = str(result.library_path)
        else:
            load["package"] = result.package
            load["package_root"] = str(Path(result.build_dir) / (result.package_root or ""))
        outcome.load = load
    return outcome


def cuda_arch(capability: tuple[int, int] | None) -> str:
    """nvcc target for a compute capability: ``sm_90a`` for Hopper (9.x), ``sm_100a`` for Blackwell (10.x),
    ``sm_XY`` otherwise; ``sm_90a`` when unknown (CPU mode builds for the default PTXBench target)."""
    if capability is None:
        return "sm_90a"
    major, minor = capability
    if major in (9, 10):
        return f"sm_{major}{minor}a"
    return f"sm_{major}{minor}"
