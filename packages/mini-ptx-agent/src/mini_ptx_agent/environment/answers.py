"""FIBServe's answers read into the report's parts: the static analysis (:func:`static_analysis_from`), the
compute-sanitizer runs (:func:`sanitizer_verdict_from`) and one Nsight Compute run (:func:`ncu_result_from`).

Each reads the service's models (or their JSON) by their types, so a change to a model shows here.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from .report import NcuResult, QuotedFinding, SanitizerVerdict, StaticAnalysis


def _positive(counts: dict[str, int]) -> list[str]:
    """Names with a positive count, sorted."""
    return sorted(name for name, count in counts.items() if count)


def static_analysis_from(raw: Any) -> StaticAnalysis | None:
    """Read the service's static analysis into :class:`StaticAnalysis`: the one place the agent reads it.

    ``raw`` is a task answer's ``analysis`` (already a :class:`fibserve.analysis.report.Analysis`), or its JSON
    as ``fibserve.check`` writes it, validated against that model, so the agent reads the fields the service
    wrote by their types, and a change to the model shows here. ``compiled`` from ``build.ok`` (None when policy stopped the build before it
    started: then the violations say why); PTX families from ``ptx_families``; SASS families from the kernels'
    ``sass_notable`` opcodes (HGMMA, UTMALDG, ...); registers and shared memory are the maximum over kernels,
    spills the sum of spill stores and loads over kernels (None when a kernel's are unknown). The service's
    :class:`fibserve.analysis.report.AnalysisUnavailable` (``{"error": ...}``: its analysis failed), or anything
    neither model accepts, gives a :class:`StaticAnalysis` that knows nothing but ``raw``.
    """
    if not raw:
        return None
    # builds on fibserve.build and .analysis: only once it is needed
    from fibserve.analysis.report import AnalysisUnavailable, read_analysis

    if hasattr(raw, "model_dump"):
        raw = raw.model_dump(mode="json")
    try:
        analysis = read_analysis(raw)
    except ValidationError:
        return StaticAnalysis(raw=raw)
    if analysis is None or isinstance(analysis, AnalysisUnavailable):
        return StaticAnalysis(raw=raw)
    resources = [kernel.resources for kernel in analysis.kernels if kernel.resources is not None]
    violations = [f"{v.file}:{v.line}: {v.message} ({v.rule})" for v in analysis.policy]
    if analysis.build is not None:
        compiled: bool | None = analysis.build.ok
    else:
        compiled = False if violations else None
    registers = [r.registers for r in resources if r.registers is not None]
    from ..architecture import verdict_families

    return StaticAnalysis(
        compiled=compiled,
        compile_log=analysis.build.log if analysis.build is not None else "",
        policy_violations=violations + list(analysis.abi),
        ptx_families=_positive(analysis.ptx_families),
        sass_families=sorted(
            {name for kernel in analysis.kernels for name in _positive(kernel.sass_notable)}
        ),
        registers=max(registers) if registers else None,
        shared_memory_bytes=max(r.shared_bytes for r in resources) if resources else None,
        spill_bytes=_spill_bytes(resources),
        target=analysis.arch,
        architecture_families=verdict_families(analysis.verdict) if analysis.verdict is not None else None,
        raw=raw,
    )


def _spill_bytes(resources: list[Any]) -> int | None:
    """Spill stores plus loads over ``resources`` (``KernelResources``), in bytes; None when there are none,
    or when any kernel's spills are unknown (the service read its numbers from the cubin alone)."""
    spills = [(r.spill_store_bytes, r.spill_load_bytes) for r in resources]
    if not spills or any(None in pair for pair in spills):
        return None
    return sum(store + load for store, load in spills)


def _places(finding: dict[str, Any]) -> list[str]:
    places = []
    for where in finding.get("locations") or []:
        text = f"{where.get('file')}:{where.get('line')}"
        if where.get("function"):
            text += f" ({where['function']})"
        if where.get("source"):
            text += f": {where['source']}"
        places.append(text)
    return places


def sanitizer_verdict_from(
    runs: list[Any], *, requested_runs: int = 1, completed_runs: int = 1
) -> SanitizerVerdict:
    """Summarize compute-sanitizer runs (one per tool and workload): passed when every run passed; the findings
    of the failing runs flattened with their source lines (:class:`QuotedFinding`). ``requested_runs`` and
    ``completed_runs`` count the gate's rounds (each round runs every tool on every workload)."""
    rows = [r.model_dump() if hasattr(r, "model_dump") else dict(r) for r in runs]
    failed = [r for r in rows if not r.get("passed")]
    findings = [
        QuotedFinding(
            tool=str(run.get("tool")), workload=str(run.get("workload")), message=str(f.get("message", "")),
            count=int(f.get("count") or 1), places=_places(f), thread=f.get("thread"),
            details=[str(d) for d in f.get("details") or []],
        )
        for run in failed
        for f in run.get("findings") or []
    ]  # fmt: skip
    summary = ""
    if failed:
        first = failed[0]
        why = "timed out" if first.get("timed_out") else f"exit {first.get('exit_code')}"
        summary = (
            f"{first.get('tool')} on workload {first.get('workload')} ({why}):\n{first.get('output', '')}"
        )
    return SanitizerVerdict(
        passed=not failed,
        tools=sorted({str(r.get("tool")) for r in rows}),
        requested_runs=requested_runs,
        completed_runs=completed_runs,
        summary=summary,
        findings=findings,
    )


def ncu_result_from(run: Any, *, workload: str, kernel_hash: str, target: str) -> NcuResult:
    """Read one ``digest`` Nsight Compute run (the service's ``ProfileRun`` or its JSON) into :class:`NcuResult`;
    the executed families follow from its opcode counts (:func:`mini_ptx_agent.architecture.executed_families`)."""
    from ..architecture import executed_families

    row = run.model_dump() if hasattr(run, "model_dump") else dict(run)
    if not row.get("ok"):
        note = row.get("note") or f"ncu exited with status {row.get('exit_code')}"
        return NcuResult(workload=workload, kernel_hash=kernel_hash, error=str(note))
    opcodes = {str(k): int(v) for k, v in (row.get("executed_opcodes") or {}).items()}
    summary = row.get("summary")
    return NcuResult(
        workload=workload,
        kernel_hash=kernel_hash,
        executed_opcodes=opcodes,
        executed_families=executed_families(target, opcodes),
        summary=dict(summary) if summary else None,
    )
