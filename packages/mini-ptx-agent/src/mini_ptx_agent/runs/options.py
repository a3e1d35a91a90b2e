"""The options of `ptxbench run`, checked, turned into the plan of a new run or merged into a resumed run's plan.

Everything that can be checked is checked before a run directory is created or a service started: the option
values, the prompt tag, the definition and the workload uuids (against the trace sets an embedded FIBServe
would load, or the catalog of the FIBServe at ``SERVICE_URL``), and the model (built as the run builds it, in
:func:`mini_ptx_agent.runs.launch.run_agent`: an endpoint's served id, a hosted model's provider and key
variable). A mistake raises :class:`RunOptionError`, which names the option and says what to type instead.

Options are None when not given. A new run fills them from :data:`DEFAULTS` (the feedback options from
:class:`~mini_ptx_agent.feedback_options.FeedbackOptions`' defaults). A resumed run keeps its ``plan.json`` for
every option not given; a given limit (``--num-turns``, ``--wall-time``, ``--turn-timeout``, ``--sanitizer``,
``--sanitizer-tools``) replaces the plan's, and an option the saved conversation depends on
(:data:`FIXED_ON_RESUME`, :data:`FEEDBACK_FIXED_ON_RESUME`) must repeat the plan's value or is refused.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..feedback_options import BUNDLED_NOTES, ContextPolicy, FeedbackOptions, SanitizerTool
from ..task import Arch, TaskConfig, TaskLanguage
from ..trajectory import load_trajectory
from .directory import RunLayout, RunPlan, load_plan, run_name


class RunOptionError(ValueError):
    """An option of `ptxbench run` cannot be used; the message names it and says what to type instead."""


class RunOptions(BaseModel):
    """The options of `ptxbench run`; None means "not given" (see the module docstring for what fills it)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    definition: str | None = Field(default=None, min_length=1)
    """Definition name, e.g. ``gemm_n7168_k5120``."""
    language: TaskLanguage | None = None
    arch: Arch | None = None
    workloads: list[str] | Literal["all"] | None = None
    """Workload uuids, or ``all``."""
    target_speedup: float | None = Field(default=None, gt=0)
    """Minimum speedup against the definition's baseline Solution (its reference where it has none) (x)."""
    prompt_tag: str | None = None
    """System prompt tag; default by language and arch."""
    model: str | None = None
    """Model name; a new run falls back to ``$MODEL_NAME``."""
    num_turns: int | None = Field(default=None, ge=1)
    wall_time_limit_s: int | None = Field(default=None, ge=0)
    """Whole-run limit (s); 0 = none."""
    turn_timeout_s: float | None = Field(default=None, gt=0)
    """Limit on one model call and on one evaluation (s)."""
    sanitizer: bool | None = None
    """The sanitizer gate on (memcheck, unless ``sanitizer_tools`` says) or off."""
    sanitizer_tools: list[SanitizerTool] | None = None
    """compute-sanitizer tools of the gate; giving them turns the gate on."""
    context_policy: ContextPolicy | None = None
    architecture_warning: bool | None = None
    require_architecture: bool | None = None
    instruction_evidence: bool | None = None
    profile_in_loop: bool | None = None
    notes_dir: str | None = None
    """A folder of fix notes, or ``bundled``."""


OPTION_NAMES = {
    "definition": "--definition", "language": "--language", "arch": "--arch", "workloads": "--workloads",
    "target_speedup": "--target-speedup", "prompt_tag": "--prompt-tag", "model": "--model",
    "num_turns": "--num-turns", "wall_time_limit_s": "--wall-time", "turn_timeout_s": "--turn-timeout",
    "sanitizer": "--sanitizer", "sanitizer_tools": "--sanitizer-tools", "context_policy": "--context-policy",
    "architecture_warning": "--architecture-warning", "require_architecture": "--require-architecture",
    "instruction_evidence": "--instruction-evidence", "profile_in_loop": "--profile", "notes_dir": "--notes-dir",
}  # fmt: skip
"""The command-line spelling of each :class:`RunOptions` field."""

DEFAULTS: dict[str, Any] = {
    "language": "cuda", "arch": "sm_90a", "workloads": "all", "target_speedup": 1.0, "num_turns": 3,
    "wall_time_limit_s": 0, "turn_timeout_s": 900.0, "sanitizer": False,
}  # fmt: skip
"""What a new run uses for an option not given (the prompt tag follows language and arch, the model
``$MODEL_NAME``)."""

