"""What each pane of the trajectory screen shows for one turn, as documents (no widgets here).

- the turn list's label: number, status, speedup, and the markers ``DEMO`` (a demo replay) and ``⚑n`` (n
  evaluator notes on this turn's result);
- the reply, its reasoning collapsed to one line unless shown;
- the kernel (highlighted) or its diff against the previous turn's kernel;
- the feedback the model got (or the exit message);
- the evaluation: the evaluator's notes first, the verdict, one line per workload, the failing logs;
- the analysis: PTX/SASS families, the target's families, resources, policy, compile log, sanitizer, Nsight.
"""

from __future__ import annotations

from rich.text import Text

from ..architecture import TARGET_FAMILIES, has_target_families
from ..environment.report import KernelReport, WorkloadResult
from .highlight import CodeDocument, diff_lines
from .readers.trajectory import TrajectoryData, Turn
from .text_pane import Document, Lines

STATUS_STYLES = {"PASSED": "green", "NOT_EXECUTED": "yellow", "FORMAT_ERROR": "yellow", "NO_FEEDBACK": "dim"}
"""Status colours (red for any other: a failure)."""

REASONING_LINE = "▸ reasoning"
"""The first words of the collapsed-reasoning line (clicking it, or ``r``, shows the reasoning)."""


def status_text(status: str, width: int = 0) -> Text:
    """A status in its colour, padded to ``width`` cells."""
    return Text(f"{status:<{width}}", style=STATUS_STYLES.get(status, "red"))


def _speedup(value: float | None, on_gpu: bool) -> str:
    if value is None:
        return ""
    return f"{value:.3f}x" + ("" if on_gpu else " cpu")


def turn_label(data: TrajectoryData, turn: Turn, notes: int | None) -> Text:
    """One row of the turn list; ``notes``: how many evaluator notes the turn has (None: not read yet)."""
    label = Text(f"{turn.number:>3} ")
    label.append_text(status_text(turn.status, 19))
    label.append(f" {_speedup(turn.min_speedup, turn.executed_on_gpu):>9}")
    if turn.target_met:
        label.append(" ★", style="bold green")
    if notes:
        label.append(f" ⚑{notes}", style="bold yellow")
    if data.demo:
        label.append(" DEMO", style="bold magenta")
    return label


def header(data: TrajectoryData) -> Text:
    """The line above the panes: what ran, how it ended, and the demo flag."""
    task = data.task
    parts = [
        str(data.run_dir.name if data.run_dir else data.path.name),
        task.definition if task else "definition unknown",
        f"{data.language} {task.arch}" if task else data.language,
        f"model {data.model}",
    ]
    if data.plan is not None:
        parts.append(f"prompt {data.plan.prompt_tag}")
    if task is not None:
        parts.append(f"target {task.target_speedup:g}x")
    parts.append(data.exit_status or "running or stopped")
    text = Text("  ·  ".join(parts))
    if data.demo:
        text.append(
            "   DEMO REPLAY: kernels by the PTXBench authors, not a model's result", style="bold magenta"
        )
    for problem in data.problems:
        text.append(f"\n{problem}", style="yellow")
    return text


def reply_document(data: TrajectoryData, turn: Turn, *, reasoning: bool) -> Lines:
    """The reply: a line of what the endpoint reported, the reasoning (collapsed unless ``reasoning``), the text."""
    reply = data.reply(turn)
    facts = [f"turn {turn.number}", f"{len(reply.content):,} characters"]
    if reply.tokens_in is not None or reply.tokens_out is not None:
        facts.append(f"tokens in {reply.tokens_in or 0:,} / out {reply.tokens_out or 0:,}")
    if reply.cost_usd is not None:
        facts.append(f"${reply.cost_usd:.4f}")
    if reply.latency_s is not None:
        facts.append(f"{reply.latency_s:.1f} s")
    lines: list[str | Text] = [Text(" · ".join(facts), style="dim")]
    if data.demo:
        lines.append(
            Text("DEMO REPLAY: written by the PTXBench authors, not by a model", style="bold magenta")
        )
    if reply.reasoning:
        if reasoning:
            lines.append(Text("▾ reasoning (r: collapse)", style="bold cyan"))
            lines += [Text(line, style="italic dim") for line in reply.reasoning.splitlines()]
            lines.append(Text("▴ end of reasoning", style="bold cyan"))
        else:
            size = f"{len(reply.reasoning):,} characters"
            lines.append(
                Text(f"{REASONING_LINE} ({size}, collapsed; r or a click shows it)", style="bold cyan")
            )
    lines.append("")
    lines += reply.content.splitlines()
    return Lines(lines)


