"""The `ptxbench-inspect` command: browse agent trajectories (planned)."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="ptxbench-inspect",
    help="Browse PTXBench agent trajectories (mini-swe-agent-1.1 JSON) turn by turn.",
    add_completion=False,
)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def inspect(path: str = typer.Argument(None, help="A trajectory JSON file or a run directory.")) -> None:
    """Browse PTXBench agent trajectories turn by turn (not available yet)."""
    typer.secho(
        "`ptxbench-inspect` is not available yet: the trajectory inspector is planned but not implemented "
        "in this version. Trajectories are mini-swe-agent-1.1 JSON, readable by `mini-extra inspector`.",
        err=True,
        fg=typer.colors.YELLOW,
    )
    raise typer.Exit(2)


def main() -> None:
    """Entry point of the console script."""
    app()
