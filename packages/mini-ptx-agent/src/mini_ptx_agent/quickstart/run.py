"""`ptxbench quickstart --run` (the 3-turn GEMM trajectory into a new run directory, and its result) and
`--resume DIR` (continuing one that was stopped).

Refused at once, before anything starts, when the result is known up front (Triton without a GPU and without
``SERVICE_URL``); otherwise the model (or the demo replay), the service (``SERVICE_URL`` or an embedded FIBServe)
and the run (:func:`mini_ptx_agent.runs.launch.run_trajectory`), then ``quickstart-result.json``
(:mod:`~mini_ptx_agent.quickstart.report`).
"""

from __future__ import annotations

import datetime as _dt
import glob
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..demo import DEMO_MODEL_NAME
from ..runs.directory import RunLayout, RunPlan, new_run_dir, run_name
from ..runs.options import default_prompt_tag
from ..runs.summary import failed_summary
from ..trajectory import write_json
from .settings import (
    QUICKSTART_DEFINITION,
    QUICKSTART_TURNS,
    TRITON_ALTERNATIVES,
    TRITON_NEEDS_GPU,
    QuickstartError,
    QuickstartRefused,
    QuickstartSettings,
    quickstart_task,
)

if TYPE_CHECKING:
    from ..task import TaskConfig
    from .report import QuickstartResult


def no_gpu_for_certain(environ: dict[str, str] | os._Environ | None = None) -> bool:
    """Whether this machine certainly has no GPU torch could use, decided without importing torch (seconds).

    True when ``CUDA_VISIBLE_DEVICES`` hides every device (empty, or starting with ``-1``), on macOS, or on
    Linux when no ``/dev/nvidia<N>`` device node exists (the NVIDIA driver creates one per GPU, containers
    given a GPU see it). False means "maybe": :func:`local_gpu_available` asks torch.
    """
    env = os.environ if environ is None else environ
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and (not visible.strip() or visible.strip().startswith("-1")):
        return True
    if sys.platform == "darwin":
        return True
    return sys.platform.startswith("linux") and not glob.glob("/dev/nvidia[0-9]*")


def local_gpu_available() -> bool:
    """Whether an embedded FIBServe on this machine would get a GPU lane.

    The same test as ``fibserve.serve.settings.resolve_devices`` (the embedded server's default lanes):
    ``torch.cuda.is_available()`` and at least one device; otherwise its only lane is ``cpu``. Imports torch
    only when :func:`no_gpu_for_certain` cannot rule a GPU out.
    """
    if no_gpu_for_certain():
        return False
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.device_count() > 0)


def refusal_before_start(settings: QuickstartSettings, *, resuming: bool = False) -> str | None:
    """Why the run must be refused before anything starts, or None (``resuming``: for `--resume`, whose run
    directory exists already).

    Known up front only for Triton with an embedded service (no ``SERVICE_URL``) on a machine without a GPU;
    a remote service's lanes are known only from its ``/health``, so that refusal happens during the run.
    """
    if settings.language != "triton" or settings.service_url or local_gpu_available():
        return None
    created = "" if resuming else " and no run directory was created"
    return (
        f"{TRITON_NEEDS_GPU}; SERVICE_URL is not set and this machine has no GPU, so nothing was started{created}. "
        f"{TRITON_ALTERNATIVES}"
    )


def _new_run_dir(output_root: Path, task: TaskConfig) -> Path:
    """A new ``quickstart-<UTC>-<language>-gemm`` run directory under ``output_root``.

    Raises:
        QuickstartError: ten names in a row were taken.
    """
    name = run_name(task, kind="quickstart", label="gemm")
    try:
        return new_run_dir(output_root, name, attempts=10)
    except FileExistsError:
        raise QuickstartError(f"could not create a new run directory under {output_root}") from None