def kernel_document(data: TrajectoryData, turn: Turn, *, diff: bool) -> tuple[Document, str]:
    """The kernel of ``turn`` highlighted, or (``diff``) its diff against the previous kernel; and a title."""
    source = data.kernel(turn)
    if source is None:
        return Lines(
            [Text(f"turn {turn.number} sent no kernel ({turn.status})", style="yellow")]
        ), "no kernel"
    if not diff:
        name = data.task.entry_file if data.task else "kernel"
        return CodeDocument(
            source, data.language
        ), f"{name} · turn {turn.number} · {len(source.splitlines())} lines"
    previous = data.previous_kernel(turn)
    if previous is None:
        return Lines(
            [Text("the first kernel of the trajectory: nothing to compare with", style="yellow")]
        ), "diff"
    lines = data.diff(turn) or []
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    title = f"diff turn {previous[0].number} → {turn.number} · +{added} −{removed}"
    return Lines(
        diff_lines(lines) or [Text("the same kernel as turn " + str(previous[0].number), style="dim")]
    ), title


def feedback_document(data: TrajectoryData, turn: Turn) -> Lines:
    """What the model got after this turn, or why it got nothing."""
    text = data.feedback(turn)
    if not text:
        return Lines([Text("no feedback: the run stopped while this reply was evaluated", style="yellow")])
    return Lines.of_text(text)


def _workload_line(result: WorkloadResult) -> Text:
    line = Text(f"{result.workload_uuid[:12]:<13}")
    axes = ", ".join(f"{k}={v}" for k, v in result.axes.items())
    line.append(f"{axes[:22]:<23}")
    line.append_text(status_text(result.status.value, 20))
    if result.speedup is not None:
        basis = f" vs {result.speedup_basis}" if result.speedup_basis else ""
        where = "" if result.executed_on_gpu else f" ({result.hardware or 'cpu'}, not a GPU timing)"
        line.append(f"{result.speedup:.3f}x{basis}  kernel {result.latency_ms or 0:.4f} ms  ")
        line.append(f"comparator {result.reference_latency_ms or 0:.4f} ms{where}")
        if result.roofline_fraction is not None:
            line.append(f"  {result.roofline_fraction:.0%} of the {result.roofline_device} roofline")
    elif result.status.value == "PASSED":
        line.append(f"not timed ({result.hardware or 'cpu'})")
    if result.max_absolute_error is not None and result.status.value != "PASSED":
        line.append(
            f"max abs err {result.max_absolute_error:.4g}, max rel err {result.max_relative_error:.4g}"
        )
    if result.roofline_floor_ms is not None:
        line.append(
            f"  IMPLAUSIBLE: below the roofline floor {result.roofline_floor_ms:.4g} ms", style="bold red"
        )
    return line


