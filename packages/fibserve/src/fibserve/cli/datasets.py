"""``fibserve datasets``: public FlashInfer Trace datasets from the Hugging Face Hub."""

from __future__ import annotations

from typing import Annotated

import typer

datasets_app = typer.Typer(
    name="datasets",
    help="Public FlashInfer Trace datasets: download one from the Hugging Face Hub as a trace set.",
    no_args_is_help=True,
    add_completion=False,
)


@datasets_app.command("pull")
def pull_command(
    repo: Annotated[
        str,
        typer.Argument(
            help="Hub dataset, owner/name (e.g. flashinfer-ai/flashinfer-trace, AccRL/accrl-training)."
        ),
    ],
    revision: Annotated[
        str | None, typer.Option("--revision", help="Branch, tag or commit \\[default: main].")
    ] = None,
    into: Annotated[
        str | None,
        typer.Option(
            "--into",
            help="Folder to write \\[default: $PTXBENCH_TRACESETS_ROOT/<name>, else data/tracesets/<name>].",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace the folder if it exists.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Download a FlashInfer Trace dataset from the Hugging Face Hub into a trace-set folder, validate it
    (a set in the 2025 format is migrated to the current one) and print the DATASET_ROOTS value to use.

    The Hub client's own settings apply: HF_HOME (its cache), HF_TOKEN (private or gated sets),
    HF_HUB_OFFLINE=1 (use the cache only). Exit code: 0 pulled and valid; 1 pulled but the set has errors
    (listed; the files are kept); 2 nothing pulled (bad name, download failed, folder exists).
    """
    from fibserve.datasets.hub import PullError, pull

    try:
        result = pull(repo, revision=revision, into=into, force=force)
    except PullError as exc:
        typer.secho(f"fibserve datasets pull: {exc}", err=True, fg=typer.colors.RED)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        from rich.console import Console

        console = Console(highlight=False, soft_wrap=True)
        counts = ", ".join(
            f"{result.counts[k]} {k}" for k in ("definitions", "workloads", "solutions", "traces")
        )
        console.print(
            f"pulled {result.repo} at {result.revision[:12]} into {result.path}: {counts}", markup=False
        )
        if result.format == "legacy":
            console.print("migrated from the 2025 FlashInfer Trace format:", style="yellow")
        for line in result.migrations:
            console.print(f"  {line}", style="yellow", markup=False)
        for problem in result.problems:
            console.print(problem, style="red" if problem.startswith("error") else "yellow", markup=False)
        console.print(f"DATASET_ROOTS={result.dataset_roots}", markup=False)
    raise typer.Exit(0 if result.ok else 1)