FIXED_ON_RESUME = ("definition", "language", "arch", "workloads", "target_speedup", "prompt_tag", "model")
"""Options a resumed run keeps: its saved conversation (system prompt, task message, replies) depends on them."""

FEEDBACK_FIXED_ON_RESUME = (
    "context_policy", "architecture_warning", "require_architecture", "instruction_evidence", "profile_in_loop",
    "notes_dir",
)  # fmt: skip
"""Feedback options a resumed run keeps: every earlier model call saw the conversation through them (and the
stop condition judged it), so a trajectory is one cell of a study from its first turn to its last. The
sanitizer gate is a check on the kernels and may change, like the limits."""

DEFAULT_PROMPT_TAGS = {("cuda", "sm_90a"): "hopper-no-hint", ("triton", "sm_90a"): "triton-hopper",
                       ("cuda", "sm_100a"): "blackwell-no-hint", ("triton", "sm_100a"): "triton-blackwell"}  # fmt: skip
"""Prompt tag used when none is given, by (language, arch): every pair a TaskConfig allows."""


def default_prompt_tag(task: TaskConfig) -> str:
    """The prompt tag for the task's language and architecture (the base tag of that target)."""
    return DEFAULT_PROMPT_TAGS[(task.language, task.arch)]


def parse_workloads(text: str | None) -> list[str] | Literal["all"] | None:
    """``--workloads``: comma-separated uuids, ``all``, or None when not given."""
    if text is None:
        return None
    uuids = [part.strip() for part in text.split(",") if part.strip()]
    return "all" if uuids in ([], ["all"]) else uuids


def parse_list(text: str | None) -> list[str] | None:
    """A comma-separated option (``--sanitizer-tools``): its items, or None when not given."""
    return None if text is None else [part.strip() for part in text.split(",") if part.strip()]


def run_options(**values: Any) -> RunOptions:
    """:class:`RunOptions` from keyword values.

    Raises:
        RunOptionError: a value is out of range; the message names the option.
    """
    try:
        return RunOptions(**values)
    except ValidationError as exc:
        problems = "; ".join(
            f"{OPTION_NAMES.get(str(err['loc'][0]), err['loc'][0]) if err['loc'] else 'options'}: {err['msg']}"
            for err in exc.errors()
        )
        raise RunOptionError(problems) from None


def _described(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return ",".join(value) if isinstance(value, list) else str(value)


def sanitizer_gate(options: RunOptions, current: list[str]) -> list[str]:
    """The gate's tools from ``--sanitizer`` and ``--sanitizer-tools`` (``current`` when neither is given).

    Raises:
        RunOptionError: ``--no-sanitizer`` with ``--sanitizer-tools``.
    """
    if options.sanitizer is False:
        if options.sanitizer_tools:
            raise RunOptionError(
                "--no-sanitizer and --sanitizer-tools contradict each other: give one of them"
            )
        return []
    if options.sanitizer_tools:
        return list(dict.fromkeys(options.sanitizer_tools))
    if options.sanitizer:
        return list(current) or ["memcheck"]
    return list(current)


def notes_dir_option(notes_dir: str | None) -> str | None:
    """``--notes-dir``: ``bundled``, or the folder as an absolute path (a resumed run may start elsewhere).

    Raises:
        RunOptionError: the folder does not exist or holds no ``*.md`` notes.
    """
    if notes_dir is None or notes_dir == BUNDLED_NOTES:
        return notes_dir
    from ..environment.fix_notes import FixNotesError, note_files

    try:
        return str(note_files(notes_dir)[0].parent.resolve())
    except FixNotesError as exc:
        raise RunOptionError(f"--notes-dir {notes_dir}: {exc}") from None


def feedback_options(options: RunOptions) -> FeedbackOptions:
    """The feedback options of a new run: those given, else :class:`FeedbackOptions`' defaults.

    Raises:
        RunOptionError: see :func:`sanitizer_gate` and :func:`notes_dir_option`.
    """
    given = {
        name: getattr(options, name)
        for name in FEEDBACK_FIXED_ON_RESUME
        if getattr(options, name) is not None
    }
    given["notes_dir"] = notes_dir_option(options.notes_dir)
    return FeedbackOptions(**given, sanitizer_gate=sanitizer_gate(options, []))


def new_plan(options: RunOptions, service_url: str | None) -> RunPlan:
    """The plan of a new run: ``options``, then :data:`DEFAULTS`.

    Raises:
        RunOptionError: no definition, or a prompt tag that is unknown or written for another target.
    """
    if not options.definition:
        raise RunOptionError("give --definition NAME (a new run) or --resume DIR (continue a run)")
    given = {k: v for k, v in options.model_dump().items() if v is not None}
    values = DEFAULTS | given
    task = TaskConfig(
        definition=values["definition"], language=values["language"], arch=values["arch"],
        workloads=values["workloads"], target_speedup=values["target_speedup"],
    )  # fmt: skip
    prompt_tag = values.get("prompt_tag") or default_prompt_tag(task)
    check_prompt_tag(prompt_tag, task)
    feedback = feedback_options(options)
    return RunPlan(
        run_id=run_name(task), created_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), task=task,
        model=values.get("model") or os.environ.get("MODEL_NAME") or "", prompt_tag=prompt_tag,
        num_turns=values["num_turns"], wall_time_limit_s=values["wall_time_limit_s"],
        turn_timeout_s=values["turn_timeout_s"], service=service_url or "embedded", feedback=feedback,
    )  # fmt: skip


