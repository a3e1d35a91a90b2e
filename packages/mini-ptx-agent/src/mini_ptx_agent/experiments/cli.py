"""``ptxbench experiment``: the config's schema, a config's expansion, and running (or resuming) it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="experiment",
    help=(
        "Many trajectories: definitions x languages x prompt tags x models x replicas, run concurrently into one "
        "directory (a run directory per trajectory, plan.json, manifest.json, turns.csv and turns.parquet), "
        "resumable after a crash or Ctrl-C. CONFIG is a YAML/JSON file or a shipped config's name "
        "(gemm, mha-fwd, mha-bwd, gqa, mla, gdn, fp8-gemm, each also as NAME-smoke); docs/experiments.md explains."
    ),
    no_args_is_help=True,
    add_completion=False,
)

ConfigArg = Annotated[str, typer.Argument(help="A config file (YAML or JSON) or a shipped config's name.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
ServiceOpt = Annotated[
    str | None,
    typer.Option(
        "--service-url", help="FIBServe URL; default $SERVICE_URL, else an embedded local FIBServe."
    ),
]


def _fail(message: str) -> typer.Exit:
    typer.secho(f"error: {message}", err=True, fg=typer.colors.RED)
    return typer.Exit(2)


@app.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of an experiment config (every field with its description)."""
    from .config import config_schema

    typer.echo(json.dumps(config_schema(), indent=2))


@app.command("plan")
def plan_command(config: ConfigArg, service_url: ServiceOpt = None, as_json: JsonOpt = False) -> None:
    """Print a config's expansion without running it: definitions, cells, trajectories and their ids, and the
    model calls it would make at most. Exit 0, or 2 when the config does not validate or expand."""
    import os

    from .config import ExperimentConfigError, load_config
    from .launch import plan_experiment
    from .plan import describe

    try:
        plan = plan_experiment(load_config(config), service_url=service_url or os.environ.get("SERVICE_URL"))
    except ExperimentConfigError as exc:
        raise _fail(str(exc)) from None
    info = describe(plan)
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    typer.echo(
        f"{plan.config.name}: {len(info['definitions'])} definitions, {info['cells']} cells, "
        f"{info['trajectories']} trajectories x {plan.num_turns} turns = at most {info['expected_model_calls']} "
        "model calls"
    )
    typer.echo(f"definitions: {', '.join(info['definitions'])}")
    for tid in info["trajectory_ids"]:
        typer.echo(f"  {tid}")


@app.command("run")
def run_command(
    config: Annotated[
        str | None, typer.Argument(help="A config file or shipped config's name (not needed with --resume).")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            help="The experiment directory (new or empty); default $PTXBENCH_DATA_ROOT/experiments/<name>-<UTC>.",
        ),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            help="Continue this experiment: finished trajectories and turns are kept, interrupted ones and those "
            "that ended in an infrastructure failure resume from their last complete turn.",
        ),
    ] = None,
    extend_turns: Annotated[
        int,
        typer.Option(
            "--extend-turns", min=0, help="With --resume: N more turns for every trajectory not Submitted."
        ),
    ] = 0,
    service_url: ServiceOpt = None,
    model_host: Annotated[
        str | None,
        typer.Option(
            "--model-host",
            help="host:port of the endpoint of models without host; default $ACCRL_MODEL_HOST.",
        ),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="ADDRESS",
            help=(
                "Run the trajectories as Ray tasks on a Ray cluster (pip install 'mini-ptx-agent\\[ray]'): 'auto' "
                "($RAY_ADDRESS, or the cluster this host is a node of) or the head's host:port. Every node needs "
                "this install, the experiment directory at the same path and a route to the service; model keys "
                "and $FIBSERVE_TOKEN come from each node's environment (docs/scale-out.md)."
            ),
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run an experiment (or continue one) with live progress. Exit 0 when every trajectory is finished,
    1 when some still need --resume (infrastructure failure, crash), 130 after Ctrl-C, 2 on bad input or when
    the service cannot be reached."""
    import os

    from ..environment import EvaluationInfrastructureError
    from ..environment.embedded import ServiceStartError
    from ..models import ModelConfigError
    from ..output import console_for
    from .config import ExperimentConfigError, load_config
    from .launch import run_experiment

    console = console_for(stderr=as_json)
    bad_input: tuple[type[Exception], ...] = (ExperimentConfigError, ModelConfigError)
    if ray_address is not None:  # only then is Ray imported
        try:
            import ray  # noqa: F401
        except ImportError as exc:
            raise _fail(f"--ray needs Ray ({exc}): pip install 'mini-ptx-agent[ray]'") from None
        from .ray_runner import RayExperimentError

        bad_input += (RayExperimentError,)
    try:
        loaded = load_config(config) if config else None
        result = run_experiment(
            loaded, resume_dir=resume, output=output, extend_turns=extend_turns,
            service_url=service_url or os.environ.get("SERVICE_URL") or None, model_host=model_host,
            ray_address=ray_address, console=console,
        )  # fmt: skip
    except bad_input as exc:
        raise _fail(str(exc)) from None
    except (EvaluationInfrastructureError, ServiceStartError) as exc:
        raise _fail(f"evaluation service unavailable: {exc}") from None
    except KeyboardInterrupt:  # the second Ctrl-C: the turns in flight are lost, everything else is on disk
        typer.secho("stopped at once; `--resume DIR` continues the experiment", err=True, fg=typer.colors.RED)
        raise typer.Exit(130) from None
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2))
    else:
        typer.echo(f"experiment directory: {result.root}")
        for tid, error in result.errors.items():
            typer.secho(f"trajectory {tid} crashed: {error}", err=True, fg=typer.colors.RED)
        typer.echo(
            f"{result.finished}/{result.trajectories} trajectories finished"
            + (
                f"; {len(result.unfinished)} to continue with --resume {result.root}"
                if result.unfinished
                else ""
            )
        )
    raise typer.Exit(130 if result.interrupted else (1 if result.unfinished else 0))
