"""The quickstart's result (``quickstart-result.json``): built from a run directory's files, and printed for people.

:func:`build_result` reads only files (plan.json, summary.json, the trajectory, the per-turn evaluator results,
``success/``, ``logs/``), so `ptxbench quickstart --report DIR` rebuilds exactly what `--run` printed. Three facts
are kept apart, so none is read as another: *the runner completed* (the loop ended by its own rules), *a kernel was
correct* (every workload PASSED; unknown when CUDA ran without a GPU), and *the target was achieved* (a correct
kernel at or above the target speedup, timed on a GPU).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..demo import DEMO_MODEL_NAMES
from ..environment.report import KernelReport, NotEvaluated
from ..feedback import trim
from ..runs.directory import RunLayout, load_plan, read_evaluation
from ..runs.summary import RunSummary, kernel_correctness, read_summary
from .settings import QuickstartError

RESULT_SCHEMA = "ptxbench.quickstart/4"
"""/4: the counts of kernels (generated, compiled, correct, not executed, target achieved) are one object,
``kernel_counts`` (/3 had them at the top level, where ``correct: 0`` sat beside ``kernel_correct: null``); a run
stopped by Ctrl-C has exit status ``Interrupted`` and ``runner.turns`` counts the turns its trajectory holds.
/3: ``kernel_correct`` is also null when no kernel was evaluated and the runner did not complete (an outage or
a refusal; /2 wrote false there). /2: ``turns[].correct`` is null for a kernel that was not executed (/1 wrote false) and ``kernel_correct``
(true, false or null) is the "A kernel was correct" verdict people see."""
FEEDBACK_EXCERPT_CHARS = 1500
"""Longest final-feedback excerpt kept in the result (characters; head and tail kept)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, ser_json_inf_nan="strings")


class ServiceInfo(_Model):
    """The FIBServe the run used."""

    kind: Literal["embedded", "remote", "unknown"] = "unknown"
    """``embedded`` (started by the quickstart on this machine) or ``remote`` (``SERVICE_URL``)."""
    url: str | None = None
    """The remote URL (never a token); null for an embedded service."""
    lanes: list[str] = Field(default_factory=list)
    """Worker lanes from ``/health`` (``cuda:0``... or ``cpu``)."""
    gpu: bool = False
    """Whether any lane is a GPU (False = CPU mode: CUDA is compiled and analysed only)."""
    hardware: list[str] = Field(default_factory=list)
    """Hardware names recorded in the evaluated traces (e.g. ``NVIDIA H200``)."""
    version: str | None = None
    """fibserve version reported by the service."""


class QuickstartTurn(_Model):
    """One evaluated turn as the quickstart's result shows it, from its evaluator result (a row of its turn table;
    the per-turn table of experiments and reports is :class:`mini_ptx_agent.runs.turns.TurnRow`)."""

    turn: int
    status: str
    """The evaluator's verdict (PASSED, NOT_EXECUTED, COMPILE_ERROR, ...) or FORMAT_ERROR."""
    compiled: bool | None = None
    correct: bool | None = False
    """Passed every workload; null (unknown) when the kernel was not executed (``NOT_EXECUTED``, no GPU lane)."""
    min_speedup: float | None = None
    """Minimum speedup over the workloads (x); GPU timings only when ``executed_on_gpu``."""
    latency_ms: float | None = None
    """Candidate median latency of the slowest workload (ms)."""
    reference_latency_ms: float | None = None
    executed_on_gpu: bool = False
    target_met: bool = False
    ptx_families: list[str] = Field(default_factory=list)
    sass_families: list[str] = Field(default_factory=list)
    evaluation: str | None = None
    """Path of the evaluator result, relative to the run directory."""


class TrajectoryPaths(_Model):
    """Files of one trajectory, relative to the run directory (the result's ``experiments`` list, named so in
    ``ptxbench.quickstart/3``)."""

    id: str
    trajectory: str
    kernel: str | None
    versions: list[str] = Field(default_factory=list)
    """``success/exp_000/kernel_vN.*``: one per correct turn."""
    evaluations: list[str] = Field(default_factory=list)


class KernelCounts(_Model):
    """How many of the run's kernels came to what (counts, not verdicts: ``kernel_correct`` is the verdict)."""

    generated: int = 0
    """Turns whose reply held a kernel that was sent for evaluation."""
    compiled: int = 0
    """Kernels that built (CUDA: nvcc and static analysis succeeded)."""
    correct: int = 0
    """Kernels that passed every workload (0 is not "wrong" when they were not executed: see
    ``not_executed``)."""
    not_executed: int = 0
    """Kernels built and analysed but never run (CUDA without a GPU)."""
    target_achieved: int = 0
    """Correct kernels timed on a GPU at or above the target speedup."""


