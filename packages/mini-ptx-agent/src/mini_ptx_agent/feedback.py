"""Deterministic feedback text for one evaluated kernel (what the model reads after each turn).

The same :class:`~mini_ptx_agent.environment.report.KernelReport` always gives the same text: per workload status,
speedup (against the definition's baseline Solution, labelled, or against its reference where it has none),
kernel and comparator times (ms), the speedup against the reference and the fraction of the device
roofline when measured; the error and compile log when failing (trimmed, head and tail kept);
the architecture instructions found (PTX and SASS families); ptxas resources; and one final ``VERDICT:`` line.
The verdict is chosen from structured fields only (status, all_passed, target_met, executed_on_gpu).

The run's :class:`~mini_ptx_agent.feedback_options.FeedbackOptions` add sections (docs/feedback-options.md
shows each): the architecture warning, the sanitizer findings with their source lines, the executed
instructions and the profile summary from Nsight Compute, and the fix notes found for a failure; with
``require_architecture`` a fast kernel without the target's families gets its own verdict.
"""

from __future__ import annotations

from fibserve.trace import EvaluationStatus

from .architecture import TARGET_FAMILIES, describe, has_target_families
from .environment.report import KernelReport, NotEvaluated, WorkloadResult
from .environment.stop import architecture_met
from .feedback_options import FeedbackOptions

MAX_FINDINGS = 6
"""Sanitizer findings listed one by one; further ones are counted."""
NOTE_CHARS = 900
"""Longest fix note quoted in feedback (characters)."""

MAX_LOG_CHARS = 3000
"""Longest error or compile log quoted in feedback (characters); longer logs keep their head and tail."""

MAX_WORKLOAD_ROWS = 16
"""Workloads listed one per line; further ones are summarized by status counts."""


