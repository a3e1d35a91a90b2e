"""``ptxbench prompts``: list the prompt tags with their sizes, and print a composed prompt."""

from __future__ import annotations

from typing import Annotated

import typer

app = typer.Typer(
    name="prompts",
    help=(
        "The agent's system prompts. A prompt tag composes knowledge fragments, helper headers and pattern "
        "documents (registry: mini_ptx_agent/prompts/tags.toml); --prompt-tag of `ptxbench run` selects one."
    ),
    no_args_is_help=True,
    add_completion=False,
)


@app.command("list")
def list_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print the listing as JSON.")] = False,
) -> None:
    """Every prompt tag with its target, size in characters and in tokens (tiktoken cl100k_base from the files
    litellm bundles, counted offline), and what it adds. Exit 0, or 2 when no offline tokenizer is installed."""
    from mini_ptx_agent.prompts.summary import summarize_tags
    from mini_ptx_agent.prompts.tokens import TokenizerUnavailableError

    try:
        listing = summarize_tags()
    except TokenizerUnavailableError as error:
        typer.secho(f"error: {error}", err=True, fg=typer.colors.RED)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(listing.model_dump_json(indent=2))
        return
    rows = [("tag", "target", "chars", "tokens", "made of")]
    for row in listing.tags:
        made_of = (
            " + ".join(row.parts) if any("/" not in p for p in row.parts) else f"{len(row.parts)} fragments"
        )
        rows.append((row.name, row.target, str(row.chars), str(row.tokens), made_of))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        typer.echo(
            f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]:>{widths[3]}}  {r[4]}"
        )
    typer.echo(f"\ntokens: {listing.tokenizer_description}; descriptions: --json")


@app.command("show")
def show_command(
    tag: Annotated[
        str, typer.Argument(help="The prompt tag, e.g. hopper-no-hint (see `ptxbench prompts list`).")
    ],
    fragments: Annotated[
        bool, typer.Option("--fragments", help="Print the tag's fragments in order instead of the prompt.")
    ] = False,
) -> None:
    """Print the composed system prompt of TAG exactly as the model receives it. Exit 2 for an unknown tag (the
    message suggests close matches)."""
    from mini_ptx_agent.prompts import UnknownPromptTagError, compose_system_prompt, get_prompt_tag

    try:
        spec = get_prompt_tag(tag)
    except UnknownPromptTagError as error:
        typer.secho(f"error: {error}", err=True, fg=typer.colors.RED)
        raise typer.Exit(2) from None
    if fragments:
        typer.echo("\n".join(spec.fragments))
    else:
        typer.echo(compose_system_prompt(tag), nl=False)