class QuickstartResult(_Model):
    """Everything a person or a program needs to judge one quickstart run (``quickstart-result.json``)."""

    schema_version: Literal["ptxbench.quickstart/4"] = RESULT_SCHEMA
    run_id: str
    created_at: str
    model: str
    demo: bool
    """True in demo mode (no model configured): the kernels, if any turn was made, are the bundled demo's
    replay, not a model's output. Nothing was replayed when ``runner.turns`` is 0 (see :func:`replayed`)."""
    language: str
    definition: str
    workloads: list[str]
    target_speedup: float
    num_turns: int
    service: ServiceInfo
    runner: dict[str, Any]
    """``experiments``, ``completed``, ``infrastructure_errors``, ``exit_status``, ``turns``, ``elapsed_s``."""
    runner_completed: bool
    kernel_counts: KernelCounts = Field(default_factory=KernelCounts)
    kernel_correct: bool | None = None
    """The "A kernel was correct" verdict: true when one passed, null (unknown) when none passed and some were
    not executed (no GPU lane) or when none was evaluated because the run stopped early (service or model API
    down, refused), false otherwise (every evaluated kernel failed, or the runner completed without a kernel)."""
    best_speedup: float | None = None
    best_turn: int | None = None
    best_on_gpu: bool = False
    turns: list[QuickstartTurn] = Field(default_factory=list)
    experiments: list[TrajectoryPaths] = Field(default_factory=list)
    evaluator_logs: list[str] = Field(default_factory=list)
    final_feedback_excerpt: str = ""
    exit_message: str = ""
    notes: list[str] = Field(default_factory=list)
    """Plain statements for people (demo, CPU mode, refusals)."""


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _turn_row(turn: int, report: KernelReport, evaluation: str) -> QuickstartTurn:
    analysis = report.static_analysis
    latencies = [w.latency_ms for w in report.workloads if w.latency_ms is not None]
    references = [w.reference_latency_ms for w in report.workloads if w.reference_latency_ms is not None]
    return QuickstartTurn(
        turn=turn,
        status=report.status.value,
        compiled=analysis.compiled if analysis else None,
        correct=None if report.status == NotEvaluated.NOT_EXECUTED else report.all_passed,
        min_speedup=report.min_speedup,
        latency_ms=max(latencies) if latencies else None,
        reference_latency_ms=max(references) if references else None,
        executed_on_gpu=report.executed_on_gpu,
        target_met=report.target_met,
        ptx_families=list(analysis.ptx_families) if analysis else [],
        sass_families=list(analysis.sass_families) if analysis else [],
        evaluation=evaluation,
    )


def _hardware(reports: list[KernelReport]) -> list[str]:
    return sorted({w.hardware for report in reports for w in report.workloads if w.hardware})


def _last_feedback(trajectory: dict[str, Any] | None) -> str:
    for message in reversed((trajectory or {}).get("messages") or []):
        if message.get("role") == "user" and (message.get("extra") or {}).get("ptxbench"):
            return trim(str(message.get("content") or ""), FEEDBACK_EXCERPT_CHARS)
    return ""


def _turns_made(summary: RunSummary | None, trajectory: dict[str, Any] | None) -> int:
    """Model calls made: the summary's count, else (a run killed before it wrote one) the trajectory's."""
    if summary is not None:
        return summary.turns
    turns = ((trajectory or {}).get("info") or {}).get("ptxbench", {}).get("turns")
    return turns if isinstance(turns, int) else 0


def _evaluated_turns(layout: RunLayout) -> list[tuple[int, Path, KernelReport]]:
    """Each evaluated turn's number, file and KernelReport, in turn order.

    Raises:
        QuickstartError: a KernelReport file does not validate (the message names it).
    """
    turns = []
    for path in layout.evaluation_paths():
        report = read_evaluation(path)
        if report is None:
            raise QuickstartError(f"{path} is not a readable KernelReport (ptxbench.eval.v1)")
        turns.append((layout.evaluation_turn(path), path, report))
    return turns


