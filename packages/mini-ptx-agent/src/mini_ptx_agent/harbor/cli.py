"""``ptxbench harbor``: export Harbor tasks, verify a kernel as a task's verifier, run the agent in a task container,
convert a trajectory to ATIF. Thin typer commands over :mod:`mini_ptx_agent.harbor`; docs/harbor.md explains."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Literal

import typer

app = typer.Typer(
    name="harbor",
    help=(
        "PTXBench tasks for Harbor (https://harborframework.com): `export` writes one task per definition "
        "from the live FIBServe, `verify` is a task's verifier, `solve` runs the kernel agent inside a task "
        "container (the Harbor agent mini_ptx_agent.harbor.agent:MiniPtxAgent calls it), `atif` converts a "
        "trajectory to ATIF. docs/harbor.md explains."
    ),
    no_args_is_help=True,
    add_completion=False,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
ServiceOpt = Annotated[
    str | None,
    typer.Option(
        "--service-url", help="FIBServe URL; default $SERVICE_URL, else an embedded local FIBServe."
    ),
]
TaskOpt = Annotated[
    Path | None,
    typer.Option(
        "--task-config",
        help="The task file (either shape); default $PTXBENCH_TASK_CONFIG, else /opt/ptxbench/task.json.",
    ),
]


def _fail(message: str) -> typer.Exit:
    typer.secho(f"error: {message}", err=True, fg=typer.colors.RED)
    return typer.Exit(2)


def _task(path: Path | None):
    from ..task import TaskConfigError
    from ..task_file import load_task_config, resolve_task_config

    try:
        return load_task_config(resolve_task_config(path))
    except TaskConfigError as exc:
        raise _fail(str(exc)) from None


@app.command("export")
def export_command(
    out: Annotated[Path, typer.Argument(help="Folder to write the tasks into (one sub-folder per task).")],
    definitions: Annotated[
        list[str] | None, typer.Option("--definition", help="A definition to export (repeatable).")
    ] = None,
    suite: Annotated[
        str | None,
        typer.Option(
            "--suite",
            help="Every definition of a suite: gemm, mha-fwd, mha-bwd, fp8-mha, gqa, mla, gdn, fp8-gemm, ci.",
        ),
    ] = None,
    language: Annotated[
        Literal["cuda", "triton"], typer.Option("--language", help="Kernel language.")
    ] = "cuda",
    arch: Annotated[
        Literal["sm_90a", "sm_100a"], typer.Option("--arch", help="Target architecture.")
    ] = "sm_90a",
    reward: Annotated[
        Literal["binary", "graded"],
        typer.Option(
            "--reward", help="binary: 1/0 for correctness; graded: correctness, speedup, architecture."
        ),
    ] = "binary",
    instruction_evidence: Annotated[
        bool,
        typer.Option(
            "--instruction-evidence",
            help="The verifier profiles a correct kernel with Nsight Compute; 'architecture' needs executed families.",
        ),
    ] = False,
    target_speedup: Annotated[
        float, typer.Option("--target-speedup", min=0.0, help="Target speedup (x).")
    ] = 1.0,
    sanitizer_runs: Annotated[
        int, typer.Option("--sanitizer-runs", min=0, help="memcheck runs before the evaluation (0: none).")
    ] = 2,
    prompt_tag: Annotated[
        str | None,
        typer.Option("--prompt-tag", help="System prompt of the instruction; default by language/arch."),
    ] = None,
    image: Annotated[
        str, typer.Option("--image", help="Base image of each task (pin a digest for published tasks).")
    ] = "ptxbench-eval:dev",
    gpus: Annotated[
        int,
        typer.Option(
            "--gpus",
            min=0,
            help="GPUs per container. 0: use the standing FIBServe named by PTXBENCH_SERVICE_URL at `harbor run` "
            "time; N: each container starts its own FIBServe (one trial at a time).",
        ),
    ] = 0,
    agent_timeout: Annotated[
        float, typer.Option("--agent-timeout", min=1.0, help="Agent time limit (s).")
    ] = 3600.0,
    verifier_timeout: Annotated[
        float, typer.Option("--verifier-timeout", min=1.0, help="Verifier time limit (s).")
    ] = 1800.0,
    force: Annotated[bool, typer.Option("--force", help="Replace task folders that exist.")] = False,
    service_url: ServiceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write one Harbor task per definition (task.toml, instruction.md, environment/, tests/test.sh, solution/).

    The definitions and workloads come from the live FIBServe. Exit 0 when written, 2 when nothing could be
    (an unknown definition or suite, an existing task folder, the service down)."""
    from pydantic import ValidationError

    from ..environment.embedded import ServiceStartError
    from ..environment.embedded import service_url as resolve_service
    from ..task import validation_problems
    from .export import ExportOptions, HarborExportError, export_tasks

    try:
        options = ExportOptions(
            language=language, arch=arch, reward=reward, instruction_evidence=instruction_evidence,
            target_speedup=target_speedup, sanitizer_runs=sanitizer_runs, prompt_tag=prompt_tag, image=image,
            gpus=gpus, agent_timeout_s=agent_timeout, verifier_timeout_s=verifier_timeout, force=force,
        )  # fmt: skip
    except ValidationError as exc:
        raise _fail(validation_problems(exc)) from None
    from fibserve.client import FIBServeClient, FIBServeError

    try:
        with resolve_service(service_url) as (url, embedded):
            token = None if embedded else (os.environ.get("FIBSERVE_TOKEN") or None)
            with FIBServeClient(url, token=token) as client:
                tasks = export_tasks(client, out, names=list(definitions or []), suite=suite, options=options)
    except (HarborExportError, FIBServeError, ServiceStartError) as exc:
        raise _fail(str(exc)) from None
    if as_json:
        typer.echo(json.dumps([t.model_dump() for t in tasks], indent=2))
        return
    for task in tasks:
        oracle = task.oracle or "no oracle"
        typer.echo(f"{task.path}  ({task.workloads} workloads; oracle: {oracle})")
    typer.echo(
        f"{len(tasks)} task(s) written; run them with `harbor run -p {out} -a oracle` (docs/harbor.md)"
    )


