"""``ptxbench data``: the Fixit and KernelGen steps and the SFT builder, each a thin command over one library call.

Exit status: 0 done; 1 some items failed on a model or service outage (run the same command again: finished
calls are not repeated); 130 after Ctrl-C (the same); 2 for input that cannot be used (the message says what
to fix; nothing done is lost).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(
    name="data",
    help=(
        "Training data from experiments (docs/training-data.md). Fixit: `failures` -> `repair` -> `pairs` -> "
        "`sft --recipe fixit`. KernelGen: `kernelgen` -> `reasoning` -> `sft --recipe kernelgen`. Each step "
        "writes a directory the next one reads, and can be run again after Ctrl-C or a kill without repeating "
        "a finished model call."
    ),
    no_args_is_help=True,
    add_completion=False,
)

Sources = Annotated[list[Path], typer.Argument(help="Experiment directories (or single run directories).")]
Output = Annotated[Path, typer.Option("--output", "-o", help="The directory this step writes.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
Limit = Annotated[int | None, typer.Option("--limit", min=1, help="At most this many records in all.")]
ModelOpt = Annotated[
    str, typer.Option("--model", help="The model: a litellm name, or a served id with --model-host.")
]
HostOpt = Annotated[
    str | None,
    typer.Option(
        "--model-host", help="host:port of an OpenAI-compatible endpoint; default $ACCRL_MODEL_HOST."
    ),
]
Concurrency = Annotated[int, typer.Option("--concurrency", min=1, help="Model calls in flight at once.")]
DryRun = Annotated[
    bool,
    typer.Option("--dry-run", help="Say what would be called (calls, tokens, cost) and call nothing."),
]


def _fail(message: str) -> typer.Exit:
    typer.secho(f"error: {message}", err=True, fg=typer.colors.RED)
    return typer.Exit(2)


def _bad_input() -> tuple[type[Exception], ...]:
    from ..environment.embedded import ServiceStartError
    from ..models import ModelConfigError
    from .records import DataStepError

    return (DataStepError, ModelConfigError, ServiceStartError)


def _print(result: Any, as_json: bool) -> None:
    data = result.model_dump(mode="json") if hasattr(result, "model_dump") else result
    if as_json:
        typer.echo(json.dumps(data, indent=2))
        return
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True)
    for key, value in data.items():
        if value not in ({}, [], None):
            console.print(
                f"{key}: {json.dumps(value) if isinstance(value, dict | list) else value}", markup=False
            )


def _step(call: Callable[[], Any], as_json: bool) -> None:
    """Run one step (``call``), then :func:`_finish`; input it cannot use exits 2 with its message."""
    try:
        result = call()
    except _bad_input() as exc:
        raise _fail(str(exc)) from None
    _finish(result, as_json)


def _finish(result: Any, as_json: bool) -> None:
    """Print, then exit 130 when interrupted, 1 when items failed, else 0 (a dry run: 0)."""
    _print(result, as_json)
    if getattr(result, "interrupted", False):
        typer.secho("interrupted: run the same command again to continue", err=True)
        raise typer.Exit(130)
    if getattr(result, "failed", None):
        typer.secho(
            f"{len(result.failed)} item(s) failed: run the same command again to retry them", err=True
        )
        raise typer.Exit(1)


@app.command("failures")
def failures_command(
    sources: Sources,
    output: Output,
    classes: Annotated[
        str,
        typer.Option(
            help="Failure classes to mine, comma-separated: compile, runtime, incorrect, timeout, policy."
        ),
    ] = "compile,runtime,incorrect,timeout,policy",
    per_cell: Annotated[
        int | None, typer.Option("--per-cell", min=1, help="At most N per definition and failure class.")
    ] = None,
    limit: Limit = None,
    as_json: JsonOpt = False,
) -> None:
    """Fixit, step 1: mine failed kernels (deduplicated by kernel hash, rebalanced) into failures.jsonl."""
    from .mining import mine_failures

    wanted = [c.strip() for c in classes.split(",") if c.strip()]
    _step(lambda: mine_failures(sources, output, classes=wanted, per_cell=per_cell, limit=limit), as_json)  # type: ignore[arg-type]


@app.command("kernelgen")
def kernelgen_command(
    sources: Sources,
    output: Output,
    per_definition: Annotated[
        int | None, typer.Option("--per-definition", min=1, help="At most N kernels per definition.")
    ] = None,
    limit: Limit = None,
    as_json: JsonOpt = False,
) -> None:
    """KernelGen, step 1: collect kernels that passed every workload (deduplicated) into kernels.jsonl."""
    from .mining import mine_kernels

    _step(lambda: mine_kernels(sources, output, per_cell=per_definition, limit=limit), as_json)


@app.command("repair")
def repair_command(
    failures: Annotated[Path, typer.Argument(help="failures.jsonl, or the directory of `data failures`.")],
    output: Output,
    model: ModelOpt,
    model_host: HostOpt = None,
    service_url: Annotated[
        str | None,
        typer.Option("--service-url", help="FIBServe URL; default $SERVICE_URL, else an embedded one."),
    ] = None,
    concurrency: Concurrency = 4,
    limit: Limit = None,
    dry_run: DryRun = False,
    as_json: JsonOpt = False,
) -> None:
    """Fixit, step 2: one repair turn per failure by MODEL, each fix evaluated through FIBServe."""
    from rich.console import Console

    from .repair import repair_failures

    _step(
        lambda: repair_failures(
            failures,
            output,
            model=model,
            model_host=model_host,
            service_url=service_url,
            concurrency=concurrency,
            limit=limit,
            dry_run=dry_run,
            console=Console(stderr=True),
        ),
        as_json,
    )


@app.command("pairs")
def pairs_command(
    repairs: Annotated[Path, typer.Argument(help="repairs.jsonl, or the directory of `data repair`.")],
    output: Output,
    require_architecture: Annotated[
        bool,
        typer.Option(
            "--require-architecture",
            help="Keep only fixes whose compiled code has the target's families (wgmma and TMA on sm_90a).",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Fixit, step 3: keep wrong -> fixed pairs whose fix passed every workload, into pairs.jsonl."""
    from .pairs import make_pairs

    _step(lambda: make_pairs(repairs, output, require_architecture=require_architecture), as_json)