def build_result(run_dir: Path) -> QuickstartResult:
    """Rebuild the quickstart result of ``run_dir`` from its files.

    Raises:
        FileNotFoundError: ``run_dir`` has no plan.json (not a run directory).
        QuickstartError: its plan.json or an evaluator result does not validate.
    """
    layout = RunLayout(run_dir)
    try:
        plan = load_plan(layout.root)
    except ValueError as exc:
        raise QuickstartError(f"{layout.plan_path} is not a run plan: {exc}") from None
    summary = read_summary(layout.root)
    trajectory = _read_json(layout.trajectory_path)
    context = _read_json(layout.quickstart_context_path) or {}
    task = plan.task
    evaluated = _evaluated_turns(layout)
    reports = [report for _, _, report in evaluated]
    rows = [_turn_row(turn, report, layout.relative(path)) for turn, path, report in evaluated]
    kernel = layout.latest_kernel()
    correct = [r for r in rows if r.correct]
    best = max(correct, key=lambda r: r.min_speedup or 0.0) if correct else None
    service = ServiceInfo.model_validate({**(context.get("service") or {}), "hardware": _hardware(reports)})
    exit_status = summary.exit_status if summary else "not finished"
    completed = bool(summary and summary.runner_completed)
    demo = bool(plan.demo or context.get("demo", plan.model in DEMO_MODEL_NAMES))
    result = QuickstartResult(
        run_id=plan.run_id,
        created_at=plan.created_at,
        model=plan.model,
        demo=demo,
        language=task.language,
        definition=task.definition,
        workloads=list(task.workloads) if isinstance(task.workloads, list) else [task.workloads],
        target_speedup=task.target_speedup,
        num_turns=plan.num_turns,
        service=service,
        runner={
            "experiments": 1,
            "completed": int(completed),
            "infrastructure_errors": int(exit_status == "InfrastructureError"),
            "exit_status": exit_status,
            "turns": _turns_made(summary, trajectory),
            "elapsed_s": summary.elapsed_s if summary else None,
        },
        runner_completed=completed,
        kernel_counts=KernelCounts(
            generated=len(rows),
            compiled=sum(1 for r in rows if r.compiled),
            correct=len(correct),
            not_executed=sum(1 for r in rows if r.status == NotEvaluated.NOT_EXECUTED),
            target_achieved=sum(1 for r in rows if r.target_met),
        ),
        kernel_correct=kernel_correctness(
            [r.turn for r in correct], [r.status for r in rows], runner_completed=completed
        ),
        best_speedup=best.min_speedup if best else None,
        best_turn=best.turn if best else None,
        best_on_gpu=bool(best and best.executed_on_gpu),
        turns=rows,
        experiments=[
            TrajectoryPaths(
                id=layout.trajectory_id,
                trajectory=layout.relative(layout.trajectory_path),
                kernel=layout.relative(kernel) if kernel else None,
                versions=[layout.relative(p) for p in layout.version_paths()],
                evaluations=[layout.relative(path) for _, path, _ in evaluated],
            )
        ],
        evaluator_logs=[layout.relative(p) for p in layout.log_paths()],
        final_feedback_excerpt=_last_feedback(trajectory),
        exit_message=str((summary.exit_message if summary else "") or context.get("refused") or ""),
    )
    result.notes = notes_for(result, refused=context.get("refused"))
    return result


def notes_for(result: QuickstartResult, *, refused: str | None = None) -> list[str]:
    """Plain statements for people about what the numbers do and do not mean."""
    notes = []
    if replayed(result):
        notes.append(
            "DEMO REPLAY: no model was configured (MODEL_NAME unset), so the bundled demo trajectory was replayed. "
            "Its kernels were written by the PTXBench authors; this is not a model's result."
        )
    elif result.demo:
        notes.append(
            "Demo mode (MODEL_NAME unset): the run stopped before its first turn, so no demo kernel was evaluated."
        )
    if refused:
        notes.append(f"Not run: {refused}")
    counts = result.kernel_counts
    if not result.service.gpu and result.language == "cuda" and counts.generated:
        notes.append(
            "CPU mode (no GPU lane): the CUDA kernels were compiled with nvcc and analysed (PTX/SASS, ptxas "
            "resources) but NOT EXECUTED, so their correctness and speed are unknown and the target cannot be met."
        )
    if not result.service.gpu and result.language == "triton" and counts.generated:
        notes.append(
            "CPU mode (no GPU lane): Triton kernels ran under the interpreter; CPU timings are not speedups."
        )
    return notes


def replayed(result: QuickstartResult) -> bool:
    """Whether the bundled demo trajectory was actually replayed (demo mode and at least one turn was made)."""
    return result.demo and (int(result.runner.get("turns") or 0) > 0 or bool(result.turns))


def write_result(run_dir: Path, result: QuickstartResult) -> Path:
    """Write ``quickstart-result.json`` into ``run_dir``; returns its path."""
    from ..trajectory import write_json

    path = RunLayout(run_dir).quickstart_result_path
    write_json(path, result.model_dump(mode="json"))
    return path


def rebuild_result(run_dir: Path) -> QuickstartResult:
    """Rebuild (and rewrite) ``quickstart-result.json`` of ``run_dir`` from its files; returns the result.

    Raises:
        FileNotFoundError: not a run directory.
    """
    result = build_result(run_dir)
    write_result(run_dir, result)
    return result


