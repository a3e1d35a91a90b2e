"""Running a plan: the model, the evaluation service and the kernel agent, in one run directory.

:func:`run_agent` is `ptxbench run`: a checked plan (:mod:`mini_ptx_agent.runs.options`), the model built from it,
the service (``SERVICE_URL`` or an embedded FIBServe), then :func:`run_trajectory`, which runs (or resumes) the
:class:`~mini_ptx_agent.agent.KernelAgent` in the directory and writes its files (:mod:`mini_ptx_agent.runs.directory`).
The quickstart calls :func:`run_trajectory` with its own plan.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ..agent import KernelAgent, literal_template
from ..environment import EvaluationInfrastructureError
from ..environment.evaluation import EvaluationEnvironment
from ..models.base import is_demo_model
from ..models.bounded import exit_message
from ..prompts import compose_system_prompt, first_user_message
from ..trajectory import load_trajectory, write_json
from .directory import RunLayout, RunPlan, default_output_root, new_run_dir
from .options import RunOptionError, RunOptions, plan_for
from .summary import RunSummary, evaluation_statuses, failed_summary, summarize

INTERRUPTED = "interrupted (Ctrl-C): the complete turns are kept; resuming asks the interrupted turn again"
"""The exit message of a run stopped by Ctrl-C (exit status ``Interrupted``; the runner did not complete)."""


DEMO_NOTE = (
    "DEMO REPLAY: the model demo replays a bundled demo trajectory, kernels written by the PTXBench authors; "
    "this run is not a model's result (reports leave it out unless --include-demo)."
)


class RunInterrupted(Exception):
    """Ctrl-C stopped a run; ``run_dir`` holds what was done (``--resume`` continues it)."""

    def __init__(self, run_dir: Path):
        super().__init__(f"interrupted: the run in {run_dir} was stopped")
        self.run_dir = run_dir


def run_agent(
    options: RunOptions,
    *,
    resume_dir: Path | None = None,
    output_root: Path | None = None,
    service_url: str | None = None,
    model_host: str | None = None,
    console: Any = None,
) -> tuple[Path, RunSummary]:
    """Run the kernel agent on a new run directory under ``output_root``, or continue ``resume_dir``.

    The model is the plan's (``options.model``, else ``$MODEL_NAME``; see :func:`mini_ptx_agent.models.make_model`),
    the service ``service_url`` (else ``$SERVICE_URL``, else an embedded FIBServe logging to ``logs/fibserve.log``).
    Every check of :func:`plan_for` and the model's construction happen before anything is created. A model API
    or service that is down ends the run as ``InfrastructureError`` (recorded in its directory, not raised).
    Returns the run directory and its summary (also in ``summary.json``). ``console``: a rich Console that
    gets one line per turn (:mod:`mini_ptx_agent.runs.progress`); None prints nothing.

    The run directory is printed on ``console`` first (and whether the model is the demo), then one line per
    turn.

    Raises:
        RunOptionError: see :func:`plan_for`; the model is misconfigured (the message says what to set);
            resuming a run that already met its target.
        RunInterrupted: Ctrl-C; the directory keeps plan.json, the complete turns and (once the run had
            started) a summary with exit status ``Interrupted``.
    """
    from rich.console import Console

    from ..environment.embedded import ServiceStartError
    from ..environment.embedded import service_url as resolve_service
    from ..environment.fibserve import FIBServeBackend
    from ..models import ModelConfigError, ModelUnavailableError, make_model
    from .progress import RunProgress

    started = time.time()
    service_url = service_url or os.environ.get("SERVICE_URL") or None
    plan = plan_for(options, resume_dir=resume_dir, service_url=service_url, output_root=output_root)
    failure: str | None = None
    model = None
    try:
        model = make_model(
            plan.model or None, model_host=model_host, request_timeout_s=plan.turn_timeout_s,
            definition=plan.task.definition, language=plan.task.language,
        )  # fmt: skip
        plan = plan.model_copy(update={"model": str(model.config.model_name), "demo": is_demo_model(model)})
    except ModelConfigError as exc:
        raise RunOptionError(str(exc)) from None
    except ModelUnavailableError as exc:
        failure = f"model API unavailable: {exc}"
    run_dir = Path(resume_dir) if resume_dir is not None else None
    if run_dir is None:
        run_dir = new_run_dir(output_root or default_output_root(), plan.run_id)
    layout = RunLayout(run_dir)
    # plan.json first, so that a run stopped before its first turn resumes too; the directory is printed
    # before anything else (inside the try: a Ctrl-C during the print still says how to continue).
    write_json(layout.plan_path, plan.model_dump(mode="json"))
    console = console or Console(quiet=True)
    try:
        console.print(f"run directory: {run_dir}", markup=False, highlight=False)
        if plan.demo:
            console.print(f"[black on yellow]{DEMO_NOTE}[/]", highlight=False)
        if failure is None:
            try:
                with resolve_service(service_url, log_path=layout.service_log_path) as (url, embedded):
                    token = None if embedded else (os.environ.get("FIBSERVE_TOKEN") or None)
                    backend = FIBServeBackend(url, token=token)
                    where = "the embedded FIBServe" if embedded else url
                    with RunProgress(console, plan.num_turns, where) as live:
                        summary = run_trajectory(
                            plan, run_dir, backend=backend, model=live.model(model),
                            resume=resume_dir is not None, on_turn=live.on_turn,
                        )  # fmt: skip
                    return run_dir, summary
            except (ServiceStartError, EvaluationInfrastructureError) as exc:
                failure = f"evaluation service unavailable: {exc}"
    except KeyboardInterrupt:
        raise RunInterrupted(run_dir) from None
    summary = failed_summary(plan, "InfrastructureError", failure, started, resumed=resume_dir is not None)
    write_json(layout.summary_path, summary.model_dump(mode="json"))
    return run_dir, summary


def run_trajectory(
    plan: RunPlan,
    run_dir: Path,
    *,
    backend: Any,
    model: Any,
    resume: bool = False,
    on_turn: Any = None,
) -> RunSummary:
    """Run (or resume) the kernel agent of ``plan`` in ``run_dir`` with an evaluation ``backend`` and ``model``.

    ``on_turn``: called with each finished turn's :class:`~mini_ptx_agent.agent.TurnOutcome` (progress lines).

    Writes plan.json, the trajectory after every turn, kernels, evaluator results and summary.json.
    Infrastructure failures end the run with exit status ``InfrastructureError`` (recorded, not raised).

    Raises:
        ValueError: ``resume`` on a run that already met its target.
        TrajectoryError: ``resume`` and the saved trajectory is unreadable.
        KeyboardInterrupt: Ctrl-C, re-raised once the trajectory and a summary (exit status ``Interrupted``)
            are written.
    """
    layout = RunLayout(run_dir)
    plan = plan.model_copy(update={"demo": plan.demo or is_demo_model(model)})
    task = plan.task.model_copy(update={"timeout_s": min(plan.task.timeout_s, plan.turn_timeout_s)})
    write_json(layout.plan_path, plan.model_dump(mode="json"))
    saved = load_trajectory(layout.trajectory_path) if resume and layout.trajectory_path.is_file() else None
    started = time.time()
    try:
        definition = backend.definition(task.definition)
        workloads = backend.workloads(task.definition)
    except EvaluationInfrastructureError as exc:
        summary = failed_summary(plan, "InfrastructureError", str(exc), started, resumed=resume)
        write_json(layout.summary_path, summary.model_dump(mode="json"))
        return summary
    if task.workload_uuids is not None:
        wanted = set(task.workload_uuids)
        workloads = [w for w in workloads if w.uuid in wanted]
    agent = KernelAgent(
        model,
        EvaluationEnvironment(backend, task, plan.feedback, ncu_cache_dir=layout.ncu_cache_dir),
        files=layout,
        on_turn=on_turn,
        task=task,
        system_template=literal_template(compose_system_prompt(plan.prompt_tag)),
        instance_template=literal_template(
            first_user_message(
                definition.model_dump(mode="json"),
                language=task.language,
                target_speedup=task.target_speedup,
                workloads=workloads,
            )
        ),
        step_limit=plan.num_turns,
        wall_time_limit_seconds=plan.wall_time_limit_s,
        turn_timeout_s=plan.turn_timeout_s,
        solution_prefix=f"{plan.run_id}",
        author=plan.model,
        output_path=layout.trajectory_path,
    )
    if saved is not None:
        agent.resume(saved)

    def finish(result: dict[str, Any]) -> RunSummary:
        trajectory = agent.save(layout.trajectory_path)
        summary = summarize(
            plan.run_id, result, trajectory, resumed=resume, statuses=evaluation_statuses(layout),
            num_turns=plan.num_turns, trajectory_file=layout.relative(layout.trajectory_path),
        )  # fmt: skip
        write_json(layout.summary_path, summary.model_dump(mode="json"))
        return summary

    try:
        result = agent.run()
    except KeyboardInterrupt:
        # Ctrl-C: the complete turns are on disk; say so in the trajectory and the summary, then let the command
        # print how to continue. A reply whose evaluation was cut short is no turn: resuming asks for it again.
        if agent.messages and agent.messages[-1].get("role") == "assistant":
            agent.messages.pop()
        agent.add_messages(exit_message("Interrupted", INTERRUPTED))
        finish(agent.messages[-1]["extra"])
        raise
    except Exception:
        # A bug, not a verdict: DefaultAgent recorded it as the exit message; keep a summary, then re-raise.
        finish(agent.messages[-1].get("extra", {}) if agent.messages else {})
        raise
    return finish(result)
