"""Nsight Compute runs of correct kernels, cached per kernel hash (``instruction_evidence``, ``profile_in_loop``).

Each turn whose kernel passed every workload on a GPU is profiled once, on the workload with the lowest
speedup (the one that decides the target), by the backend's ``profile`` (FIBServe's ``POST /profile`` with
``digest``). The result is cached as ``<cache_dir>/<kernel_hash>.json``; a run directory's cache is
``exp_000/ncu/``, so a kernel the model sends again (it often does) and a resumed run are not profiled twice.
The kernel hash is the sha256 of the solution's sources, entry point, language and target, and the workload;
the solution's name is not part of it. An executed opcode the compiled SASS does not have is not counted
(:func:`checked`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..task import TaskConfig
from ..trajectory import write_json
from .report import KernelReport, NcuResult


def kernel_hash(solution: Any, task: TaskConfig, workload: str) -> str:
    """sha256 (hex) of what decides a profile: sources, entry point, language, target and workload."""
    key = {
        "sources": sorted((s.path, s.content) for s in solution.sources),
        "entry_point": solution.spec.entry_point,
        "language": task.language,
        "arch": task.arch,
        "workload": workload,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def profiled_workload(report: KernelReport) -> str | None:
    """The workload to profile: the timed one with the lowest speedup, else the first; None without any."""
    timed = [w for w in report.workloads if w.speedup is not None]
    if timed:
        return min(timed, key=lambda w: w.speedup or 0.0).workload_uuid
    return report.workloads[0].workload_uuid if report.workloads else None


def _cached(path: Path) -> NcuResult | None:
    try:
        return NcuResult.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError):
        return None  # missing or unreadable: profile again


def profile_correct_kernel(
    backend: Any, solution: Any, task: TaskConfig, report: KernelReport, cache_dir: Path | None
) -> NcuResult | None:
    """The Nsight Compute result for a kernel that passed every workload on a GPU (None otherwise), from the
    cache when it has it.

    Raises:
        EvaluationInfrastructureError: the service or its profiler failed (not the kernel's fault).
    """
    if not (report.all_passed and report.executed_on_gpu):
        return None
    workload = profiled_workload(report)
    if workload is None:
        return None
    digest = kernel_hash(solution, task, workload)
    path = cache_dir / f"{digest}.json" if cache_dir is not None else None
    if path is not None and (hit := _cached(path)) is not None:
        return hit.model_copy(update={"cached": True})
    result = checked(backend.profile(solution, task, workload, digest), report, task.arch)
    if path is not None:
        write_json(path, result.model_dump(mode="json"))
    return result


def checked(result: NcuResult, report: KernelReport, target: str) -> NcuResult:
    """``result`` without the notable opcodes the compiled SASS lacks (moved to ``not_compiled``, families
    recomputed for ``target``): an instruction that is not in the binary cannot have run, whatever the
    profiler's output (which the candidate shares) says. Unchanged when the service read no SASS (Triton, whose
    SASS is compiled at run time, or no cuobjdump)."""
    from ..architecture import executed_families

    analysis = report.static_analysis
    if analysis is None or not analysis.raw.get("sass_tool") or not analysis.raw.get("kernels"):
        return result
    compiled = set(analysis.sass_families)
    forged = [op for op in result.sass_families if op not in compiled]
    if not forged:
        return result
    opcodes = {op: n for op, n in result.executed_opcodes.items() if op not in forged}
    return result.model_copy(
        update={
            "executed_opcodes": opcodes,
            "executed_families": executed_families(target, opcodes),
            "not_compiled": forged,
        }
    )