def resumed_plan(plan: RunPlan, options: RunOptions, turns_done: int = 0) -> RunPlan:
    """``plan`` with the limits ``options`` give explicitly; ``turns_done``: model calls the run has made.

    Raises:
        RunOptionError: an option of :data:`FIXED_ON_RESUME` or :data:`FEEDBACK_FIXED_ON_RESUME` differs from
            the plan's value, or ``num_turns`` is below ``turns_done``.
    """
    planned = {
        "definition": plan.task.definition, "language": plan.task.language, "arch": plan.task.arch,
        "workloads": plan.task.workloads, "target_speedup": plan.task.target_speedup,
        "prompt_tag": plan.prompt_tag, "model": plan.model,
    }  # fmt: skip
    planned |= {name: getattr(plan.feedback, name) for name in FEEDBACK_FIXED_ON_RESUME}
    if options.notes_dir is not None:
        options = options.model_copy(update={"notes_dir": notes_dir_option(options.notes_dir)})
    for name in (*FIXED_ON_RESUME, *FEEDBACK_FIXED_ON_RESUME):
        given = getattr(options, name)
        if given is not None and given != planned[name]:
            raise RunOptionError(
                f"{OPTION_NAMES[name]} {_described(given)}: this run was made with {_described(planned[name])}, "
                "and a resumed run keeps it (its saved conversation depends on it); leave the option out, or start "
                "a new run with --definition"
            )
    if options.num_turns is not None and options.num_turns < turns_done:
        raise RunOptionError(
            f"--num-turns {options.num_turns}: this run has made {turns_done} turns already; give at least "
            f"{turns_done + 1} to continue it, or leave the option out to keep its {plan.num_turns}"
        )
    limits = {
        name: getattr(options, name)
        for name in ("num_turns", "wall_time_limit_s", "turn_timeout_s")
        if getattr(options, name) is not None
    }
    gate = sanitizer_gate(options, list(plan.feedback.sanitizer_gate))
    data = plan.model_dump(mode="json") | limits
    data["feedback"] = plan.feedback.model_dump(mode="json") | {"sanitizer_gate": gate}
    data["task"] = plan.task.model_dump(mode="json") | {"sanitizer": bool(gate)}
    return RunPlan.model_validate(data)


