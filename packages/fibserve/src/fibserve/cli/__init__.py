"""The `fibserve` command: thin typer commands over the fibserve library.

Each command parses options, calls one library function, and prints with rich (or JSON with `--json`).
Heavy imports (torch, triton, fastapi) happen inside the commands, so `fibserve --help` stays fast.
"""

from __future__ import annotations

from typing import Annotated

import typer

from fibserve.cli.datasets import datasets_app

app = typer.Typer(
    name="fibserve",
    help=(
        "FIBServe: build, check, run and time candidate kernels for FlashInfer Trace definitions.\n\n"
        "Trace sets are read from the roots a command is given (`definitions ROOT...`, `validate ROOT...`, "
        "`evaluate --local ROOT`) or the DATASET_ROOTS environment variable (colon-separated); the bundled "
        "default trace set is used when neither is given."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


UnsafeNoSandbox = Annotated[
    bool,
    typer.Option(
        "--unsafe-no-sandbox",
        help="Run candidate code (and nvcc) without bubblewrap: no isolation at all. Only where every "
        "candidate is trusted; every result says so. Same as FIBSERVE_UNSAFE_NO_SANDBOX=1.",
    ),
]


Legacy = Annotated[
    bool,
    typer.Option(
        "--legacy",
        help="Read the 2025 FlashInfer Trace format: migrate trace sets while loading (definition 'type', "
        "dict-returning references, workloads without uuid), and take a Python/Triton solution without "
        "destination_passing_style as value-returning (it allocates its outputs; a returned dict is read by "
        "output name).",
    ),
]


def _allow_unsafe(unsafe: bool) -> None:
    if unsafe:
        from fibserve.sandbox import allow_unsafe

        allow_unsafe()


@app.callback()
def _root() -> None:
    """FIBServe command group (the help text above describes it)."""
    _plain_migration_notes()


def _plain_migration_notes() -> None:
    """Show the 2025-format migration's notes (one per kind of change, with its count) as plain lines on
    stderr, not as Python warnings with the loader's source line under each."""
    import warnings

    from fibserve.trace.legacy import LegacyMigrationWarning

    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None) -> None:  # type: ignore[no-untyped-def]
        if issubclass(category, LegacyMigrationWarning):
            typer.secho(f"fibserve: {message}", err=True, fg=typer.colors.YELLOW)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show


app.add_typer(datasets_app, name="datasets")


@app.command("serve")
def serve_command(
    roots: Annotated[
        list[str] | None,
        typer.Argument(help="Trace-set roots (same as --local); DATASET_ROOTS or the bundled set when none."),
    ] = None,
    local: Annotated[
        list[str] | None,
        typer.Option("--local", help="Trace-set root to serve (repeat it, or separate roots with ':')."),
    ] = None,
    devices: Annotated[
        str | None,
        typer.Option(
            help="Worker lanes, comma-separated (cuda:0,cuda:1 or cpu); default: every visible GPU, else cpu."
        ),
    ] = None,
    host: Annotated[
        str, typer.Option(help="Interface to bind (loopback by default: candidates run code).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 10000,
    config: Annotated[
        str | None, typer.Option("--config", help="Evaluation config YAML laid over the packaged defaults.")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="FIBSERVE_TOKEN",
            show_default=False,
            help="Bearer token required on every request but /health and /docs.",
        ),
    ] = None,
    locked_tolerances: Annotated[
        bool,
        typer.Option(
            "--locked-tolerances",
            help=(
                "Refuse requests that set atol/rtol (HTTP 403): only --config decides what is correct. The "
                "default when a token is set: a shared benchmark or reward service, where a client sending "
                "atol 1e308 would pass any wrong kernel."
            ),
        ),
    ] = False,
    unlocked_tolerances: Annotated[
        bool,
        typer.Option(
            "--unlocked-tolerances",
            help="Accept atol/rtol from requests even with a token (the default without one: your own server).",
        ),
    ] = False,
    state_dir: Annotated[
        str | None,
        typer.Option(
            "--state-dir", help="Task database folder \\[default: $PTXBENCH_DATA_ROOT/fibserve-state]."
        ),
    ] = None,
    max_body_mb: Annotated[float, typer.Option("--max-body-mb", help="Largest request body (MiB).")] = 32.0,
    max_sources: Annotated[
        int, typer.Option("--max-sources", help="Most source files in one solution (more: HTTP 413).")
    ] = 64,
    max_source_mb: Annotated[
        float,
        typer.Option(
            "--max-source-mb", help="Largest total size of one solution's sources (MiB; more: HTTP 413)."
        ),
    ] = 8.0,
    task_ttl_s: Annotated[
        float, typer.Option("--task-ttl-s", help="Seconds finished answers are kept (default 7 days).")
    ] = 604800.0,
    max_timeout: Annotated[
        float,
        typer.Option(
            "--max-timeout",
            help="Longest per-phase 'timeout' a request may ask for (seconds; more: HTTP 422).",
        ),
    ] = 600.0,
    build_workers: Annotated[
        int | None,
        typer.Option(
            "--build-workers",
            min=0,
            metavar="N",
            help=(
                "Builds of queued CUDA/C++ candidates run ahead of the lanes at the same time (nvcc on the CPU "
                "while a lane evaluates other work; lanes take built work first); 0 turns it off "
                "\\[default: half the cores]."
            ),
            show_default=False,
        ),
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error.")] = "info",
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="ADDRESS",
            help=(
                "Run the lanes on a Ray cluster (pip install 'fibserve\\[ray]'): 'auto' ($RAY_ADDRESS, or the "
                "cluster this host is a node of) or the head's host:port. One lane actor per GPU of each node, "
                "or with --devices cpu one per unit of the node's fibserve_cpu_lane resource; this process "
                "keeps the HTTP API and the task store (docs/scale-out.md)."
            ),
        ),
    ] = None,
    legacy: Legacy = False,
    unsafe_no_sandbox: UnsafeNoSandbox = False,
) -> None:
    """Run the FIBServe HTTP service: evaluate, sanitize and profile candidates; API docs at /docs.

    Candidates run in bubblewrap sandboxes; without a usable bubblewrap the service starts but refuses them
    (the error says how to install it), unless --unsafe-no-sandbox is given.
    """
    import os

    from pydantic import ValidationError

    from fibserve.serve import ServeSettings, serve

    paths = [part for value in [*(local or []), *(roots or [])] for part in value.split(os.pathsep) if part]
    options: dict = {
        "roots": paths,
        "host": host,
        "port": port,
        "max_body_mb": max_body_mb,
        "max_sources": max_sources,
        "max_source_mb": max_source_mb,
        "task_ttl_s": task_ttl_s,
        "max_timeout_s": max_timeout,
        "unsafe_no_sandbox": unsafe_no_sandbox,
        "legacy": legacy,
    }
    if devices:
        options["devices"] = [d.strip() for d in devices.split(",") if d.strip()]
    if config:
        options["eval_config"] = config
    if token:
        options["token"] = token
    if locked_tolerances and unlocked_tolerances:
        typer.secho("fibserve serve: give --locked-tolerances or --unlocked-tolerances, not both", err=True)
        raise typer.Exit(2)
    if locked_tolerances or unlocked_tolerances:
        options["locked_tolerances"] = locked_tolerances
    if state_dir:
        options["state_dir"] = state_dir
    if ray_address is not None:
        options["ray_address"] = ray_address
    if build_workers is not None:
        options["build_workers"] = build_workers
    try:
        settings = ServeSettings(**options)
        if settings.ray_address is not None:  # refused here, before the server starts, not in its start-up
            try:
                from fibserve.ray_driver import probe
            except ImportError as exc:
                raise RuntimeError(f"--ray needs Ray ({exc}): pip install 'fibserve[ray]'") from None
            probe(settings.ray_address)
        serve(settings, log_level=log_level.lower())
    except (ValidationError, ValueError, RuntimeError) as exc:
        typer.secho(f"fibserve serve: {exc}", err=True, fg=typer.colors.RED)
        raise typer.Exit(2) from None


@app.command("schema")
def schema_command(
    kind: Annotated[
        str | None,
        typer.Option(
            "--kind", help="definition, workload, solution or trace; all four (keyed by kind) when omitted."
        ),
    ] = None,
) -> None:
    """Print the JSON Schema of FlashInfer Trace documents."""
    import json

    from fibserve.trace import all_json_schemas, json_schema

    try:
        schema = json_schema(kind) if kind else all_json_schemas()  # type: ignore[arg-type]
    except KeyError as exc:
        typer.secho(str(exc.args[0]), err=True, fg=typer.colors.RED)
        raise typer.Exit(2) from None
    typer.echo(json.dumps(schema, indent=2))


@app.command("validate")
def validate_command(
    roots: Annotated[
        list[str] | None,
        typer.Argument(
            help="Trace-set roots (folders with definitions/, workloads/, ...); default: $DATASET_ROOTS, "
            "else the bundled default trace set."
        ),
    ] = None,
    legacy: Legacy = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Load and validate trace-set roots together; print counts and every problem; exit 1 on any error."""
    import json

    from fibserve.datasets import default_roots
    from fibserve.trace.validate import validate_roots

    report = validate_roots(roots or default_roots(), legacy=legacy)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        console = Console(highlight=False, soft_wrap=True)
        table = Table(title="trace set", show_header=True)
        table.add_column("kind")
        table.add_column("count", justify="right")
        for name, count in report.counts.items():
            table.add_row(name, str(count))
        console.print(table)
        for line in report.migrations:
            console.print(line, style="yellow", markup=False)
        for problem in report.problems:
            color = "red" if problem.severity == "error" else "yellow"
            location = escape(problem.location)
            console.print(f"[{color}]{problem.severity}[/{color}] {location}: ", end="", markup=True)
            console.print(problem.message, markup=False)
        verdict = (
            "[green]valid[/green]" if report.ok else f"[red]invalid: {report.counts['errors']} error(s)[/red]"
        )
        console.print(verdict, markup=True)
        if report.suggestion:
            console.print(f"hint: {report.suggestion}", style="yellow", markup=False)
    raise typer.Exit(0 if report.ok else 1)


@app.command("definitions")
def definitions_command(
    roots: Annotated[
        list[str] | None,
        typer.Argument(help="Trace-set roots; default: $DATASET_ROOTS, else the bundled default trace set."),
    ] = None,
    legacy: Legacy = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the list as JSON.")] = False,
) -> None:
    """List the definitions a candidate can implement: name, op_type, workloads, the run(...) signature and the
    baseline Solution whose speed a candidate is measured against.

    run(...) is what the harness calls: inputs, then the preallocated outputs (destination passing style).
    Without a baseline, speedups are against the definition's reference (a PyTorch correctness oracle).
    Exit code: 0 listed; 1 the roots have load errors or no definitions (`fibserve validate` says which).
    """
    import json

    from fibserve.datasets import default_roots
    from fibserve.trace.validate import describe_definitions

    summaries, errors = describe_definitions(roots or default_roots(), legacy=legacy)
    if as_json:
        typer.echo(json.dumps([summary.to_dict() for summary in summaries], indent=2))
    else:
        from rich.console import Console
        from rich.markup import escape

        console = Console(highlight=False)
        for summary in summaries:
            console.print(
                f"[bold]{escape(summary.name)}[/bold]  {escape(summary.op_type)}, {summary.workloads} workload(s)"
            )
            console.print(f"  {escape(summary.signature)}")
            baseline = (
                f"{summary.baseline}: {summary.baseline_description}"
                if summary.baseline
                else "none (speedups are against the reference)"
            )
            console.print(f"  baseline {escape(baseline)}")
    for problem in errors[:5]:
        typer.secho(f"fibserve definitions: {problem}", err=True, fg=typer.colors.RED)
    if not legacy:
        from fibserve.trace.validate import legacy_hints

        for hint in legacy_hints(roots or default_roots()):
            typer.secho(f"fibserve definitions: hint: {hint}", err=True, fg=typer.colors.YELLOW)
    if errors or not summaries:
        what = f"{len(errors)} load error(s)" if errors else "no definitions found"
        typer.secho(
            f"fibserve definitions: {what}; `fibserve validate` lists every problem",
            err=True,
            fg=typer.colors.RED,
        )
        raise typer.Exit(1)


@app.command("check")
def check_command(
    path: Annotated[
        str, typer.Argument(help="kernel.cu / kernel.cpp (tvm-ffi), kernel.py (Triton) or solution.json")
    ],
    definition: Annotated[
        str | None,
        typer.Option(
            "--definition", help="Definition name (from DATASET_ROOTS or the bundled set) or JSON file."
        ),
    ] = None,
    arch: Annotated[
        str | None,
        typer.Option(
            "--arch", help="Target: sm_90a or sm_100a (default: TVM_FFI_CUDA_ARCH_LIST, else sm_90a)."
        ),
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option("--policy", help="Benchmark source policy: a YAML/JSON file of PolicyConfig fields."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the Analysis as JSON.")] = False,
    legacy: Legacy = False,
    unsafe_no_sandbox: UnsafeNoSandbox = False,
) -> None:
    """Static check without a GPU: source policy, build, PTX/SASS instruction families, ptxas resources.

    Exit code: 0 clean; 1 the candidate failed (policy violation, entry point that does not fit --definition,
    compile error, build timeout);
    2 usage or infrastructure error (bad file, unknown definition, missing nvcc).
    """
    from pathlib import Path

    from pydantic import ValidationError

    from fibserve.cli.tables import print_analysis
    from fibserve.static_analysis import check, load_policy, solution_from_path
    from fibserve.trace.legacy import signature_of

    _allow_unsafe(unsafe_no_sandbox)
    try:
        definition_model = _load_definition(definition, legacy=legacy) if definition else None
        definition_name = definition_model.name if definition_model is not None else None
        signature = signature_of(definition_model) if definition_model is not None else None
        solution = solution_from_path(Path(path), definition_name, legacy=legacy, signature=signature)
        policy_config = load_policy(Path(policy)) if policy else None
        analysis = check(solution, definition=definition_model, arch=arch, policy=policy_config)
    except (OSError, ValueError, ValidationError, KeyError) as exc:
        typer.secho(f"fibserve check: {exc}", err=True, fg=typer.colors.RED)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(analysis.model_dump_json(indent=2))
    else:
        print_analysis(analysis)
    raise typer.Exit({"clean": 0, "infra_error": 2}.get(analysis.status, 1))


@app.command("evaluate")
def evaluate_command(
    kernel: Annotated[
        str | None,
        typer.Argument(help="kernel.cu / kernel.cpp (tvm-ffi) or kernel.py (Triton); or use --solution."),
    ] = None,
    definition: Annotated[str, typer.Option("--definition", help="Definition name.")] = ...,  # type: ignore[assignment]
    solution: Annotated[str | None, typer.Option("--solution", help="Solution JSON file.")] = None,
    workload: Annotated[
        str, typer.Option("--workload", help="Workload uuid (or a unique prefix), or 'all'.")
    ] = "all",
    local: Annotated[
        list[str] | None,
        typer.Option(
            "--local", help="Trace-set root (repeat it); default: DATASET_ROOTS, else the bundled set."
        ),
    ] = None,
    device: Annotated[
        str | None,
        typer.Option("--device", help="cpu or cuda:N \\[default: cuda:0 when a GPU is visible, else cpu]."),
    ] = None,
    language: Annotated[
        str | None, typer.Option("--language", help="For a .py KERNEL: triton (default) or python.")
    ] = None,
    atol: Annotated[
        float | None, typer.Option("--atol", help="Absolute tolerance (request override).")
    ] = None,
    rtol: Annotated[
        float | None, typer.Option("--rtol", help="Relative tolerance (request override).")
    ] = None,
    config: Annotated[
        str | None, typer.Option("--config", help="Evaluation config YAML laid over the packaged defaults.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the EvaluationReport as JSON.")] = False,
    legacy: Legacy = False,
    unsafe_no_sandbox: UnsafeNoSandbox = False,
) -> None:
    """Evaluate a candidate offline (no server): build, check correctness against the reference, time it.

    Exit code: 0 every workload PASSED; 1 the candidate failed on some workload; 2 usage or task-level error;
    3 not executed (a CUDA candidate on a machine without a GPU: static analysis only).
    """
    if (kernel is None) == (solution is None):  # before the imports below, which load torch
        typer.secho("fibserve evaluate: give either KERNEL or --solution FILE", err=True, fg=typer.colors.RED)
        raise typer.Exit(2)

    import os
    import sys
    from pathlib import Path

    from pydantic import ValidationError
    from rich.console import Console

    from fibserve.bench.device import resolve_device
    from fibserve.cli.offline import LookupProblem, exit_code, run_offline, select
    from fibserve.cli.tables import print_report
    from fibserve.static_analysis import solution_from_path
    from fibserve.trace.legacy import signature_of

    _allow_unsafe(unsafe_no_sandbox)
    roots = [part for value in local or [] for part in value.split(os.pathsep) if part]
    try:
        definition_model, workloads, root_paths, baseline = select(roots, definition, workload, legacy=legacy)
        device = resolve_device(device)
        candidate = solution_from_path(
            Path(solution or kernel), definition, legacy=legacy, signature=signature_of(definition_model)
        )
        if kernel and language:
            # Re-validate rather than model_copy(update=...): the str must become a Language enum.
            spec = {**candidate.spec.model_dump(), "language": language}
            candidate = candidate.model_validate({**candidate.model_dump(), "spec": spec})
    except (LookupProblem, OSError, ValueError, ValidationError) as exc:
        typer.secho(f"fibserve evaluate: {exc}", err=True, fg=typer.colors.RED)
        raise typer.Exit(2) from None
    overrides = {k: v for k, v in {"atol": atol, "rtol": rtol}.items() if v is not None}
    # piped into a file or a log, rich would assume 80 columns and fold the table; a terminal keeps its width
    piped = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    console = None if as_json else Console(width=160 if piped else None)
    report = run_offline(
        definition_model,
        candidate,
        workloads,
        roots=root_paths,
        device=device,
        overrides=overrides or None,
        config_path=config,
        console=console,
        baseline=baseline,
    )
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        print_report(report, console)
    raise typer.Exit(exit_code(report))


def _load_definition(name_or_path: str, *, legacy: bool = False):
    """A Definition from a JSON file path, or by name from DATASET_ROOTS / the bundled trace set (through the
    2025-format migration with ``legacy``).

    Raises:
        fibserve.cli.offline.LookupProblem: unknown name (the message suggests close matches).
    """
    from pathlib import Path

    from fibserve.trace import Definition

    candidate = Path(name_or_path)
    if candidate.suffix == ".json" and candidate.is_file():
        if not legacy:
            return Definition.model_validate_json(candidate.read_text())
        import json

        from fibserve.trace.legacy import Migrator

        return Definition.model_validate(Migrator().definition(json.loads(candidate.read_text())))
    from fibserve.cli.offline import find_definition
    from fibserve.datasets import load_trace_set

    return find_definition(load_trace_set(migrate_legacy=legacy, strict=False), name_or_path, legacy=legacy)


def main() -> None:
    """Entry point for `python -m fibserve`."""
    app()
