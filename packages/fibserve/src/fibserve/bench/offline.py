"""Offline evaluation (``fibserve evaluate``): look up a definition and workloads, evaluate, print a summary.

No server is involved: the command builds one :class:`~fibserve.bench.Evaluator` for the requested device and
prints the :class:`~fibserve.bench.EvaluationReport` as a rich table (or as JSON, the same object a program
gets from the Python API).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from fibserve.datasets import load_trace_set
from fibserve.static_analysis import AnalysisOutcome, AnalysisUnavailable
from fibserve.trace import Comparisons, Definition, Performance, Solution, TraceSet, Workload

from .device import resolve_device
from .report import EvaluationReport


class LookupProblem(ValueError):
    """The request names something that does not exist (a usage error, exit code 2)."""


def find_definition(trace_set: TraceSet, name: str) -> Definition:
    """The definition ``name`` of ``trace_set``, or a :class:`LookupProblem` a newcomer can act on.

    The close matches come from :class:`fibserve.datasets.catalog.Catalog`, the server's lookup (difflib,
    cutoff 0.6), so ``fibserve check``, ``fibserve evaluate`` and ``POST /evaluate`` suggest the same names.

    Raises:
        LookupProblem: unknown name; the message suggests close matches and says how to list every name.
    """
    from fibserve.datasets.catalog import Catalog, NotFound

    try:
        return Catalog(trace_set).definition(name)
    except NotFound as exc:
        quoted = [repr(match) for match in exc.close_matches]
        if len(quoted) > 1:
            quoted = [", ".join(quoted[:-1]), quoted[-1]]
        suggestion = f"; did you mean {' or '.join(quoted)}?" if quoted else ""
        raise LookupProblem(
            f"unknown definition {name!r}{suggestion} ({len(trace_set.definitions)} definitions; "
            "list them with `fibserve definitions`)"
        ) from None


def select(
    roots: Sequence[str | Path], definition: str, workload: str | None, *, legacy: bool = False
) -> tuple[Definition, list[Workload], list[Path], Solution | None]:
    """The definition, the chosen workloads, the trace-set roots and the definition's baseline Solution.

    Args:
        roots: trace-set roots; empty means ``$DATASET_ROOTS`` or the bundled default set.
        definition: definition name.
        workload: a workload uuid (a unique prefix is accepted), ``all`` or None (all).
        legacy: load the roots through the 2025-format migration (:mod:`fibserve.trace.legacy`).

    Raises:
        LookupProblem: unknown definition or workload, or a definition without workloads.
    """
    ts = (
        TraceSet.load(list(roots), migrate_legacy=legacy, strict=False)
        if roots
        else load_trace_set(migrate_legacy=legacy, strict=False)
    )
    chosen_definition = find_definition(ts, definition)
    workloads = ts.workloads_for(definition)
    if workload and workload != "all":
        chosen = [w for w in workloads if w.uuid == workload] or [
            w for w in workloads if w.uuid.startswith(workload)
        ]
        if len(chosen) != 1:
            uuids = ", ".join(w.uuid for w in workloads[:10])
            what = "no" if not chosen else "more than one"
            raise LookupProblem(f"{what} workload of {definition!r} matches {workload!r}; workloads: {uuids}")
        workloads = chosen
    if not workloads:
        raise LookupProblem(f"definition {definition!r} has no workloads in these trace sets")
    return chosen_definition, workloads, list(ts.roots), ts.baseline_for(definition)


def run_offline(
    definition: Definition,
    solution: Solution,
    workloads: list[Workload],
    *,
    roots: Sequence[Path],
    device: str | None,
    overrides: dict[str, Any] | None,
    config_path: str | None,
    console: Console | None,
    baseline: Solution | None = None,
) -> EvaluationReport:
    """Evaluate with a fresh Evaluator (no warm spare: one candidate) against ``baseline``, showing progress
    on ``console``.

    Raises:
        DeviceProblem: ``device`` is malformed or not visible (see :func:`fibserve.bench.device.resolve_device`).
    """
    from .evaluator import Evaluator

    device = resolve_device(device)
    with Evaluator(device, warm_spare=False, roots=roots, config_path=config_path) as evaluator:
        if console is None:
            return evaluator.evaluate(definition, solution, workloads, overrides=overrides, baseline=baseline)
        columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
        with Progress(*columns, console=console, transient=True) as bar:
            task = bar.add_task(f"building {solution.name}", total=len(workloads))

            def progress(event: str, info: dict[str, Any]) -> None:
                if event == "workload":
                    bar.update(
                        task, description=f"workload {info['index'] + 1}/{info['total']} {info['uuid'][:8]}"
                    )
                elif event == "phase":
                    bar.update(task, description=f"{info['uuid'][:8]}: {info['phase']}")
                elif event == "result":
                    bar.advance(task)

            return evaluator.evaluate(
                definition, solution, workloads, overrides=overrides, progress=progress, baseline=baseline
            )


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
            f"{report.solution} on {report.definition} ({report.device.name}, sandbox {report.sandbox})"
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
    from fibserve.static_analysis import print_analysis

    print_analysis(analysis, console)
    console.print()


def exit_code(report: EvaluationReport) -> int:
    """0 every workload PASSED on the device; 1 the candidate failed somewhere; 2 a task-level error;
    3 nothing failed but the candidate was not executed (CUDA without a GPU)."""
    if report.task_error:
        return 2
    if any(s is not None and s.value != "PASSED" for s in report.statuses):
        return 1
    return 0 if report.all_passed else 3
