"""`ptxbench quickstart`: the main job in one command (issue 7).

``--run`` runs one 3-turn agent trajectory on the Hopper GEMM ``gemm_n7168_k5120`` (workload M = 8192, uuid
``94920358-...``, target 1.0x) into ``data/eval_runs/quickstart-<UTC>-<language>-gemm/``. Without ``SERVICE_URL``
it starts an embedded FIBServe on this machine (GPU lanes when there are GPUs, else CPU mode, where CUDA is
compiled and analysed but not executed). Without ``MODEL_NAME`` it replays the bundled demo trajectory
(:mod:`mini_ptx_agent.demo`) and says loudly that this is a demo. ``--check`` verifies each dependency and
prints one ``OK``/``FAIL`` line per dependency.

Environment: ``PTXBENCH_ROOT`` (repository root; its ``data/`` is the default data root),
``PTXBENCH_DATA_ROOT`` (data root; runs go to ``<it>/eval_runs``), ``PTXBENCH_TRACESETS_ROOT`` (where relative
``DATASET_ROOTS`` entries live), ``DATASET_ROOTS`` (colon-separated trace-set roots for the embedded service;
default: fibserve's bundled set), ``SERVICE_URL`` (a running FIBServe; ``FIBSERVE_TOKEN`` its bearer token),
``MODEL_NAME`` and ``ACCRL_MODEL_HOST`` (the model; see :func:`mini_ptx_agent.models.make_model`).

Importing this module is cheap; mini-swe-agent is imported when a run starts, litellm only for a hosted model.
"""

from __future__ import annotations

import datetime as _dt
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .demo import DEMO_DEFINITION, DEMO_MODEL_NAME
from .runs import DEFAULT_OUTPUT_ROOT, RunLayout, RunPlan, RunSummary, default_prompt_tag, utc_stamp
from .task import TaskConfig
from .trajectory import write_json

if TYPE_CHECKING:
    from .quickstart_report import QuickstartResult

QUICKSTART_DEFINITION = DEMO_DEFINITION
QUICKSTART_WORKLOAD = "94920358-01a8-4c5b-9209-3103fd490e94"
"""The M = 8192 workload of ``gemm_n7168_k5120`` (from the PTXBench GEMM problem list)."""
QUICKSTART_TARGET = 1.0
"""Target speedup over the definition's reference (torch.matmul, cuBLAS on a GPU), x."""
QUICKSTART_TURNS = 3


class QuickstartError(RuntimeError):
    """The quickstart cannot start (bad option, model misconfigured); the message says what to fix."""


class QuickstartRefused(QuickstartError):
    """The run is refused before anything is started (no service, no run directory); the message says why."""


TRITON_NEEDS_GPU = (
    "the Triton quickstart needs a GPU: gemm_n7168_k5120 is bfloat16 and the Triton CPU interpreter computes "
    "bfloat16 tl.dot wrongly, so FIBServe refuses to evaluate it in CPU mode"
)
TRITON_ALTERNATIVES = (
    "Run --language cuda (compiled and analysed on CPU), or set SERVICE_URL to a FIBServe with a GPU."
)