def check_prompt_tag(tag: str, task: TaskConfig) -> None:
    """Raises RunOptionError when ``tag`` is unknown or written for another language or architecture."""
    from ..prompts import PROMPT_TAGS

    spec = PROMPT_TAGS.get(tag)
    fitting = sorted(n for n, t in PROMPT_TAGS.items() if (t.language, t.sm) == (task.language, task.arch))
    if spec is None:
        close = difflib.get_close_matches(tag, list(PROMPT_TAGS), n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise RunOptionError(
            f"--prompt-tag {tag}: no such tag; {hint}tags for {task.language} on {task.arch}: {', '.join(fitting)}"
        )
    if (spec.language, spec.sm) != (task.language, task.arch):
        raise RunOptionError(
            f"--prompt-tag {tag} is written for {spec.language} on {spec.sm}, not {task.language} on {task.arch}; "
            f"tags that fit: {', '.join(fitting) or 'none'}"
        )


def check_catalog(task: TaskConfig, service_url: str | None, token: str | None = None) -> None:
    """Check the definition and workload uuids: against ``service_url``'s catalog when given, else against the
    trace sets an embedded FIBServe would load (``$DATASET_ROOTS`` or the bundled set). A remote service that
    does not answer is not judged here (the run records the outage).

    Raises:
        RunOptionError: unknown definition (with close matches), a workload uuid it does not have, or a
            definition without workloads.
    """
    if service_url:
        where = f"the FIBServe at {service_url}"
        uuids = _remote_workloads(task.definition, service_url, token)
        if uuids is None:
            return
    else:
        roots = os.environ.get("DATASET_ROOTS")
        where = f"DATASET_ROOTS={roots}" if roots else "fibserve's bundled trace set"
        uuids = _local_workloads(task.definition, where)
    if not uuids:
        raise RunOptionError(f"--definition {task.definition}: it has no workloads in {where}")
    missing = [u for u in task.workload_uuids or [] if u not in uuids]
    if missing:
        close = difflib.get_close_matches(missing[0], uuids, n=3, cutoff=0.8)
        hint = f"did you mean {', '.join(close)}?" if close else f"it has {len(uuids)}"
        raise RunOptionError(
            f"--workloads: {missing[0]} is not a workload of {task.definition} in {where}; {hint} "
            "(leave --workloads out to run all of them)"
        )


def _local_workloads(definition: str, where: str) -> list[str]:
    """Workload uuids of ``definition`` in the trace sets an embedded FIBServe loads.

    Raises:
        RunOptionError: the trace sets do not load, or the definition is not in them.
    """
    from fibserve.datasets.catalog import Catalog, NotFound
    from fibserve.trace.problems import TraceSetError

    try:
        return [w.uuid for w in Catalog.load(None).workloads(definition)]
    except TraceSetError as exc:
        raise RunOptionError(f"the trace sets in {where} do not load: {exc}") from None
    except NotFound as exc:
        hint = f"did you mean {', '.join(exc.close_matches)}?" if exc.close_matches else "nothing is close"
        raise RunOptionError(
            f"--definition {definition}: no such definition in {where}; {hint} (`fibserve definitions` lists them)"
        ) from None


def _remote_workloads(definition: str, url: str, token: str | None) -> list[str] | None:
    """Workload uuids of ``definition`` at the FIBServe ``url``; None when it does not answer.

    Raises:
        RunOptionError: the service does not have the definition (its message names close matches).
    """
    from fibserve.client import APIError, FIBServeClient, FIBServeError

    try:
        with FIBServeClient(url, token=token, timeout=15.0) as client:
            return [w.uuid for w in client.workloads(definition)]
    except APIError as exc:
        if exc.status_code == 404 and exc.code == "unknown_definition":
            raise RunOptionError(f"--definition {definition}: {exc.message}") from None
        return None
    except FIBServeError:
        return None


def _saved_turns(resume_dir: Path) -> int:
    """Model calls the saved run has made (0 when its trajectory is missing or unreadable).

    Raises:
        RunOptionError: the run already ended with ``Submitted`` (its target was met).
    """
    from ..trajectory import TrajectoryError

    try:
        info = load_trajectory(RunLayout(resume_dir).trajectory_path).get("info", {})
    except TrajectoryError:
        return 0
    if info.get("exit_status") == "Submitted":
        raise RunOptionError(
            f"--resume {resume_dir}: this run already met its target (Submitted); start a new run instead"
        )
    turns = info.get("ptxbench", {}).get("turns", 0)
    return turns if isinstance(turns, int) else 0


def plan_for(
    options: RunOptions, *, resume_dir: Path | None, service_url: str | None, output_root: Path | None
) -> RunPlan:
    """The plan to run: a new one from ``options``, or ``resume_dir``'s merged with them; every check done.

    Raises:
        RunOptionError: see :func:`new_plan`, :func:`resumed_plan`, :func:`check_catalog`; ``resume_dir``
            missing or not a run directory; ``output_root`` with ``resume_dir``.
    """
    if resume_dir is None:
        plan = new_plan(options, service_url)
        token = os.environ.get("FIBSERVE_TOKEN") or None
        check_catalog(plan.task, service_url, token)
        return plan
    if output_root is not None:
        raise RunOptionError(f"--output-root does not apply to --resume: the run stays in {resume_dir}")
    try:
        plan = load_plan(resume_dir)
    except FileNotFoundError as exc:
        raise RunOptionError(f"--resume {resume_dir}: {exc}") from None
    except (ValueError, OSError) as exc:
        raise RunOptionError(f"--resume {resume_dir}: plan.json cannot be read: {exc}") from None
    return resumed_plan(plan, options, _saved_turns(resume_dir))
