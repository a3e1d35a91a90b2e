"""What ``fibserve evaluate`` does around the evaluator: look up the definition and workloads, evaluate with a
progress bar, and turn the report into the command's exit status.

No server is involved: the command builds one :class:`~fibserve.bench.Evaluator` for the requested device;
:mod:`fibserve.cli.tables` prints the :class:`~fibserve.bench.EvaluationReport` (or ``--json`` the same object
a program gets from the Python API).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from fibserve.bench.device import resolve_device
from fibserve.bench.report import EvaluationReport
from fibserve.datasets import load_trace_set
from fibserve.trace import Definition, Solution, TraceSet, Workload
from fibserve.trace.validate import legacy_hints


class LookupProblem(ValueError):
    """The request names something that does not exist (a usage error, exit code 2)."""


def find_definition(trace_set: TraceSet, name: str, *, legacy: bool = False) -> Definition:
    """The definition ``name`` of ``trace_set``, or a :class:`LookupProblem` a newcomer can act on.

    The close matches come from :class:`fibserve.datasets.catalog.Catalog`, the server's lookup (difflib,
    cutoff 0.6), so ``fibserve check``, ``fibserve evaluate`` and ``POST /evaluate`` suggest the same names.
    Without ``legacy``, a root that looks like the 2025 format (whose definitions then do not load) is named
    with the hint to pass ``--legacy``.

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
        hints = [] if legacy else legacy_hints(trace_set.roots)
        raise LookupProblem(
            f"unknown definition {name!r}{suggestion} ({len(trace_set.definitions)} definitions; "
            "list them with `fibserve definitions`)" + "".join(f"; {hint}" for hint in hints)
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
    chosen_definition = find_definition(ts, definition, legacy=legacy)
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
    from fibserve.bench.evaluator import Evaluator

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


def exit_code(report: EvaluationReport) -> int:
    """0 every workload PASSED on the device; 1 the candidate failed somewhere; 2 a task-level error;
    3 nothing failed but the candidate was not executed (CUDA without a GPU)."""
    if report.task_error:
        return 2
    if any(s is not None and s.value != "PASSED" for s in report.statuses):
        return 1
    return 0 if report.all_passed else 3