class QuickstartSettings(BaseModel):
    """Options and environment of one quickstart invocation, resolved once."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    language: Literal["cuda", "triton"] = "cuda"
    model: str | None = None
    """``--model`` else ``MODEL_NAME``; None = the bundled demo replay."""
    model_host: str | None = None
    """``--model-host`` else ``ACCRL_MODEL_HOST`` (an OpenAI-compatible endpoint, ``host:port``)."""
    service_url: str | None = None
    """``--service-url`` else ``SERVICE_URL``; None = an embedded FIBServe."""
    output_root: Path
    """Parent of the run directory."""
    dataset_roots: list[Path] = Field(default_factory=list)
    """Trace-set roots for an embedded FIBServe (empty: fibserve's bundled set)."""
    require_gpu: bool = False
    """Count a machine without GPU lanes as a FAIL in ``--check`` (for GPU validation)."""

    @classmethod
    def resolve(
        cls,
        *,
        language: str = "cuda",
        model: str | None = None,
        model_host: str | None = None,
        service_url: str | None = None,
        output_root: Path | None = None,
        require_gpu: bool = False,
        environ: dict[str, str] | None = None,
    ) -> QuickstartSettings:
        """Options first, then the environment (``environ``, default ``os.environ``).

        Raises:
            QuickstartError: an unknown language.
        """
        env = os.environ if environ is None else environ
        if language not in ("cuda", "triton"):
            raise QuickstartError(f"--language must be cuda or triton, not {language!r}")
        return cls(
            language=language,  # type: ignore[arg-type]
            model=model or env.get("MODEL_NAME") or None,
            model_host=model_host or env.get("ACCRL_MODEL_HOST") or None,
            service_url=(service_url or env.get("SERVICE_URL") or "").rstrip("/") or None,
            output_root=output_root or default_output_root(env),
            dataset_roots=dataset_roots(env),
            require_gpu=require_gpu,
        )


def default_output_root(env: dict[str, str] | os._Environ) -> Path:
    """``$PTXBENCH_DATA_ROOT/eval_runs``, else ``$PTXBENCH_ROOT/data/eval_runs``, else ``./data/eval_runs``."""
    if env.get("PTXBENCH_DATA_ROOT"):
        return Path(env["PTXBENCH_DATA_ROOT"]) / "eval_runs"
    if env.get("PTXBENCH_ROOT"):
        return Path(env["PTXBENCH_ROOT"]) / DEFAULT_OUTPUT_ROOT
    return DEFAULT_OUTPUT_ROOT


def dataset_roots(env: dict[str, str] | os._Environ) -> list[Path]:
    """``DATASET_ROOTS`` entries; relative ones are taken under ``PTXBENCH_TRACESETS_ROOT`` when it is set."""
    base = Path(env["PTXBENCH_TRACESETS_ROOT"]) if env.get("PTXBENCH_TRACESETS_ROOT") else None
    roots = []
    for entry in (env.get("DATASET_ROOTS") or "").split(":"):
        if entry.strip():
            path = Path(entry.strip())
            roots.append(base / path if base is not None and not path.is_absolute() else path)
    return roots


def local_gpu_available() -> bool:
    """Whether an embedded FIBServe on this machine would get a GPU lane.

    The same test as ``fibserve.serve.settings.resolve_devices`` (the embedded server's default lanes):
    ``torch.cuda.is_available()`` and at least one device; otherwise its only lane is ``cpu``. Imports torch.
    """
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.device_count() > 0)


def refusal_before_start(settings: QuickstartSettings) -> str | None:
    """Why the run must be refused before anything starts, or None.

    Known up front only for Triton with an embedded service (no ``SERVICE_URL``) on a machine without a GPU;
    a remote service's lanes are known only from its ``/health``, so that refusal happens during the run.
    """
    if settings.language != "triton" or settings.service_url or local_gpu_available():
        return None
    return (
        f"{TRITON_NEEDS_GPU}; SERVICE_URL is not set and this machine has no GPU (torch.cuda.is_available() is "
        f"False), so nothing was started and no run directory was created. {TRITON_ALTERNATIVES}"
    )


def quickstart_task(language: str) -> TaskConfig:
    """The quickstart task: the GEMM, its M = 8192 workload, target 1.0x, Hopper (sm_90a)."""
    return TaskConfig(
        definition=QUICKSTART_DEFINITION,
        workloads=[QUICKSTART_WORKLOAD],
        language=language,  # type: ignore[arg-type]
        target_speedup=QUICKSTART_TARGET,
        arch="sm_90a",
    )


# -- --run ------------------------------------------------------------------------------------------------------


class _Progress:
    """Live per-turn display: wraps the model (waiting) and the backend (evaluating, then one line per turn)."""

    def __init__(self, progress: Any, num_turns: int, where: str):
        self.progress = progress
        self.num_turns = num_turns
        self.where = where
        self.turn = 0
        self.task = progress.add_task("starting", total=num_turns)

    def model(self, model: Any) -> Any:
        outer = self

        class _Model:
            def __getattr__(self, name: str) -> Any:
                return getattr(model, name)

            def query(self, messages: list[dict], **kwargs: Any) -> dict:
                outer.turn += 1
                outer.show(f"turn {outer.turn}/{outer.num_turns}: waiting for the model")
                reply = model.query(messages, **kwargs)
                outer.show(f"turn {outer.turn}/{outer.num_turns}: evaluating on FIBServe ({outer.where})")
                return reply

        return _Model()

    def backend(self, backend: Any) -> Any:
        outer = self

        class _Backend:
            def __getattr__(self, name: str) -> Any:
                return getattr(backend, name)

            def evaluate(self, solution: Any, task: TaskConfig) -> Any:
                started = time.monotonic()
                report = backend.evaluate(solution, task)
                outer.done(report, time.monotonic() - started)
                return report

        return _Backend()

    def show(self, text: str) -> None:
        self.progress.update(self.task, description=text)

    def done(self, report: Any, seconds: float) -> None:
        speed = ""
        if report.min_speedup is not None:
            speed = f", {report.min_speedup:.3f}x" + ("" if report.executed_on_gpu else " (not a GPU timing)")
        families = ", ".join((report.static_analysis.ptx_families if report.static_analysis else []) or [])
        self.progress.console.print(
            f"  turn {self.turn}: {report.status.value}{speed}"
            f"{'; PTX: ' + families if families else ''}; evaluated in {seconds:.1f} s",
            markup=False,
            highlight=False,
        )
        self.progress.advance(self.task)


