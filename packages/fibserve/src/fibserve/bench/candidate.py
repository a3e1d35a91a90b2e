"""Turning a Solution into what the sandbox worker loads (trusted side; runs no candidate code).

CUDA/C++ solutions are built by ``fibserve.build.build_solution`` (policy, nvcc with the tvm-ffi binding,
build cache). Python/Triton solutions are built by it too when it is available, else written here as a
private package in the same layout (``<dir>/pkg/<package>/...``). The result is a *load request* for the
worker's ``load`` operation, or a failure with a status that says whose fault it was.
"""

from __future__ import annotations

import hashlib
import inspect
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fibserve.static_analysis import Analysis, AnalysisOutcome
from fibserve.trace import Definition, EvaluationStatus, Solution


@dataclass
class Prepared:
    """Outcome of preparing a candidate."""

    load: dict[str, Any] | None = None
    """The worker ``load`` request (None on failure)."""
    status: EvaluationStatus | None = None
    """COMPILE_ERROR or TIMEOUT when the candidate is at fault (None otherwise)."""
    task_error: str | None = None
    """Infrastructure failure (missing toolchain or build API)."""
    log: str = ""
    """Compiler log or the reason for the failure."""
    summary: dict[str, Any] = field(default_factory=dict)
    """Build facts recorded in the report."""
    seconds: float = 0.0
    """Wall time of the build (nvcc included)."""
    result: Any = None
    """The ``BuildResult`` when fibserve.build ran."""


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
        from fibserve.build import check_policy

        for v in check_policy(solution):
            problems.append(f"{v.file}:{v.line}: [{v.rule}] {v.message}")
    return problems


def arity(definition: Definition, solution: Solution) -> int:
    """How many positional arguments ``run`` receives: inputs, plus outputs in destination passing style."""
    n = len(definition.inputs)
    return n + len(definition.outputs) if solution.spec.destination_passing_style else n


def _call_build(solution: Solution, arch: str, timeout: float) -> Any:
    from fibserve import build as build_pkg

    build_solution = build_pkg.build_solution
    params = inspect.signature(build_solution).parameters
    kwargs: dict[str, Any] = {}
    if "arch" in params:
        kwargs["arch"] = arch
    for name in ("timeout", "timeout_s"):
        if name in params:
            kwargs[name] = timeout
            break
    return build_solution(solution, **kwargs)


def _write_package(solution: Solution, root: Path) -> tuple[str, Path]:
    key = hashlib.sha256(solution.hash().encode()).hexdigest()
    package = f"fibserve_solution_{key[:16]}"
    base = root / "pkg" / package
    for source in solution.sources:
        target = base / source.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source.content)
    for directory in [base, *(p for p in base.rglob("*") if p.is_dir())]:
        (directory / "__init__.py").touch(exist_ok=True)
    return package, root / "pkg"


def prepare(
    definition: Definition, solution: Solution, *, arch: str, timeout: float, scratch: Path
) -> Prepared:
    """Build or package ``solution`` and describe how the worker loads it.

    Args:
        arch: CUDA target such as ``sm_90a`` (ignored for Python/Triton).
        timeout: build time limit in seconds.
        scratch: a directory for the fallback Python/Triton package.
    """
    spec = solution.spec
    language = spec.language.value
    base = {
        "language": language,
        "entry_file": spec.entry_file,
        "symbol": spec.entry_symbol,
        "dps": spec.destination_passing_style,
        "arity": arity(definition, solution),
    }
    started = time.monotonic()
    try:
        result = _call_build(solution, arch, timeout)
    except (ImportError, AttributeError):
        result = None
    except Exception as exc:
        return Prepared(
            task_error=f"build infrastructure failed: {exc!r}", seconds=time.monotonic() - started
        )
    seconds = time.monotonic() - started
    if result is None:
        if language in ("cuda", "cpp"):
            return Prepared(
                task_error="fibserve.build.build_solution is not available: cannot build CUDA candidates"
            )
        package, package_root = _write_package(solution, scratch)
        syntax = _syntax_errors(solution)
        if syntax:
            return Prepared(status=EvaluationStatus.COMPILE_ERROR, log=syntax, seconds=seconds)
        load = {**base, "package": package, "package_root": str(package_root)}
        return Prepared(
            load=load, summary={"status": "OK", "builder": "fibserve.bench (fallback)"}, seconds=seconds
        )
    status = str(getattr(result.status, "value", result.status))
    summary = {
        "status": status,
        "arch": getattr(result, "arch", None),
        "cached": getattr(result, "cached", False),
        "timings_ms": getattr(result, "timings_ms", {}),
        "sandbox": getattr(result, "sandbox", "none"),
    }
    log = getattr(result, "log", "") or ""
    if status == "COMPILE_ERROR":
        return Prepared(
            status=EvaluationStatus.COMPILE_ERROR, log=log, summary=summary, seconds=seconds, result=result
        )
    if status == "TIMEOUT":
        return Prepared(
            status=EvaluationStatus.TIMEOUT, log=log, summary=summary, seconds=seconds, result=result
        )
    if status != "OK":
        return Prepared(
            task_error=f"build infrastructure error: {log[-2000:]}",
            log=log,
            summary=summary,
            seconds=seconds,
            result=result,
        )
    if language in ("cuda", "cpp"):
        load = {**base, "library": str(result.library_path)}
    else:
        load = {
            **base,
            "package": result.package,
            "package_root": str(Path(result.build_dir) / result.package_root),
        }
    return Prepared(load=load, log=log, summary=summary, seconds=seconds, result=result)


def _syntax_errors(solution: Solution) -> str:
    errors = []
    for source in solution.sources:
        if source.path.endswith(".py"):
            try:
                compile(source.content, source.path, "exec", dont_inherit=True)
            except SyntaxError as exc:
                errors.append(f"{source.path}({exc.lineno}): error: {exc.msg}")
    return "\n".join(errors)


def cuda_arch(capability: tuple[int, int] | None) -> str:
    """nvcc target for a compute capability: ``sm_90a`` for Hopper (9.x), ``sm_100a`` for Blackwell (10.x),
    ``sm_XY`` otherwise; ``sm_90a`` when unknown (CPU mode builds for the default PTXBench target)."""
    if capability is None:
        return "sm_90a"
    major, minor = capability
    if major in (9, 10):
        return f"sm_{major}{minor}a"
    return f"sm_{major}{minor}"