def trim(text: str, limit: int = MAX_LOG_CHARS) -> str:
    """``text`` stripped, cut to ``limit`` characters keeping the first and last parts (errors sit at both ends)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[-tail:]}"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f} ms"


def _axes(result: WorkloadResult) -> str:
    return ", ".join(f"{k}={v}" for k, v in result.axes.items()) or "-"


def _workload_line(index: int, result: WorkloadResult) -> str:
    line = f"  [{index}] workload {result.workload_uuid[:12]} ({_axes(result)}): {result.status.value}"
    if result.speedup is None and result.status.value == "PASSED":
        line += f"; not timed ({result.hardware or 'cpu'}: correctness only)"
    if result.speedup is not None:
        where = "" if result.executed_on_gpu else f" [{result.hardware or 'cpu'}, not a GPU timing]"
        line += _timing_text(result) + where
    if result.roofline_floor_ms is not None:
        line += f"; IMPLAUSIBLE: faster than the roofline floor of {result.roofline_floor_ms:.4f} ms"
    if result.max_absolute_error is not None and result.status.value != "PASSED":
        line += (
            f"; max abs error {result.max_absolute_error:.4g}; max rel error {result.max_relative_error:.4g}"
        )
    return line


def _timing_text(result: WorkloadResult) -> str:
    """Speedup, kernel and comparator times, each labelled with what it is against."""
    kernel = f"kernel {_ms(result.latency_ms)}"
    if result.speedup_basis == "baseline":
        text = (
            f"; speedup {result.speedup:.3f}x vs baseline {result.baseline}; {kernel}; "
            f"baseline {_ms(result.reference_latency_ms)}"
        )
        if result.speedup_vs_reference is not None:
            text += f"; {result.speedup_vs_reference:.3g}x vs the reference"
    elif result.speedup_basis == "reference":
        text = (
            f"; speedup {result.speedup:.3f}x vs the reference (no baseline Solution); {kernel}; "
            f"reference {_ms(result.reference_latency_ms)}"
        )
    else:
        text = f"; speedup {result.speedup:.3f}x; {kernel}; reference {_ms(result.reference_latency_ms)}"
    if result.roofline_fraction is not None:
        text += f"; {result.roofline_fraction:.0%} of the {result.roofline_device} roofline"
    return text


def _basis_line(report: KernelReport) -> list[str]:
    """One line saying what the speedups are against (the baseline and its caveats), when the service said."""
    timed = next((r for r in report.workloads if r.speedup_basis is not None), None)
    if timed is None:
        return []
    if timed.speedup_basis == "baseline":
        return [
            f"Speedups are against the baseline {timed.baseline} ({timed.baseline_description}); the target "
            "is judged on them."
        ]
    return ["Speedups are against the definition's reference: it names no baseline Solution."]


def _workload_section(report: KernelReport) -> list[str]:
    if not report.workloads:
        return []
    lines = [f"Workloads ({len(report.workloads)}):"]
    for i, result in enumerate(report.workloads[:MAX_WORKLOAD_ROWS], start=1):
        lines.append(_workload_line(i, result))
    rest = report.workloads[MAX_WORKLOAD_ROWS:]
    if rest:
        counts: dict[str, int] = {}
        for result in rest:
            counts[result.status.value] = counts.get(result.status.value, 0) + 1
        lines.append(f"  ... {len(rest)} more: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    lines += _basis_line(report)
    failing = next((r for r in report.workloads if r.status.value != "PASSED" and r.log.strip()), None)
    analysis = report.static_analysis
    compile_failed = analysis is not None and analysis.compiled is False
    if failing is not None and compile_failed and failing.log.strip() in analysis.compile_log:
        failing = None  # the same compiler output is quoted once, under "Compile log"
    if failing is not None:
        lines.append(f"Error log of the first failing workload ({failing.workload_uuid[:12]}):")
        lines.append(trim(failing.log))
    return lines


def _analysis_section(report: KernelReport) -> list[str]:
    analysis = report.static_analysis
    if analysis is None:
        return []
    lines = []
    if analysis.policy_violations:
        lines.append("Source policy violations: " + "; ".join(analysis.policy_violations))
    if analysis.compiled is False and analysis.compile_log.strip():
        lines.append("Compile log:")
        lines.append(trim(analysis.compile_log))
    ptx = ", ".join(analysis.ptx_families) or "none of the tracked families"
    sass = ", ".join(analysis.sass_families) or "none of the tracked families"
    if analysis.compiled is not False:
        lines.append(f"Architecture instructions: PTX: {ptx}. SASS: {sass}.")
    resources = [
        f"registers {analysis.registers}" if analysis.registers is not None else None,
        f"static shared memory {analysis.shared_memory_bytes} bytes"
        if analysis.shared_memory_bytes is not None
        else None,
        f"spills {analysis.spill_bytes} bytes" if analysis.spill_bytes is not None else None,
    ]
    present = [r for r in resources if r]
    if present:
        lines.append("Resources: " + ", ".join(present) + ".")
    return lines


def _architecture_warning(report: KernelReport, options: FeedbackOptions) -> list[str]:
    """A warning when the compiled kernel lacks every family its target calls for (from the static verdict)."""
    analysis = report.static_analysis
    if not options.architecture_warning or analysis is None or analysis.architecture_families is None:
        return []
    wanted = TARGET_FAMILIES.get(analysis.target or "")
    if not wanted or has_target_families(analysis.target, analysis.architecture_families):
        return []
    text = (
        f"ARCHITECTURE WARNING: the target {analysis.target} calls for {describe(wanted)}, and this kernel's "
        "SASS has none of them, so it does not use the architecture's tensor-core or bulk-copy hardware."
    )
    if options.require_architecture:
        text += " This run requires them: it does not end as Submitted without them."
    return [text]


def _sanitizer_section(report: KernelReport) -> list[str]:
    """Clean, or each finding with the source lines it names (the raw report when none could be parsed)."""
    sanitizer = report.sanitizer
    if sanitizer is None:
        return []
    tools = ", ".join(sanitizer.tools) or "compute-sanitizer"
    runs = f" in {sanitizer.completed_runs} runs" if sanitizer.completed_runs > 1 else ""
    if sanitizer.passed:
        return [f"Sanitizer ({tools}): clean{runs}."]
    where = (
        f" (run {sanitizer.completed_runs} of {sanitizer.requested_runs})"
        if sanitizer.requested_runs > 1
        else ""
    )
    lines = [f"Sanitizer ({tools}): errors found{where}:"]
    if not sanitizer.findings:
        return [*lines, trim(sanitizer.summary)]
    for finding in sanitizer.findings[:MAX_FINDINGS]:
        reports = f" ({finding.count} reports)" if finding.count > 1 else ""
        lines.append(f"  - {finding.tool}, workload {finding.workload[:12]}: {finding.message}{reports}")
        lines += [f"      at {place}" for place in finding.places]
        if finding.thread:
            lines.append(f"      first by {finding.thread}")
        lines += [f"      {detail}" for detail in finding.details[:2]]
    rest = len(sanitizer.findings) - MAX_FINDINGS
    if rest > 0:
        lines.append(f"  ... {rest} more findings")
    return lines


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def _ncu_section(report: KernelReport, options: FeedbackOptions) -> list[str]:
    """Executed families (``instruction_evidence``) and the profile summary (``profile_in_loop``)."""
    ncu = report.ncu
    if ncu is None:
        return []
    where = f"workload {ncu.workload[:12]}" + (", cached result" if ncu.cached else "")
    if ncu.error:
        return [f"Nsight Compute ({where}): no profile: {ncu.error}"]
    lines = []
    if options.instruction_evidence:
        counted = ", ".join(f"{op} {ncu.executed_opcodes[op]:,}" for op in ncu.sass_families)
        counted = counted or "none of the tracked opcodes"
        ran = ", ".join(ncu.executed_families) or "none"
        lines.append(
            f"Executed instructions (Nsight Compute, {where}; warp instructions): {counted}. "
            f"Target families that executed: {ran}."
        )
        if ncu.not_compiled:
            lines.append(
                f"Not counted: the profile claims {', '.join(ncu.not_compiled)} executed, but the compiled SASS has none."
            )
        compiled = report.static_analysis.architecture_families if report.static_analysis else None
        idle = [name for name in compiled or [] if name not in ncu.executed_families]
        if idle:
            lines.append(f"Compiled in but never executed: {', '.join(idle)}.")
    summary = ncu.summary
    if options.profile_in_loop and summary:
        stalls = (
            ", ".join(f"{reason} {value:.2f}" for reason, value in summary.get("top_stalls") or []) or "n/a"
        )
        kernel = str(summary.get("kernel", ""))
        kernel = kernel if len(kernel) <= 60 else kernel[:57] + "..."
        lines.append(
            f"Profile (Nsight Compute, {where}, kernel {kernel}): SOL compute {_pct(summary.get('sol_compute_pct'))}, "
            f"memory {_pct(summary.get('sol_memory_pct'))}; achieved occupancy "
            f"{_pct(summary.get('achieved_occupancy_pct'))} (theoretical "
            f"{_pct(summary.get('theoretical_occupancy_pct'))}); top stalls (warps per issued instruction): {stalls}."
        )
    return lines


def _fix_notes_section(report: KernelReport) -> list[str]:
    if not report.fix_notes:
        return []
    lines = ["Fix notes that may apply (BM25 search of the notes folder):"]
    for note in report.fix_notes:
        lines.append(f"--- {note.title} ({note.name})")
        lines.append(trim(note.text, NOTE_CHARS))
    return lines


def verdict_line(
    report: KernelReport, options: FeedbackOptions | None = None, arch: str | None = None
) -> str:
    """The final line, decided from structured fields only (``options.require_architecture``: also the
    families ``arch`` calls for; ``arch`` defaults to the static analysis's target)."""
    status = report.status
    target = f"{report.target_speedup:.2f}x"
    options = options or FeedbackOptions()
    arch = arch or (report.static_analysis.target if report.static_analysis else None)
    if (
        report.target_met and options.require_architecture and arch in TARGET_FAMILIES
        and not architecture_met(report, options, arch)
    ):  # fmt: skip
        how = "executed" if options.instruction_evidence else "compiled in"
        return (
            f"VERDICT: FAST ENOUGH, ARCHITECTURE MISSING: minimum speedup {report.min_speedup:.3f}x >= target "
            f"{target}, but no {describe(TARGET_FAMILIES[arch])} was {how}; this run requires it. Use the "
            "architecture's instructions."
        )
    if status is EvaluationStatus.PASSED:
        if report.implausible:
            return (
                f"VERDICT: IMPLAUSIBLY FAST: {len(report.implausible)} workload(s) timed faster than the device's "
                "roofline allows, so the timing is not trusted and the target is not counted. Do the full work "
                "inside the timed call."
            )
        if report.target_met:
            return f"VERDICT: TARGET MET: every workload passed; minimum speedup {report.min_speedup:.3f}x >= target {target}."
        if not report.executed_on_gpu:
            return (
                "VERDICT: CORRECT (not timed on a GPU): every workload passed, but without a GPU measurement "
                f"the target {target} cannot be met here. Keep the kernel correct and make it fast."
            )
        shown = "n/a" if report.min_speedup is None else f"{report.min_speedup:.3f}x"
        return f"VERDICT: CORRECT BUT TOO SLOW: minimum speedup {shown} < target {target}. Make the kernel faster."
    if status is NotEvaluated.NOT_EXECUTED:
        return (
            "VERDICT: NOT EXECUTED: the kernel built and was analysed statically, but no GPU ran it, so its "
            "correctness and speed are unknown."
        )
    if status is NotEvaluated.SANITIZER_FAILED:
        return "VERDICT: REJECTED: compute-sanitizer reported errors; fix the memory or synchronization bug."
    if status is EvaluationStatus.COMPILE_ERROR:
        return "VERDICT: COMPILE ERROR: the kernel did not build; fix the errors in the compile log."
    if status is NotEvaluated.INFRASTRUCTURE_ERROR:
        return f"VERDICT: NOT EVALUATED: the evaluation service failed ({report.error}); this is not a kernel verdict."
    failed = sum(1 for r in report.workloads if r.status.value != "PASSED")
    return (
        f"VERDICT: INCORRECT: {failed} of {len(report.workloads)} workloads failed (first: {status.value}). "
        "Fix correctness before speed."
    )


def format_feedback(
    report: KernelReport,
    *,
    turn: int | None = None,
    options: FeedbackOptions | None = None,
    arch: str | None = None,
) -> str:
    """The feedback message for the model: header, workloads, analysis, architecture warning, sanitizer,
    Nsight Compute, service notes, fix notes, verdict line. ``options``: the run's feedback options (default
    :class:`FeedbackOptions`); ``arch``: the task's target (default: the static analysis's)."""
    options = options or FeedbackOptions()
    header = f"Evaluation of your kernel ({report.language}, definition {report.definition})"
    if turn is not None:
        header += f", turn {turn}"
    lines = [header + f": {report.status.value}"]
    lines += _workload_section(report)
    lines += _analysis_section(report)
    lines += _architecture_warning(report, options)
    lines += _sanitizer_section(report)
    lines += _ncu_section(report, options)
    if report.notes.strip():
        lines.append("Notes: " + trim(report.notes, 600))
    lines += _fix_notes_section(report)
    lines.append(verdict_line(report, options, arch))
    return "\n".join(lines)