def _yes_no(value: bool) -> str:
    return "[green]yes[/]" if value else "[red]no[/]"


def _speed(value: float | None, on_gpu: bool) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}x" if on_gpu else f"{value:.3f}x (not GPU)"


def _verdicts(result: QuickstartResult) -> list[tuple[str, str]]:
    runner, counts = result.runner, result.kernel_counts
    ran = f"{runner['exit_status']} after {runner['turns']} of {result.num_turns} turns"
    if result.kernel_correct:
        correct = f"{_yes_no(True)}: {counts.correct} of {counts.generated} kernels passed every workload"
    elif result.kernel_correct is None and not counts.generated:
        correct = "[yellow]unknown[/]: no kernel was evaluated (the run stopped first; not counted against the model)"
    elif result.kernel_correct is None:
        correct = (
            f"[yellow]unknown[/]: {counts.not_executed} of {counts.generated} kernels compiled and analysed, "
            "not executed (no GPU)"
        )
    elif not counts.generated:
        correct = f"{_yes_no(False)}: no kernel was evaluated"
    else:
        correct = f"{_yes_no(False)}: none of {counts.generated} kernels passed"
    if counts.target_achieved:
        target = f"{_yes_no(True)}: {result.best_speedup:.3f}x >= {result.target_speedup:.2f}x at turn {result.best_turn}"
    elif not counts.generated:
        target = f"{_yes_no(False)}: no kernel was evaluated"
    elif not result.service.gpu:
        target = (
            f"{_yes_no(False)}: needs a GPU (target {result.target_speedup:.2f}x is never met in CPU mode)"
        )
    elif result.best_speedup is not None:
        target = f"{_yes_no(False)}: best {result.best_speedup:.3f}x < {result.target_speedup:.2f}x (turn {result.best_turn})"
    else:
        target = f"{_yes_no(False)}: no correct kernel"
    return [
        ("Runner completed", f"{_yes_no(result.runner_completed)} ({ran})"),
        ("A kernel was correct", correct),
        ("Target achieved", target),
    ]


def resumable(result: QuickstartResult) -> bool:
    """Whether ``--resume`` can continue the run: it stopped before its rules ended it (Ctrl-C, a kill, an
    outage), and was not refused."""
    return not result.runner_completed and result.runner.get("exit_status") != "Refused"


def render(result: QuickstartResult, run_dir: Path, console: Any | None = None) -> None:
    """Print the human summary of ``result`` (a turn table, then the three verdicts and the notes)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console(highlight=False)
    if replayed(result):
        console.print(
            "[bold black on yellow] DEMO REPLAY - NOT A MODEL'S RESULT [/] kernels by the PTXBench authors, "
            "replayed because MODEL_NAME is unset"
        )
    service = result.service
    where = ", ".join(service.lanes) or "?"
    console.print(
        f"[bold]quickstart[/] {result.definition} ({result.language}), workload "
        f"{', '.join(w[:8] for w in result.workloads)}, target {result.target_speedup:.2f}x, "
        f"model {escape(result.model)}"
    )
    url = f" {escape(service.url)}" if service.url else ""
    hardware = f"; {escape(', '.join(service.hardware))}" if service.hardware else ""
    cpu = "" if service.gpu else " [yellow](CPU mode)[/]"
    console.print(f"service: {service.kind}{url}; lanes {escape(where)}{hardware}{cpu}")
    if result.turns:
        table = Table(show_edge=False, pad_edge=False)
        for column in ("turn", "status", "speedup", "kernel ms", "ref ms", "SASS highlights"):
            table.add_column(column)
        for row in result.turns:
            table.add_row(
                str(row.turn),
                row.status,
                _speed(row.min_speedup, row.executed_on_gpu),
                f"{row.latency_ms:.3f}" if row.latency_ms is not None else "-",
                f"{row.reference_latency_ms:.3f}" if row.reference_latency_ms is not None else "-",
                ", ".join(row.sass_families) or "-",
            )
        console.print(table)
    for label, text in _verdicts(result):
        console.print(f"  [bold]{label + ':':<22}[/] {text}")
    for note in result.notes:
        console.print(f"  [yellow]note:[/] {escape(note)}")
    if (
        result.exit_message
        and not result.runner_completed
        and not any(result.exit_message in n for n in result.notes)
    ):
        console.print(f"  [red]why:[/] {escape(result.exit_message)}")
    if resumable(result):
        console.print(f"  continue with: ptxbench quickstart --resume {run_dir}", markup=False)
    console.print(f"run directory: {run_dir}", markup=False)
