"""The `ptxbench` command: thin typer commands over the mini_ptx_agent library.

Heavy imports (litellm, torch, mini-swe-agent) happen inside the commands so that `ptxbench --help` is fast.
"""

from __future__ import annotations

import typer

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


def _not_available(command: str, issue: str) -> None:
    """Say plainly that a command is planned but not built yet, and exit 2."""
    typer.secho(
        f"`ptxbench {command}` is not available yet: it is planned ({issue}) but not implemented in this version.",
        err=True,
        fg=typer.colors.YELLOW,
    )
    raise typer.Exit(2)


_PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


@app.command("quickstart", context_settings=_PASS_THROUGH)
def quickstart_command() -> None:
    """Run the main job: one 3-turn Hopper GEMM agent trajectory end to end (not available yet)."""
    _not_available("quickstart", "the quickstart issue")


@app.command("eval", context_settings=_PASS_THROUGH)
def eval_command() -> None:
    """Evaluate one kernel for a fixed task through FIBServe (not available yet)."""
    _not_available("eval", "the agent issue")


@app.command("run", context_settings=_PASS_THROUGH)
def run_command() -> None:
    """Run the kernel agent on one definition (not available yet)."""
    _not_available("run", "the agent issue")


def main() -> None:
    """Entry point for `python -m mini_ptx_agent`."""
    app()
