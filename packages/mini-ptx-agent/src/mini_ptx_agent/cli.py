"""The `ptxbench` command: thin typer commands over the mini_ptx_agent library.

Heavy imports (litellm, torch, mini-swe-agent) happen inside the commands so that `ptxbench --help` is fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from mini_ptx_agent.data.cli import app as data_app
from mini_ptx_agent.data.cli import train_app
from mini_ptx_agent.experiments.cli import app as experiment_app
from mini_ptx_agent.harbor.cli import app as harbor_app
from mini_ptx_agent.prompts.cli import app as prompts_app

app = typer.Typer(
    name="ptxbench",
    help=(
        "PTXBench: run LLM kernel agents against FIBServe and turn their trajectories into reports and data.\n\n"
        "Paths come from PTXBENCH_ROOT, PTXBENCH_DATA_ROOT, PTXBENCH_TRACESETS_ROOT and DATASET_ROOTS; "
        "the evaluation service from SERVICE_URL; the model from MODEL_NAME (and ACCRL_MODEL_HOST for an "
        "OpenAI-compatible endpoint)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
app.add_typer(prompts_app, name="prompts")
app.add_typer(experiment_app, name="experiment")
app.add_typer(data_app, name="data")
app.add_typer(train_app, name="train")
app.add_typer(harbor_app, name="harbor")


@app.command("quickstart")
def quickstart_command(
    check: Annotated[
        bool, typer.Option("--check", help="Verify every dependency: one OK/FAIL line each.")
    ] = False,
    run: Annotated[bool, typer.Option("--run", help="Run the 3-turn Hopper GEMM trajectory.")] = False,
    report_dir: Annotated[
        Path | None,
        typer.Option("--report", help="Rebuild and print the report of a quickstart run directory."),
    ] = None,
    resume_dir: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            help="Continue a stopped quickstart run directory from its last complete turn (its model: the demo, "
            "a replay, an endpoint with --model-host, a hosted model with its key variable).",
        ),
    ] = None,
    language: Annotated[
        Literal["cuda", "triton"], typer.Option("--language", help="Kernel language.")
    ] = "cuda",
    model: Annotated[
        str | None, typer.Option("--model", help="Model name; default $MODEL_NAME, else the demo replay.")
    ] = None,
    model_host: Annotated[
        str | None,
        typer.Option("--model-host", help="OpenAI-compatible endpoint host:port; default $ACCRL_MODEL_HOST."),
    ] = None,
    service_url: Annotated[
        str | None,
        typer.Option("--service-url", help="FIBServe URL; default $SERVICE_URL, else an embedded one."),
    ] = None,
    output_root: Annotated[
        Path | None,
        typer.Option(
            "--output-root",
            help="Parent of the run directory; default $PTXBENCH_DATA_ROOT/eval_runs, else $PTXBENCH_ROOT/data/eval_runs, "
            "else data/eval_runs.",
        ),
    ] = None,
    require_gpu: Annotated[
        bool, typer.Option("--require-gpu", help="--check: a machine without a GPU lane is a FAIL.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the result (or the check lines) as JSON.")
    ] = False,
) -> None:
    """The main job: one 3-turn Hopper GEMM agent trajectory end to end (gemm_n7168_k5120, M=8192, target 1.0x).

    Exit codes: --check 0 all OK, 1 any FAIL; --run and --resume 0 when the runner completed, 2 when it could not
    (service or model failure, refusal, bad options), 130 after Ctrl-C (which prints the --resume command);
    --report 0, or 2 when DIR is not a run directory.
    """
    from mini_ptx_agent.quickstart import quickstart_main

    raise typer.Exit(
        quickstart_main(
            check=check, run=run, report_dir=report_dir, resume_dir=resume_dir, language=language, model=model,
            model_host=model_host, service_url=service_url, output_root=output_root, require_gpu=require_gpu,
            as_json=as_json,
        )
    )  # fmt: skip


@app.command("eval")
def eval_command(
    kernel: Annotated[Path, typer.Argument(help="The kernel file: kernel.cu (CUDA) or kernel.py (Triton).")],
    task_config: Annotated[
        Path | None,
        typer.Option(
            "--task-config",
            help="The task file, in our shape or the public PTXBench one; default $PTXBENCH_TASK_CONFIG, "
            "else /opt/ptxbench/task.json.",
        ),
    ] = None,
    service_url: Annotated[
        str | None,
        typer.Option(
            "--service-url", help="FIBServe URL; default $SERVICE_URL, else an embedded local FIBServe."
        ),
    ] = None,
    sanitizer_runs: Annotated[
        int | None,
        typer.Option(
            "--sanitizer-runs",
            min=0,
            help="Run the compute-sanitizer gate this many times before the evaluation (0: no gate); default "
            "the task file's (sanitizer_runs, or the public shape's max_check_runs).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the versioned result (schema ptxbench.eval.v1) as JSON.")
    ] = False,
) -> None:
    """Evaluate one kernel for a fixed task through FIBServe; exit 0 for any kernel verdict, 2 if the service
    failed or the task config or kernel file cannot be used."""
    from mini_ptx_agent.environment.fibserve import evaluate_kernel
    from mini_ptx_agent.environment.report import NotEvaluated
    from mini_ptx_agent.task import TaskConfigError
    from mini_ptx_agent.task_file import load_task_config, resolve_task_config

    try:
        task = load_task_config(resolve_task_config(task_config))
        if sanitizer_runs is not None:
            gate = {"sanitizer": sanitizer_runs > 0, "sanitizer_runs": max(sanitizer_runs, 1)}
            task = task.model_copy(update=gate)
        report = evaluate_kernel(kernel, task, service_url=service_url)
    except (TaskConfigError, OSError, LookupError) as exc:
        typer.secho(f"error: {exc}", err=True, fg=typer.colors.RED)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        from mini_ptx_agent.feedback import format_feedback
        from mini_ptx_agent.output import console_for

        console_for().print(format_feedback(report), markup=False)
    raise typer.Exit(2 if report.status is NotEvaluated.INFRASTRUCTURE_ERROR else 0)


@app.command("run")
def run_command(
    definition: Annotated[
        str | None, typer.Option("--definition", help="Definition name, e.g. gemm_n7168_k5120.")
    ] = None,
    language: Annotated[
        Literal["cuda", "triton"] | None, typer.Option("--language", help="Kernel language (default cuda).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Model name: a litellm name, a served id (with ACCRL_MODEL_HOST), replay:PATH, or demo (the "
            "bundled demo trajectory of the definition and language: vector_add_f32 in triton runs on a CPU); "
            "default $MODEL_NAME.",
        ),
    ] = None,
    num_turns: Annotated[
        int | None, typer.Option("--num-turns", min=1, help="Model calls before LimitsExceeded (default 3).")
    ] = None,
    target_speedup: Annotated[
        float | None,
        typer.Option(
            "--target-speedup",
            help="Minimum speedup against the definition's baseline Solution (its reference where it has none), "
            "> 0 (default 1.0); met only on a GPU.",
        ),
    ] = None,
    workloads: Annotated[
        str | None, typer.Option("--workloads", help="Comma-separated workload uuids (default all).")
    ] = None,
    arch: Annotated[
        Literal["sm_90a", "sm_100a"] | None,
        typer.Option("--arch", help="sm_90a (Hopper) or sm_100a (Blackwell) (default sm_90a)."),
    ] = None,
    prompt_tag: Annotated[
        str | None, typer.Option("--prompt-tag", help="System prompt tag; default by language and arch.")
    ] = None,
    sanitizer: Annotated[
        bool | None,
        typer.Option(
            "--sanitizer/--no-sanitizer",
            help="compute-sanitizer gate before timing (memcheck unless --sanitizer-tools); a finding rejects "
            "the kernel untimed, quoted with its source lines (default off).",
        ),
    ] = None,
    sanitizer_tools: Annotated[
        str | None,
        typer.Option(
            "--sanitizer-tools",
            help="Comma-separated gate tools: memcheck, racecheck, synccheck, initcheck (turns the gate on).",
        ),
    ] = None,
    context_policy: Annotated[
        Literal["full", "latest-pair", "single-user"] | None,
        typer.Option(
            "--context-policy",
            help="What each model call sees: full (every message), latest-pair (system, task, latest reply and "
            "its feedback), single-user (system and one message: task, latest kernel, its feedback) (default full).",
        ),
    ] = None,
    architecture_warning: Annotated[
        bool | None,
        typer.Option(
            "--architecture-warning/--no-architecture-warning",
            help="Warn when the kernel lacks its target's families (sm_90a: wgmma or TMA; sm_100a: tcgen05) "
            "(default on).",
        ),
    ] = None,
    require_architecture: Annotated[
        bool | None,
        typer.Option(
            "--require-architecture/--no-require-architecture",
            help="Submitted needs correct + target speedup + the target's families (default off).",
        ),
    ] = None,
    instruction_evidence: Annotated[
        bool | None,
        typer.Option(
            "--instruction-evidence/--no-instruction-evidence",
            help="Profile each correct kernel with Nsight Compute and report which families executed "
            "(default off; needs ncu on the service's GPU).",
        ),
    ] = None,
    profile_in_loop: Annotated[
        bool | None,
        typer.Option(
            "--profile/--no-profile",
            help="Add a short Nsight Compute summary (SOL %, occupancy, top stalls) of each correct kernel "
            "(default off).",
        ),
    ] = None,
    notes_dir: Annotated[
        str | None,
        typer.Option(
            "--notes-dir",
            help="Folder of fix notes (*.md), or 'bundled' for the shipped ones: the best BM25 hits are added "
            "to failure feedback (default none).",
        ),
    ] = None,
    output_root: Annotated[
        Path | None,
        typer.Option(
            "--output-root",
            help="Parent of run directories; default $PTXBENCH_DATA_ROOT/eval_runs, else $PTXBENCH_ROOT/data/eval_runs, "
            "else data/eval_runs.",
        ),
    ] = None,
    service_url: Annotated[
        str | None,
        typer.Option(
            "--service-url", help="FIBServe URL; default $SERVICE_URL, else an embedded local FIBServe."
        ),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            help="Continue this run directory from its last complete turn; options not given keep the plan's.",
        ),
    ] = None,
    turn_timeout: Annotated[
        float | None,
        typer.Option(
            "--turn-timeout", help="Limit on one model call and on one evaluation (s) (default 900)."
        ),
    ] = None,
    wall_time: Annotated[
        int | None,
        typer.Option("--wall-time", min=0, help="Limit on the whole run (s); 0 = none (default 0)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print summary.json.")] = False,
) -> None:
    """Run the kernel agent on one definition into a run directory (exit 0 unless infrastructure failed: 2;
    130 after Ctrl-C, which prints the --resume command that continues the run).

    Prints the run directory first, then one line per turn (status, speedup, PTX/SASS families, seconds); with
    --json on stderr.

    Without a GPU or an API key: --definition vector_add_f32 --language triton --model demo.

    Options are checked before anything starts; a typo in --definition gets the close matches.

    With --resume, an option not given keeps the run's plan.json value.

    --num-turns, --wall-time, --turn-timeout, --sanitizer and --sanitizer-tools given with --resume replace
    the plan's.

    Definition, language, arch, workloads, target speedup, prompt tag, model and the other feedback options
    (docs/feedback-options.md) cannot change on --resume.
    """
    from mini_ptx_agent.output import console_for
    from mini_ptx_agent.runs.launch import RunInterrupted, run_agent
    from mini_ptx_agent.runs.options import RunOptionError, parse_list, parse_workloads, run_options

    try:
        options = run_options(
            definition=definition, language=language, model=model, num_turns=num_turns,
            target_speedup=target_speedup, workloads=parse_workloads(workloads), arch=arch,
            prompt_tag=prompt_tag, sanitizer=sanitizer, turn_timeout_s=turn_timeout, wall_time_limit_s=wall_time,
            sanitizer_tools=parse_list(sanitizer_tools), context_policy=context_policy,
            architecture_warning=architecture_warning, require_architecture=require_architecture,
            instruction_evidence=instruction_evidence, profile_in_loop=profile_in_loop, notes_dir=notes_dir,
        )  # fmt: skip
        progress = console_for(stderr=as_json)  # stdout stays JSON with --json
        run_dir, summary = run_agent(
            options, resume_dir=resume, output_root=output_root, service_url=service_url, console=progress
        )
    except RunOptionError as exc:
        typer.secho(f"error: {exc}", err=True, fg=typer.colors.RED)
        raise typer.Exit(2) from None
    except RunInterrupted as exc:
        typer.secho(
            f"interrupted: the complete turns are kept in {exc.run_dir}; continue with: "
            f"ptxbench run --resume {exc.run_dir}",
            err=True,
            fg=typer.colors.YELLOW,
        )
        raise typer.Exit(130) from None
    if as_json:
        typer.echo(summary.model_dump_json(indent=2))
    else:
        typer.echo(f"run directory: {run_dir}")
        typer.echo(
            f"exit status: {summary.exit_status}; turns {summary.turns}; runner completed: {summary.runner_completed}; "
            f"kernel correct: {_yes_no_unknown(summary.kernel_correct)}; target met: {summary.target_met}"
        )
        if summary.runner_completed and summary.exit_message not in ("", summary.exit_status):
            typer.echo(f"  {summary.exit_message}")  # e.g. a replay that has no reply left
        if summary.infrastructure_error:
            typer.secho(
                f"infrastructure error: {summary.infrastructure_error}", err=True, fg=typer.colors.RED
            )
    raise typer.Exit(2 if summary.exit_status == "InfrastructureError" else 0)


@app.command("report")
def report_command(
    run_dirs: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUN_DIR",
            help="Run, quickstart or experiment directories (an experiment's turns.csv is preferred).",
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Where to write; default RUN_DIR/report for one input, else ./ptxbench-report."
        ),
    ] = None,
    by: Annotated[
        Literal["model", "definition", "tag", "language"],
        typer.Option("--by", help="What the lines of the turn-limit figure and the table's rows group on."),
    ] = "model",
    turn_limits: Annotated[
        str | None,
        typer.Option(
            "--turn-limits",
            help="Turn limits T for the @T metrics, comma-separated; default 1, 4, 8 up to the most turns a "
            "trajectory made, and that number (1,3 for 3-turn runs).",
        ),
    ] = None,
    include_demo: Annotated[
        bool,
        typer.Option(
            "--include-demo", help="Count demo replays too (marked '(demo)'; never a model's result)."
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print what was written and found as JSON.")
    ] = False,
) -> None:
    """Write report.html (self-contained, opens offline), one PNG and one CSV per figure and metrics.csv:
    correct@T, best speedup@T, verified@T per group with 95% intervals and n, and what ran them.
    Exit 0 when written, 2 when an input cannot be used or holds no finished turn."""
    from rich.markup import escape

    from mini_ptx_agent.output import console_for
    from mini_ptx_agent.reports.inputs import ReportError
    from mini_ptx_agent.reports.report import build_report, parse_turn_limits, summary_table

    err = console_for(stderr=True)
    target = out or (run_dirs[0] / "report" if len(run_dirs) == 1 else Path("ptxbench-report"))
    try:
        limits = parse_turn_limits(turn_limits) if turn_limits is not None else None
        with err.status("report") as status:
            result = build_report(
                run_dirs, target, by=by, turn_limits=limits, include_demo=include_demo,
                step=lambda text: status.update(f"report: {text}"),
            )  # fmt: skip
    except ReportError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
        return
    out_console = console_for()
    out_console.print(summary_table(result))
    for line in result.provenance.warnings:
        out_console.print(f"[yellow]warning:[/] {escape(line)}")
    out_console.print(f"wrote {escape(result.html)} and {len(result.files) - 1} figure and table files")


def _yes_no_unknown(value: bool | None) -> str:
    """A summary verdict for people: None means no kernel was executed, so correctness is unknown."""
    return "unknown (no kernel executed)" if value is None else ("yes" if value else "no")


def main() -> None:
    """Entry point for `python -m mini_ptx_agent`."""
    app()


if __name__ == "__main__":
    main()
