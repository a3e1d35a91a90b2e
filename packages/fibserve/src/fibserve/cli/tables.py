"""What the ``fibserve`` commands print: an evaluation report as a table, a static analysis as ``fibserve check``
shows it. The library returns typed results; only the commands turn them into text for a person.
"""

from __future__ import annotations

import math

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fibserve.analysis.report import Analysis, AnalysisOutcome, AnalysisUnavailable
from fibserve.bench.report import EvaluationReport
from fibserve.trace import Comparisons, Performance

DISASSEMBLER_WARNING = "warning: SASS disassembled by cuobjdump"
"""How the analysis's note that another CUDA release's cuobjdump read the SASS begins
(:func:`fibserve.static_analysis.check`)."""

_printed_once: set[str] = set()
"""Warnings :func:`print_analysis` has printed in this process (the toolchain's, said once, not per kernel)."""


def _num(value: float | None, fmt: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return format(value, fmt)


def print_report(report: EvaluationReport, console: Console) -> None:
    """The static analysis of a CUDA candidate (rendered as ``fibserve check`` renders it), then a summary
    table (one row per workload), then notes and errors."""
    _print_analysis(report.analysis, console)
    table = Table(
        title=escape(
            f"{report.solution} on {report.definition} ({report.device_info.name}, sandbox {report.sandbox})"
        )
    )
    axes_of = {
        t.workload.uuid: " ".join(f"{k}={v}" for k, v in t.workload.axes.items()) for t in report.traces
    }
    # the row's identity stays whole (the width of its longest value, up to 24); the other columns fold
    # rather than cut: a narrow terminal must not lose digits of an error or a status
    table.add_column("workload", no_wrap=True, min_width=8)
    table.add_column("axes", overflow="fold", min_width=min(24, max(map(len, axes_of.values()), default=4)))
    for column in (
        "status",
        "ms",
        "base ms",
        "speedup",
        "vs ref",
        "roofline",
        "abs err",
        "rel err",
        "matched",
    ):
        table.add_column(column, justify="left" if column == "status" else "right", overflow="fold")
    for trace in report.traces:
        ev = trace.evaluation
        axes = escape(axes_of[trace.workload.uuid])
        if ev is None:
            error = report.workload_errors.get(trace.workload.uuid)
            status = "[red]TASK ERROR[/red]" if error else "[yellow]NOT EXECUTED[/yellow]"
            table.add_row(escape(trace.workload.uuid[:8]), axes, status, *["-"] * 8)
            continue
        color = "green" if ev.status.value == "PASSED" else "red"
        perf, corr = ev.performance or Performance(), ev.correctness
        seen = Comparisons.of(perf)
        vs_reference = seen.vs_reference.speedup if seen.vs_reference else None
        table.add_row(
            escape(trace.workload.uuid[:8]),
            axes,
            f"[{color}]{ev.status.value}[/{color}]",
            _num(perf.latency_ms, ".4f"),
            _num(perf.reference_latency_ms, ".4f"),
            "-" if perf.speedup_factor is None else _num(perf.speedup_factor, ".3f") + "x",
            "-" if vs_reference is None else _num(vs_reference, ".3g") + "x",
            "-" if seen.roofline is None else f"{seen.roofline.fraction:.0%}",
            _num(corr.max_absolute_error, ".3g") if corr else "-",
            _num(corr.max_relative_error, ".3g") if corr else "-",
            _num((corr.extra or {}).get("matched_ratio"), ".4f") if corr else "-",
        )
    console.print(table)
    for line in basis_lines(report):
        console.print(line, markup=False, highlight=False)
    # A kernel that fails the same way on every workload (a Triton error raised at launch) prints its log once.
    failures: dict[str, list[str]] = {}
    for trace in report.traces:
        ev = trace.evaluation
        if ev is not None and ev.status.value != "PASSED" and ev.log:
            failures.setdefault(ev.log.strip(), []).append(f"{trace.workload.uuid[:8]} {ev.status.value}")
    for log, workloads in failures.items():
        console.print(f"[bold]{escape(workloads[0])}[/bold]: {escape(log[:1500])}", highlight=False)
        if len(workloads) > 1:
            console.print(
                f"same error on {len(workloads) - 1} more workloads: {', '.join(workloads[1:])}", markup=False
            )
    for note in report.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    if report.task_error:
        console.print(f"[red]task error:[/red] {escape(report.task_error)}", highlight=False)
    passed = sum(1 for s in report.statuses if s is not None and s.value == "PASSED")
    console.print(f"{passed}/{len(report.traces)} workloads passed; executed: {report.executed}")


def basis_lines(report: EvaluationReport) -> list[str]:
    """What "base ms", "speedup", "vs ref" and "roofline" are measured against, once per report (from the
    first timed trace): the baseline Solution and its description, or why there is none."""
    timed = [Comparisons.of(t.evaluation.performance) for t in report.traces if t.evaluation is not None]
    seen = next((c for c in timed if c.speedup_basis is not None), None)
    if seen is None:
        return []
    if seen.baseline is not None:
        lines = [f"speedup: against the baseline {seen.baseline.solution}: {seen.baseline.description}"]
    else:
        lines = [f"speedup: against the reference ({seen.no_baseline})"]
    reasons = {c.vs_reference.reason for c in timed if c.vs_reference is not None and c.vs_reference.reason}
    lines += [f"vs ref: {reason}" for reason in sorted(reasons)]
    if seen.roofline is not None:
        lines.append(
            f"roofline: floor_ms / ms on the {seen.roofline.device_model} ({seen.roofline.peak_tflops:g} TFLOP/s, "
            f"{seen.roofline.peak_tb_s:g} TB/s: {seen.roofline.peak_source})"
        )
    return lines


def _print_analysis(analysis: AnalysisOutcome | None, console: Console) -> None:
    """``report.analysis`` as ``fibserve check`` prints it, or the one line saying why there is none."""
    if isinstance(analysis, AnalysisUnavailable):
        console.print(f"static analysis: {analysis.error}", markup=False, highlight=False)
        return
    if analysis is None:
        return
    print_analysis(analysis, console)
    console.print()


def print_analysis(analysis: Analysis, console: object | None = None) -> None:
    """Human-readable rendering of ``analysis`` with rich (what ``fibserve check`` prints)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    out = console if isinstance(console, Console) else Console(width=max(Console().width, 140))
    style = "green" if analysis.ok else "red"
    target = f" for {analysis.arch}" if analysis.arch else ""
    out.print(
        f"[bold]{escape(analysis.solution)}[/] ({analysis.language}{target}): [bold {style}]{analysis.status}[/]"
    )
    for violation in analysis.policy:
        where = escape(f"{violation.file}:{violation.line}: {violation.message}")
        out.print(f"  [red]{escape(violation.rule)}[/] {where}", highlight=False)
    for problem in analysis.abi:
        out.print(f"  [yellow]abi[/] {escape(problem)}", highlight=False)
    build = analysis.build
    if build is not None and not build.ok:
        out.print(f"[bold]build {build.status.value}[/]:")
        out.print(build.log, markup=False, highlight=False)
    if analysis.kernels:
        table = Table(title="kernels", show_lines=False)
        # ptxas reports static shared memory only; dynamic shared memory (TMA rings) is set at launch
        for column in ("kernel", "regs", "static smem B", "spill B", "PTX families", "SASS"):
            table.add_column(column)
        for kernel in analysis.kernels:
            res = kernel.resources
            spills = f"{res.spill_store_bytes}/{res.spill_load_bytes}" if res and not res.from_cubin else "-"
            table.add_row(
                escape(kernel.display_name[:60]),
                str(res.registers) if res and res.registers is not None else "-",
                str(res.shared_bytes) if res else "-",
                spills,
                ", ".join(f"{k} {v}" for k, v in sorted(kernel.ptx_families.items())) or "-",
                ", ".join(f"{k} {v}" for k, v in kernel.sass_notable.items()) or "-",
            )
        out.print(table)
    if analysis.sass_tool is not None:
        out.print(
            f"[dim]SASS from {escape(analysis.sass_tool)} ({escape(analysis.sass_tool_version or '')})[/]"
        )
    if analysis.verdict is not None:
        out.print(f"[bold]verdict[/] {escape(analysis.verdict.summary)}")
        for note in analysis.verdict.notes:
            out.print(f"  note: {note}", markup=False)
    for note in analysis.notes:
        if note.startswith(
            DISASSEMBLER_WARNING
        ):  # the same for every kernel this machine builds: once per process
            if note in _printed_once:
                continue
            _printed_once.add(note)
        out.print(f"[dim]{escape(note)}[/]")
    timings = ", ".join(f"{k} {v:.0f} ms" for k, v in analysis.timings_ms.items())
    cached = " (build cached)" if build is not None and build.cached else ""
    out.print(f"[dim]timings: {timings}{cached}[/]")