def _make_model(settings: QuickstartSettings, run_dir: Path | None) -> tuple[Any, str]:
    """The configured model, or the demo replay written into ``run_dir/demo``. Returns (model, name)."""
    if settings.model:
        from ..models import ModelConfigError, ModelUnavailableError, make_model

        try:
            model = make_model(
                settings.model, model_host=settings.model_host, definition=QUICKSTART_DEFINITION,
                language=settings.language,
            )  # fmt: skip
        except (ModelConfigError, ModelUnavailableError) as exc:
            raise QuickstartError(f"model {settings.model}: {exc}") from None
        return model, settings.model
    if settings.model_host:
        raise QuickstartError(
            f"ACCRL_MODEL_HOST={settings.model_host} is set but MODEL_NAME is not; set MODEL_NAME to the served id"
        )
    if run_dir is None:
        return None, DEMO_MODEL_NAME
    from ..demo import write_demo_trajectory
    from ..models.replay import ReplayModel

    path = write_demo_trajectory(
        settings.language, RunLayout(run_dir).demo_trajectory_path(settings.language)
    )
    return ReplayModel(path=path, model_name=DEMO_MODEL_NAME, fallback=True), DEMO_MODEL_NAME


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
        RunInterrupted: Ctrl-C; the directory keeps the plan, the complete turns and the result so far, and
            :func:`resume_quickstart` continues it.
    """
    refusal = refusal_before_start(settings)  # before any import that takes time: "refused at once"
    if refusal is not None:
        raise QuickstartRefused(refusal)
    from ..models.base import is_demo_model

    started = time.time()
    if settings.model:
        model, model_name = _make_model(settings, None)  # a misconfigured model must not leave a directory
    task = quickstart_task(settings.language)
    run_dir = _new_run_dir(settings.output_root, task)
    if not settings.model:
        model, model_name = _make_model(settings, run_dir)
    plan = RunPlan(
        run_id=run_dir.name,
        created_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        task=task,
        model=model_name,
        prompt_tag=default_prompt_tag(task),
        num_turns=QUICKSTART_TURNS,
        service=settings.service_url or "embedded",
        demo=is_demo_model(model),
    )
    layout = RunLayout(run_dir)
    context: dict[str, Any] = {"demo": not settings.model, "refused": None}
    if not settings.model:
        context["demo_trajectory"] = layout.relative(layout.demo_trajectory_path(settings.language))
    write_json(layout.plan_path, plan.model_dump(mode="json"))  # resumable from here on
    return _run(run_dir, plan, model, settings, context, console, started, resume=False)


def resume_quickstart(
    run_dir: Path, settings: QuickstartSettings, console: Any | None = None
) -> tuple[Path, QuickstartResult]:
    """Continue the quickstart run in ``run_dir`` from its last complete turn to its three turns
    (`quickstart --resume DIR`) with its plan's model (the demo, a replay, an endpoint at
    ``settings.model_host``, a hosted model with its key variable) and ``settings.service_url`` or an embedded
    FIBServe; returns the run directory and its result, rewritten.

    Raises:
        QuickstartRefused: the run's language cannot be evaluated here (Triton without a GPU).
        QuickstartError: ``run_dir`` is not a quickstart run, its run already met its target, or the model is
            misconfigured (the message says what to set).
        RunInterrupted: Ctrl-C again (what was done is kept).
    """
    import json

    from ..models import ModelConfigError, ModelUnavailableError, make_model
    from ..runs.directory import load_plan
    from ..runs.options import RunOptionError, RunOptions, plan_for

    try:
        turns = max(load_plan(run_dir).num_turns, QUICKSTART_TURNS)
        plan = plan_for(
            RunOptions(num_turns=turns), resume_dir=Path(run_dir), service_url=None, output_root=None
        )
    except (FileNotFoundError, ValueError) as exc:  # RunOptionError is a ValueError
        raise QuickstartError(
            str(exc) if isinstance(exc, RunOptionError) else f"--resume {run_dir}: {exc}"
        ) from None
    if plan.task.definition != QUICKSTART_DEFINITION:
        raise QuickstartError(
            f"--resume {run_dir}: not a quickstart run (it runs {plan.task.definition}); continue it with: "
            f"ptxbench run --resume {run_dir}"
        )
    settings = settings.model_copy(update={"language": plan.task.language})
    refusal = refusal_before_start(settings, resuming=True)
    if refusal is not None:
        raise QuickstartRefused(refusal)
    try:
        model = make_model(
            plan.model,
            model_host=settings.model_host,
            definition=plan.task.definition,
            language=plan.task.language,
        )
    except (ModelConfigError, ModelUnavailableError) as exc:
        raise QuickstartError(f"model {plan.model}: {exc}") from None
    path = RunLayout(run_dir).quickstart_context_path
    context = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"demo": plan.demo}
    return _run(Path(run_dir), plan, model, settings, context, console, time.time(), resume=True)


def _run(
    run_dir: Path, plan: RunPlan, model: Any, settings: QuickstartSettings, context: dict[str, Any],
    console: Any | None, started: float, *, resume: bool,
) -> tuple[Path, QuickstartResult]:  # fmt: skip
    """Start or reach the service, record it in the context file, then run (or resume) ``plan`` in ``run_dir``;
    the result, rebuilt from the files. See :func:`run_quickstart` for what ends it and how."""
    from fibserve.client import FIBServeError
    from rich.console import Console
    from rich.markup import escape

    from ..environment import EvaluationInfrastructureError
    from ..environment.embedded import ServiceStartError
    from ..environment.embedded import service_url as resolve_service
    from ..environment.fibserve import FIBServeBackend
    from ..runs.launch import RunInterrupted, run_trajectory
    from ..runs.progress import RunProgress
    from .report import rebuild_result

    console = console or Console(highlight=False)
    layout = RunLayout(run_dir)
    language = plan.task.language
    try:
        console.print(f"run directory: {run_dir}", markup=False)
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
            write_json(layout.quickstart_context_path, context)
            if not gpu:
                console.print(
                    "[yellow]CPU mode: no GPU lane; "
                    + (
                        "CUDA kernels are compiled and analysed, not executed.[/]"
                        if language == "cuda"
                        else "the Triton GEMM cannot be evaluated here.[/]"
                    )
                )
            if language == "triton" and not gpu:
                context["refused"] = f"{TRITON_NEEDS_GPU}. {TRITON_ALTERNATIVES}"
                write_json(layout.quickstart_context_path, context)
                summary = failed_summary(plan, "Refused", context["refused"], started, resumed=resume)
                write_json(layout.summary_path, summary.model_dump(mode="json"))
            else:
                if context.get("demo"):  # only now is it certain that the demo is replayed
                    console.print(f"[bold black on yellow] {escape(DEMO_BANNER)} [/]")
                with RunProgress(console, plan.num_turns, f"FIBServe ({', '.join(lanes)})") as live:
                    run_trajectory(
                        plan,
                        run_dir,
                        backend=backend,
                        model=live.model(model),
                        resume=resume,
                        on_turn=live.on_turn,
                    )
    except (ServiceStartError, EvaluationInfrastructureError) as exc:
        summary = failed_summary(
            plan, "InfrastructureError", f"evaluation service unavailable: {exc}", started, resumed=resume
        )
        write_json(layout.summary_path, summary.model_dump(mode="json"))
        if not layout.quickstart_context_path.is_file():
            write_json(layout.quickstart_context_path, context)
    except KeyboardInterrupt:
        if not layout.quickstart_context_path.is_file():
            write_json(layout.quickstart_context_path, context)
        rebuild_result(run_dir)
        raise RunInterrupted(run_dir) from None
    return run_dir, rebuild_result(run_dir)