@app.command("reasoning")
def reasoning_command(
    kernels: Annotated[Path, typer.Argument(help="kernels.jsonl, or the directory of `data kernelgen`.")],
    output: Output,
    model: ModelOpt,
    model_host: HostOpt = None,
    concurrency: Concurrency = 4,
    limit: Limit = None,
    dry_run: DryRun = False,
    as_json: JsonOpt = False,
) -> None:
    """KernelGen, step 2: MODEL writes the reasoning that leads to each kernel, into reasoning.jsonl."""
    from rich.console import Console

    from .reasoning import write_reasoning

    _step(
        lambda: write_reasoning(
            kernels,
            output,
            model=model,
            model_host=model_host,
            concurrency=concurrency,
            limit=limit,
            dry_run=dry_run,
            console=Console(stderr=True),
        ),
        as_json,
    )


@app.command("sft")
def sft_command(
    source: Annotated[
        Path, typer.Argument(help="pairs (fixit) or reasoning (kernelgen): the file or its directory.")
    ],
    recipe: Annotated[str, typer.Option("--recipe", help="fixit or kernelgen.")],
    output: Output,
    max_tokens: Annotated[
        int, typer.Option("--max-tokens", min=1, help="Leave out rows longer than this (cl100k_base tokens).")
    ] = 32768,
    include_flagged: Annotated[
        bool,
        typer.Option("--include-flagged", help="Keep rows whose kernel the evaluator flagged (labelled)."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write the SFT dataset: sft.parquet, sft.jsonl (rows of ptxbench.sft/1), card.json and README.md."""
    from .sft import build_sft

    if recipe not in ("fixit", "kernelgen"):
        raise _fail(f"--recipe {recipe!r}: choose fixit or kernelgen")
    _step(
        lambda: build_sft(recipe, source, output, max_tokens=max_tokens, include_flagged=include_flagged),  # type: ignore[arg-type]
        as_json,
    )


train_app = typer.Typer(
    name="train",
    help=(
        "Fine-tune on Tinker from an SFT dataset (the optional `training` extra: uv sync --all-packages --extra "
        "training). Needs TINKER_API_KEY in the environment or a git-ignored .env; the key is never written."
    ),
    no_args_is_help=True,
    add_completion=False,
)
BaseUrl = Annotated[
    str | None,
    typer.Option("--base-url", help="The Tinker API; default $TINKER_BASE_URL, else Tinker's own."),
]


def _training_errors() -> tuple[type[Exception], ...]:
    from .training import TrainingAPIError, TrainingSetupError

    return (TrainingSetupError, TrainingAPIError)


@train_app.command("sft")
def train_sft_command(
    dataset: Annotated[Path, typer.Argument(help="The directory of `ptxbench data sft` (or its sft.jsonl).")],
    log_dir: Annotated[
        Path, typer.Option("--log-dir", help="Metrics and checkpoint records; the same directory resumes.")
    ],
    base_model: Annotated[str, typer.Option("--base-model", help="The model Tinker fine-tunes (LoRA).")] = (
        "Qwen/Qwen3-8B"
    ),
    renderer: Annotated[
        str | None,
        typer.Option("--renderer", help="The cookbook's chat renderer; default: its recommendation."),
    ] = None,
    lora_rank: Annotated[int, typer.Option("--lora-rank", min=1)] = 32,
    learning_rate: Annotated[float, typer.Option("--learning-rate", min=0.0)] = 1e-4,
    epochs: Annotated[int, typer.Option("--epochs", min=1)] = 1,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1)] = 8,
    max_length: Annotated[
        int, typer.Option("--max-length", min=1, help="Tokens per row, base tokenizer.")
    ] = 32768,
    base_url: BaseUrl = None,
    as_json: JsonOpt = False,
) -> None:
    """Start (or resume) a Tinker SFT run on DATASET, the loss on each row's final assistant message."""
    from .training import SFTRunConfig, start_sft

    try:
        config = SFTRunConfig(
            dataset=dataset, log_dir=log_dir, base_model=base_model, renderer=renderer, lora_rank=lora_rank,
            learning_rate=learning_rate, epochs=epochs, batch_size=batch_size, max_length=max_length,
            base_url=base_url,
        )  # fmt: skip
        run = start_sft(config)
    except _training_errors() as exc:
        raise _fail(str(exc)) from None
    _print(run, as_json)


@train_app.command("export")
def train_export_command(
    source: Annotated[
        str, typer.Argument(help="A log directory of `train sft`, or a tinker:// checkpoint path.")
    ],
    output: Output,
    base_url: BaseUrl = None,
) -> None:
    """Download a run's last sampler checkpoint (or the tinker:// path given) into OUTPUT."""
    from .training import export_checkpoint

    try:
        path = export_checkpoint(source, output, base_url=base_url)
    except _training_errors() as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"checkpoint written to {path}")