def _new_run_dir(output_root: Path, language: str) -> Path:
    for attempt in range(10):
        suffix = "" if attempt == 0 else f"-{attempt}"
        path = Path(output_root) / f"quickstart-{utc_stamp()}-{language}-gemm{suffix}"
        try:
            path.mkdir(parents=True, exist_ok=False)
            return path
        except FileExistsError:
            continue
    raise QuickstartError(f"could not create a new run directory under {output_root}")


def _make_model(settings: QuickstartSettings, run_dir: Path | None) -> tuple[Any, str]:
    """The configured model, or the demo replay written into ``run_dir/demo``. Returns (model, name)."""
    if settings.model:
        from .models import ModelConfigError, ModelUnavailableError, make_model

        try:
            model = make_model(settings.model, model_host=settings.model_host)
        except (ModelConfigError, ModelUnavailableError) as exc:
            raise QuickstartError(f"model {settings.model}: {exc}") from None
        return model, settings.model
    if settings.model_host:
        raise QuickstartError(
            f"ACCRL_MODEL_HOST={settings.model_host} is set but MODEL_NAME is not; set MODEL_NAME to the served id"
        )
    if run_dir is None:
        return None, DEMO_MODEL_NAME
    from .demo import write_demo_trajectory
    from .models_replay import ReplayModel

    path = write_demo_trajectory(settings.language, run_dir / "demo" / f"trajectory_{settings.language}.json")
    return ReplayModel(path=path, model_name=DEMO_MODEL_NAME, fallback=True), DEMO_MODEL_NAME


def _failed_summary(run_id: str, status: str, message: str, started: float) -> RunSummary:
    return RunSummary(
        run_id=run_id, exit_status=status, exit_message=message, runner_completed=False, kernel_correct=False,
        target_met=False, turns=0, infrastructure_error=message if status == "InfrastructureError" else None,
        elapsed_s=round(time.time() - started, 3),
    )  # fmt: skip


DEMO_BANNER = (
    "DEMO REPLAY: MODEL_NAME is not set, so the bundled demo trajectory is replayed. Its three kernels were "
    "written by the PTXBench authors; what follows is NOT a model's result. Set MODEL_NAME (and ACCRL_MODEL_HOST "
    "for a vLLM/SGLang endpoint) to evaluate a model."
)