@app.command("verify")
def verify_command(
    kernel: Annotated[Path, typer.Argument(help="The agent's kernel file (kernel.cu or kernel.py).")],
    task_config: TaskOpt = None,
    logs_dir: Annotated[
        Path, typer.Option("--logs-dir", help="Where reward.json, evaluation.json and verifier.json go.")
    ] = Path("/logs/verifier"),
    reward: Annotated[
        Literal["binary", "graded"], typer.Option("--reward", help="binary (1/0) or graded reward.")
    ] = "binary",
    instruction_evidence: Annotated[
        bool, typer.Option("--instruction-evidence", help="Profile a correct kernel with Nsight Compute.")
    ] = False,
    service_url: ServiceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A Harbor task's verifier: evaluate KERNEL like `ptxbench eval`, write reward.json and the result files.

    Exit 0 when a reward was written (any verdict, a missing kernel included), 2 when the task file cannot be
    used or the service failed (then no reward.json: Harbor records a verifier error, not a zero)."""
    from ..task import TaskConfigError
    from .verifier import verify

    task = _task(task_config)
    try:
        result = verify(
            kernel,
            task,
            logs_dir,
            mode=reward,
            instruction_evidence=instruction_evidence,
            service_url=service_url,
        )
    except (TaskConfigError, OSError) as exc:
        raise _fail(str(exc)) from None
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        rewards = result.rewards
        shown = ", ".join(f"{k}={v:g}" for k, v in rewards.model_dump().items()) if rewards else "none"
        typer.echo(f"{result.definition}: {result.status}; rewards: {shown}")
        if result.error:
            typer.echo(result.error)
    raise typer.Exit(0 if result.rewards is not None else 2)


@app.command("solve")
def solve_command(
    task_config: TaskOpt = None,
    model: Annotated[str | None, typer.Option("--model", help="Model name; default $MODEL_NAME.")] = None,
    num_turns: Annotated[
        int | None, typer.Option("--num-turns", min=1, help="Model calls (default 3).")
    ] = None,
    prompt_tag: Annotated[str | None, typer.Option("--prompt-tag", help="System prompt tag.")] = None,
    kernel: Annotated[
        Path | None,
        typer.Option(
            "--kernel", help="Where to write the submitted kernel; default /workspace/kernel.<ext>."
        ),
    ] = None,
    output_root: Annotated[
        Path, typer.Option("--output-root", help="Parent of the agent's run directory.")
    ] = Path("/logs/agent/ptxbench"),
    atif: Annotated[Path | None, typer.Option("--atif", help="Where to write the ATIF trajectory.")] = Path(
        "/logs/agent/trajectory.json"
    ),
    service_url: ServiceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the kernel agent on the container's task, write its best kernel and its ATIF trajectory.

    Exit 0 when the agent's loop completed (whether or not a kernel was correct), 2 when it could not run
    (bad options, model or service down: see the run directory's summary.json)."""
    from rich.console import Console

    from ..runs.options import RunOptionError
    from .solve import solve
    from .task_files import kernel_path

    task = _task(task_config)
    try:
        result = solve(
            task, kernel_path=kernel or Path(os.environ.get("PTXBENCH_KERNEL") or kernel_path(task)),
            output_root=output_root, atif_path=atif,
            model=model, num_turns=num_turns, prompt_tag=prompt_tag, service_url=service_url,
            console=Console(stderr=True) if not as_json else None,
        )  # fmt: skip
    except (RunOptionError, OSError) as exc:
        raise _fail(str(exc)) from None
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        summary = result.summary
        typer.echo(f"{summary.exit_status}: {summary.turns} turn(s), run directory {result.run_dir}")
        typer.echo(f"kernel: {result.kernel or 'none written'}; ATIF: {result.atif or 'none'}")
    raise typer.Exit(0 if result.summary.runner_completed else 2)


@app.command("atif")
def atif_command(
    trajectory: Annotated[Path, typer.Argument(help="A trajectory file (trajectories/exp_000.traj.json).")],
    out: Annotated[Path, typer.Argument(help="The ATIF JSON to write.")],
    session_id: Annotated[str | None, typer.Option("--session-id", help="ATIF session_id.")] = None,
) -> None:
    """Convert a kernel agent trajectory (mini-swe-agent-1.1) to ATIF, Harbor's trajectory format."""
    from .atif import write_atif

    try:
        document = write_atif(trajectory, out, session_id=session_id)
    except (OSError, ValueError) as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"{out}: {len(document['steps'])} steps ({document['schema_version']})")
