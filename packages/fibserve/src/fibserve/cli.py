"""The `fibserve` command: thin typer commands over the fibserve library.

Each command parses options, calls one library function, and prints with rich (or JSON with `--json`).
Heavy imports (torch, triton, fastapi) happen inside the commands, so `fibserve --help` stays fast.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="fibserve",
    help=(
        "FIBServe: build, check, run and time candidate kernels for FlashInfer Trace definitions.\n\n"
        "Trace sets are read from --local ROOT or the DATASET_ROOTS environment variable "
        "(colon-separated); the bundled default trace set is used when neither is given."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


@app.callback()
def _root() -> None:
    """FIBServe command group (the help text above describes it)."""


def _not_available(command: str, issue: str) -> None:
    """Say plainly that a command is planned but not built yet, and exit 2."""
    typer.secho(
        f"`fibserve {command}` is not available yet: it is planned ({issue}) but not implemented in this version.",
        err=True,
        fg=typer.colors.YELLOW,
    )
    raise typer.Exit(2)


@app.command("serve", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def serve_command() -> None:
    """Run the FIBServe HTTP service (not available yet)."""
    _not_available("serve", "the HTTP service issue")


def main() -> None:
    """Entry point for `python -m fibserve`."""
    app()