def evaluation_document(data: TrajectoryData, turn: Turn) -> Lines:
    """Notes, verdict, workloads and error logs of ``turn``'s evaluation."""
    report = data.report(turn)
    if report is None:
        return Lines([Text(f"not evaluated ({turn.status})", style="yellow")])
    if isinstance(report, str):
        return Lines([Text(report, style="red")])
    lines: list[str | Text] = []
    notes = data.notes(turn)
    if notes:
        lines.append(Text(f"⚑ evaluator notes ({len(notes)})", style="bold yellow"))
        lines += [Text(f"  {note}", style="yellow") for note in notes]
        lines.append("")
    verdict = Text("status ").append_text(status_text(report.status.value))
    verdict.append(f"  ·  all passed {'yes' if report.all_passed else 'no'}")
    if report.min_speedup is not None:
        verdict.append(f"  ·  min speedup {report.min_speedup:.3f}x")
    verdict.append(f"  ·  target {report.target_speedup:g}x {'met' if report.target_met else 'not met'}")
    verdict.append(f"  ·  {'on a GPU' if report.executed_on_gpu else 'not executed on a GPU'}")
    lines += [verdict, f"solution {report.solution_name}", ""]
    if report.error:
        lines += [Text(f"infrastructure error: {report.error}", style="red"), ""]
    if report.workloads:
        lines.append(Text(f"{'workload':<13}{'axes':<23}{'status':<20}result", style="bold"))
        lines += [_workload_line(result) for result in report.workloads]
    for result in report.workloads:
        if result.log.strip():
            lines += [
                "",
                Text(f"log of workload {result.workload_uuid[:12]} ({result.status.value})", style="bold"),
            ]
            lines += result.log.splitlines()
    return Lines(lines)


def _analysis_lines(report: KernelReport) -> list[str | Text]:
    analysis = report.static_analysis
    if analysis is None:
        return [Text("no static analysis in this report", style="yellow")]
    lines: list[str | Text] = [
        f"target {analysis.target or '-'}  ·  compiled {({True: 'yes', False: 'no', None: 'unknown'})[analysis.compiled]}",
        f"PTX families   {', '.join(analysis.ptx_families) or 'none of the tracked families'}",
        f"SASS families  {', '.join(analysis.sass_families) or 'none of the tracked families'}",
    ]
    wanted = TARGET_FAMILIES.get(analysis.target or "")
    if wanted and analysis.architecture_families is not None:
        found = ", ".join(analysis.architecture_families) or "none"
        ok = has_target_families(analysis.target, analysis.architecture_families)
        lines.append(
            Text(f"target families ({' or '.join(wanted)}): {found}", style="green" if ok else "bold yellow")
        )
    resources = [
        f"registers {analysis.registers}" if analysis.registers is not None else "",
        f"static shared memory {analysis.shared_memory_bytes:,} B"
        if analysis.shared_memory_bytes is not None
        else "",
        f"spills {analysis.spill_bytes} B" if analysis.spill_bytes is not None else "",
    ]
    lines.append("resources      " + (", ".join(r for r in resources if r) or "not reported"))
    if analysis.policy_violations:
        lines.append(Text("source policy: " + "; ".join(analysis.policy_violations), style="bold red"))
    if analysis.compile_log.strip():
        lines += ["", Text("compile log", style="bold"), *analysis.compile_log.splitlines()]
    return lines


def analysis_document(data: TrajectoryData, turn: Turn) -> Lines:
    """The static analysis, the sanitizer gate and Nsight Compute's evidence of ``turn``'s kernel."""
    report = data.report(turn)
    if not isinstance(report, KernelReport):
        return evaluation_document(data, turn)  # not evaluated, or unreadable: the same sentence
    lines = _analysis_lines(report)
    if report.sanitizer is not None:
        verdict = "clean" if report.sanitizer.passed else "errors found"
        lines += ["", Text(f"sanitizer ({', '.join(report.sanitizer.tools)}): {verdict}", style="bold")]
        lines += [
            f"  {f.tool} {f.workload[:12]}: {f.message} ({f.count}x)" for f in report.sanitizer.findings
        ]
    if report.ncu is not None:
        ncu = report.ncu
        lines += [
            "",
            Text(
                f"Nsight Compute (workload {ncu.workload[:12]}{', cached' if ncu.cached else ''})",
                style="bold",
            ),
        ]
        if ncu.error:
            lines.append(Text(f"  no profile: {ncu.error}", style="yellow"))
        else:
            lines.append(f"  executed target families: {', '.join(ncu.executed_families) or 'none'}")
            lines.append(
                "  executed opcodes: "
                + ", ".join(f"{op} {ncu.executed_opcodes[op]:,}" for op in ncu.sass_families)
            )
    return Lines(lines)
