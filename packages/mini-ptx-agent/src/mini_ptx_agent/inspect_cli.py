"""The `ptxbench-inspect` command: browse a run, an experiment, a trajectory or SFT rows in the terminal."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from .inspect.keys import help_text

HELP = """Browse PTXBench runs in the terminal (textual).

PATH is one of: a run directory (`ptxbench run`, the quickstart, or `runs/<id>` of an experiment); an
experiment directory (a table of its trajectories: model, definition, prompt tag, best speedup, status;
filter and sort it, Enter opens a row's trajectory); a trajectory JSON (mini-swe-agent-1.1); SFT rows in
JSONL or parquet as `ptxbench data sft` writes them (ptxbench.sft/1: each row's messages with the trained
final message marked, its tokens, flags, fix and provenance).

A trajectory shows its turns in a list and, for the selected turn, five panes: the model's reply (reasoning
collapsed), the kernel highlighted or its diff against the previous turn's kernel, the feedback the model
got, the evaluation (the evaluator's notes, status and speedup per workload, errors) and the analysis
(PTX/SASS families, resources). DEMO marks a demo replay; a flag with a count marks a turn the evaluator
left notes on.

Exit status 0; 2 when PATH cannot be shown (the message says why)."""


app = typer.Typer(name="ptxbench-inspect", add_completion=False, rich_markup_mode=None)


EPILOG = "\n\n".join(
    f"\b\n{part}" for part in f"Keys (? in the app lists them too):\n\n{help_text()}".split("\n\n")
)
"""The keys after the options; ``\\b`` keeps click from rewrapping each paragraph."""


@app.command(help=HELP, epilog=EPILOG)
def inspect(
    path: Annotated[
        Path,
        typer.Argument(help="A run or experiment directory, a trajectory .json, or SFT .jsonl/.parquet."),
    ],
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print what PATH holds (kind, turns or rows, statuses) as JSON and exit, without the UI.",
        ),
    ] = False,
) -> None:
    """Open PATH in the inspector (``HELP`` is the description)."""
    from .inspect.readers import InspectError
    from .inspect.readers.sources import open_path

    err = Console(stderr=True)
    try:
        opened = open_path(path)
        if as_json:
            typer.echo(json.dumps(opened.describe(), indent=2))
            return
    except InspectError as exc:
        err.print(f"[red]ptxbench-inspect:[/red] {exc}", markup=True, highlight=False)
        raise typer.Exit(2) from None
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        err.print("ptxbench-inspect needs a terminal; --json prints what PATH holds without one")
        raise typer.Exit(2)
    from .inspect.app import InspectorApp

    InspectorApp(opened).run()


def main() -> None:
    """Entry point of the console script."""
    app()