def run_quickstart(settings: QuickstartSettings, console: Any | None = None) -> tuple[Path, QuickstartResult]:
    """Run the quickstart; returns the run directory and its :class:`QuickstartResult` (also written to disk).

    The run never raises for a service or model API failure: those end the run (exit status
    ``InfrastructureError``) and the result says so. A Triton run on a service without GPU lanes is refused
    because the bf16 GEMM cannot be evaluated by the Triton CPU interpreter: before anything starts when that is
    known up front (:func:`refusal_before_start`), else with exit status ``Refused`` once ``/health`` shows it.

    Raises:
        QuickstartRefused: refused up front (nothing is started or written then).
        QuickstartError: the model is misconfigured (nothing is written then).
    """
    from fibserve.client import FIBServeError
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from .evaluation import EvaluationInfrastructureError, FIBServeBackend
    from .quickstart_report import CONTEXT_FILE, build_result, write_result
    from .runs import run_experiment
    from .service import ServiceStartError
    from .service import service_url as resolve_service

    console = console or Console(highlight=False)
    refusal = refusal_before_start(settings)
    if refusal is not None:
        raise QuickstartRefused(refusal)
    started = time.time()
    if settings.model:
        model, model_name = _make_model(settings, None)  # a misconfigured model must not leave a directory
    run_dir = _new_run_dir(settings.output_root, settings.language)
    if not settings.model:
        model, model_name = _make_model(settings, run_dir)
    layout = RunLayout(run_dir)
    task = quickstart_task(settings.language)
    plan = RunPlan(
        run_id=run_dir.name,
        created_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        task=task,
        model=model_name,
        prompt_tag=default_prompt_tag(task),
        num_turns=QUICKSTART_TURNS,
        service=settings.service_url or "embedded",
    )
    context: dict[str, Any] = {"demo": not settings.model, "refused": None}
    if not settings.model:
        context["demo_trajectory"] = f"demo/trajectory_{settings.language}.json"
    console.print(f"run directory: {run_dir}", markup=False)
    summary: RunSummary | None = None
    try:
        console.print(
            "starting the embedded FIBServe ..."
            if not settings.service_url
            else f"FIBServe: {settings.service_url}"
        )
        with resolve_service(
            settings.service_url, log_path=layout.service_log_path, roots=settings.dataset_roots
        ) as (url, embedded):
            token = None if embedded else (os.environ.get("FIBSERVE_TOKEN") or None)
            backend = FIBServeBackend(url, token=token)
            try:
                health = backend.client.health()
            except FIBServeError as exc:
                raise EvaluationInfrastructureError(f"GET /health: {exc}") from exc
            lanes = [w.device for w in health.workers]
            gpu = any(lane.startswith("cuda") for lane in lanes)
            context["service"] = {
                "kind": "embedded" if embedded else "remote",
                "url": None if embedded else url,
                "lanes": lanes,
                "gpu": gpu,
                "version": health.version,
            }
            write_json(run_dir / CONTEXT_FILE, context)
            if not gpu:
                console.print(
                    "[yellow]CPU mode: no GPU lane; "
                    + (
                        "CUDA kernels are compiled and analysed, not executed.[/]"
                        if settings.language == "cuda"
                        else "the Triton GEMM cannot be evaluated here.[/]"
                    )
                )
            if settings.language == "triton" and not gpu:
                context["refused"] = f"{TRITON_NEEDS_GPU}. {TRITON_ALTERNATIVES}"
                write_json(run_dir / CONTEXT_FILE, context)
                write_json(layout.plan_path, plan.model_dump(mode="json"))
                summary = _failed_summary(plan.run_id, "Refused", context["refused"], started)
                write_json(layout.summary_path, summary.model_dump(mode="json"))
            else:
                if not settings.model:  # only now is it certain that the demo is replayed
                    console.print(f"[bold black on yellow] {escape(DEMO_BANNER)} [/]")
                where = ", ".join(lanes)
                with Progress(
                    SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                    console=console, transient=True,
                ) as progress:  # fmt: skip
                    live = _Progress(progress, QUICKSTART_TURNS, where)
                    summary = run_experiment(
                        plan, run_dir, backend=live.backend(backend), model=live.model(model)
                    )
    except (ServiceStartError, EvaluationInfrastructureError) as exc:
        summary = _failed_summary(
            plan.run_id, "InfrastructureError", f"evaluation service unavailable: {exc}", started
        )
        write_json(layout.plan_path, plan.model_dump(mode="json"))
        write_json(layout.summary_path, summary.model_dump(mode="json"))
        if not (run_dir / CONTEXT_FILE).is_file():
            write_json(run_dir / CONTEXT_FILE, context)
    result = build_result(run_dir)
    write_result(run_dir, result)
    return run_dir, result


def report(run_dir: Path) -> QuickstartResult:
    """Rebuild (and rewrite) ``quickstart-result.json`` of ``run_dir`` from its files; returns the result.

    Raises:
        FileNotFoundError: not a run directory.
    """
    from .quickstart_report import build_result, write_result

    result = build_result(run_dir)
    write_result(run_dir, result)
    return result


# -- the command's body (cli.py stays thin) ---------------------------------------------------------------------


def quickstart_main(
    *,
    check: bool,
    run: bool,
    report_dir: Path | None,
    language: str = "cuda",
    model: str | None = None,
    model_host: str | None = None,
    service_url: str | None = None,
    output_root: Path | None = None,
    require_gpu: bool = False,
    as_json: bool = False,
) -> int:
    """`ptxbench quickstart`: exactly one of ``check``, ``run``, ``report_dir``; prints; returns the exit code."""
    import json

    from rich.console import Console
    from rich.markup import escape

    from .quickstart_report import render

    out = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if sum([check, run, report_dir is not None]) != 1:
        err.print("[red]error:[/] give exactly one of --check, --run or --report DIR")
        return 2
    try:
        if report_dir is not None:
            result = report(report_dir)
            if as_json:
                out.print_json(result.model_dump_json())
            else:
                render(result, report_dir, out)
            return 0
        settings = QuickstartSettings.resolve(
            language=language, model=model, model_host=model_host, service_url=service_url,
            output_root=output_root, require_gpu=require_gpu,
        )  # fmt: skip
        if check:
            from .quickstart_check import run_checks

            lines = run_checks(settings)
            if as_json:
                out.print(json.dumps([line.model_dump() for line in lines], indent=2), markup=False)
            else:
                for line in lines:
                    verdict = "[green]OK  [/]" if line.ok else "[red]FAIL[/]"
                    out.print(f"{verdict} {line.name:<10} {escape(line.detail)}")
            return 0 if all(line.ok for line in lines) else 1
        run_dir, result = run_quickstart(settings, console=err if as_json else out)
    except QuickstartRefused as exc:
        err.print(f"[red]refused:[/] {escape(str(exc))}")
        return 2
    except (QuickstartError, FileNotFoundError) as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        return 2
    if as_json:
        out.print(result.model_dump_json(indent=2), markup=False)
    else:
        render(result, run_dir, out)
    return 0 if result.runner_completed else 2
