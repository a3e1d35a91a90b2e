"""KernelAgent: mini-swe-agent's ``DefaultAgent`` with the kernel loop: write a kernel, evaluate it, read the feedback, try again.

mini-swe-agent's loop stays as it is (``run`` -> ``step`` = ``query`` + ``execute_actions``, control flow by
exceptions caught in ``run``, the trajectory saved in a ``finally`` after every step). This module adds only
what kernels need:

- ``execute_actions`` extracts the LAST fenced block of the task's language from the reply (a ``FormatError``
  reply when there is none), sends it to the :class:`EvaluationEnvironment` (the environment of this agent is
  the evaluation service), writes the kernel, the evaluator result and each correct version, and appends the
  deterministic feedback; it raises ``Submitted`` when the target is met on a GPU;
- the model is wrapped in :class:`~mini_ptx_agent.models.bounded.BoundedModel`: each call is bounded by ``turn_timeout_s`` and by the wall-time
  limit, it is sent what the run's context policy shows of the conversation, earlier replies bounded
  (:mod:`mini_ptx_agent.history`; the trajectory keeps every message), and a failing model API becomes
  :class:`InfrastructureError` (exit status ``InfrastructureError``), never a kernel failure;
  an evaluation service failure ends the run the same way;
- ``save`` writes the trajectory atomically with secrets scrubbed (:mod:`mini_ptx_agent.trajectory`);
- :meth:`KernelAgent.resume` restores the conversation up to the last complete turn of a saved trajectory.

Exit statuses: ``Submitted`` (target met), ``LimitsExceeded`` (``step_limit`` = num_turns model calls),
``TimeExceeded`` (wall time), ``RepeatedFormatError``, ``InfrastructureError`` (service or model API down).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")  # mini-swe-agent prints a banner to stdout on import

from minisweagent.agents.default import AgentConfig, DefaultAgent
from minisweagent.exceptions import FormatError, Submitted

from .environment import EvaluationInfrastructureError
from .environment.evaluation import EvaluationEnvironment
from .environment.report import KernelReport
from .extraction import extract_kernel, format_error_message
from .history import context_messages
from .models.base import is_demo_model
from .models.bounded import BoundedModel, InfrastructureError, exit_message
from .task import TaskConfig
from .trajectory import write_json, write_text_atomic


def literal_template(text: str) -> str:
    """A jinja template that renders to ``text`` unchanged (kernel code is full of ``{{`` and ``{%``)."""
    return "{% raw %}" + text + "{% endraw %}"


class KernelAgentConfig(AgentConfig):
    """Settings of one kernel-agent run. ``step_limit`` is the number of turns (model calls)."""

    system_template: str = ""
    """System prompt (ABI and architecture knowledge); use :func:`literal_template` for plain text."""
    instance_template: str = ""
    """First user message (carries the definition JSON); use :func:`literal_template` for plain text."""
    step_limit: int = 5
    """Number of turns: model calls before ``LimitsExceeded`` (0 = no limit)."""
    cost_limit: float = 0.0
    """Stop after this model cost in USD (0 = no limit; turns bound a run already)."""
    turn_timeout_s: float = 900.0
    """Longest one model call may take (s); past it the run ends as ``InfrastructureError``. (The evaluation is
    bounded by ``task.timeout_s``, which :func:`mini_ptx_agent.runs.launch.run_trajectory` caps at this value.)"""
    solution_prefix: str = "ptxbench"
    """Prefix of solution names sent to the service (``<prefix>-t<turn>``)."""
    author: str = "mini-ptx-agent"
    """Author recorded in each solution (the model name)."""
    task: TaskConfig
    """The task: definition, workloads, language, target speedup, sanitizer, tolerances."""


@dataclass(frozen=True)
class TurnOutcome:
    """What one finished turn came to, for progress displays (the trajectory holds the whole story)."""

    turn: int
    status: str
    """The evaluator's verdict (PASSED, NOT_EXECUTED, COMPILE_ERROR, ...) or ``FORMAT_ERROR`` (no kernel)."""
    seconds: float
    """Wall time of the turn: the model call plus the evaluation (s)."""
    min_speedup: float | None = None
    """Minimum speedup over the workloads (x), when every workload passed and was timed."""
    executed_on_gpu: bool = False
    ptx_families: tuple[str, ...] = ()
    sass_families: tuple[str, ...] = ()


class RunFiles(Protocol):
    """Where one trajectory writes its kernels and evaluator results: a run directory's
    :class:`~mini_ptx_agent.runs.directory.RunLayout`, which names every path of it (``extension``: ``.cu`` or
    ``.py``, with its dot)."""

    def kernel_path(self, extension: str) -> Path:
        """The latest kernel."""
        ...

    def version_path(self, turn: int, extension: str) -> Path:
        """A correct version."""
        ...

    def evaluation_path(self, turn: int) -> Path:
        """The evaluator's result of one turn."""
        ...


class KernelAgent(DefaultAgent):
    """A ``DefaultAgent`` that writes kernels: extract, evaluate, feed back, save versions, stop on target."""

    def __init__(
        self,
        model,
        env: EvaluationEnvironment,
        *,
        files: RunFiles | None = None,
        on_turn: Callable[[TurnOutcome], None] | None = None,
        **kwargs,
    ):
        """``on_turn``: called with each finished turn's :class:`TurnOutcome` (evaluated or format error)."""
        super().__init__(model, env, config_class=KernelAgentConfig, **kwargs)
        self.on_turn = on_turn
        self._turn_started = time.monotonic()
        language = self.config.task.language
        policy = env.feedback.context_policy
        self.model = BoundedModel(
            model,
            self.config.turn_timeout_s,
            prepare=lambda messages: context_messages(messages, policy, language),
        )
        self.config: KernelAgentConfig
        self.env: EvaluationEnvironment
        self.files = files
        self.extension = Path(self.config.task.entry_file).suffix
        """The kernel files' suffix: ``.cu`` or ``.py``."""
        self.versions: list[int] = []
        """Turns whose kernel passed every workload (saved as ``kernel_v<turn>``)."""
        self.best: dict[str, Any] | None = None
        """Turn and minimum speedup of the fastest correct version."""
        self._resume: dict[str, Any] | None = None

    # -- one turn's action: evaluate the kernel -------------------------------------------------------------

    def execute_actions(self, message: dict) -> list[dict]:
        """Extract the kernel, evaluate it, save it, append the feedback; raise Submitted on target met."""
        task = self.config.task
        turn = self.n_calls
        extraction = extract_kernel(message.get("content") or "", task.language)
        if extraction.source is None:
            self._finished(TurnOutcome(turn, "FORMAT_ERROR", time.monotonic() - self._turn_started))
            raise FormatError(
                {
                    "role": "user",
                    "content": format_error_message(extraction, task.language),
                    "extra": {
                        "interrupt_type": "FormatError",
                        "ptxbench": {"kind": "format_error", "turn": turn},
                    },
                }
            )
        solution = task.solution(
            extraction.source, name=f"{self.config.solution_prefix}-t{turn:03d}", author=self.config.author
        )
        if self.files is not None:
            write_text_atomic(self.files.kernel_path(self.extension), extraction.source)
        try:
            output = self.env.execute({"solution": solution, "turn": turn})
        except EvaluationInfrastructureError as exc:
            raise InfrastructureError(
                exit_message(
                    "InfrastructureError",
                    f"evaluation service failed: {exc}",
                    infrastructure={"source": "evaluation", "kind": type(exc).__name__},
                )
            ) from exc
        report: KernelReport = output["extra"]["report"]
        version = self._record(turn, extraction.source, report)
        feedback = {
            "role": "user",
            "content": output["output"],
            "extra": {
                "ptxbench": {
                    "kind": "evaluation",
                    "turn": turn,
                    "status": report.status.value,
                    "all_passed": report.all_passed,
                    "min_speedup": report.min_speedup,
                    "target_met": report.target_met,
                    "submitted": output["extra"]["submit"],
                    "executed_on_gpu": report.executed_on_gpu,
                    "version": version,
                    "report": report.model_dump(mode="json"),
                },
                "timestamp": time.time(),
            },
        }
        analysis = report.static_analysis
        self._finished(
            TurnOutcome(
                turn, report.status.value, time.monotonic() - self._turn_started, report.min_speedup,
                report.executed_on_gpu, tuple(analysis.ptx_families) if analysis else (),
                tuple(analysis.sass_families) if analysis else (),
            )
        )  # fmt: skip
        if output["extra"]["submit"]:
            raise Submitted(
                feedback,
                exit_message(
                    "Submitted", f"target met at turn {turn}", submission=extraction.source, turn=turn
                ),
            )
        return self.add_messages(feedback)

    def _finished(self, outcome: TurnOutcome) -> None:
        if self.on_turn is not None:
            self.on_turn(outcome)

    def _record(self, turn: int, source: str, report: KernelReport) -> int | None:
        """Write the evaluator result; keep a correct version; track the best. Returns the version's turn."""
        if self.files is not None:
            write_json(self.files.evaluation_path(turn), report.model_dump(mode="json"))
        if not report.all_passed:
            return None
        self.versions.append(turn)
        if self.files is not None:
            write_text_atomic(self.files.version_path(turn, self.extension), source)
        speed = report.min_speedup
        if self.best is None or (speed is not None and (self.best["min_speedup"] or 0) < speed):
            self.best = {"turn": turn, "min_speedup": speed, "executed_on_gpu": report.executed_on_gpu}
        return turn

    # -- resume ---------------------------------------------------------------------------------------------

    def resume(self, trajectory: dict[str, Any]) -> None:
        """Continue a saved trajectory from its last complete turn on the next :meth:`run`.

        A turn is complete when the model's reply is followed by its feedback (or format-error) message. An
        exit message and a reply without feedback (the turn during which a failure happened) are dropped, so
        the model is asked again. Counters (turns, cost, versions, elapsed time) are restored, and a model that
        replays recorded replies (``resume_from``: a ``replay:`` or the demo) continues after the replies the
        kept turns used, so turn N + 1 gets recorded reply N + 1.

        Raises:
            ValueError: the trajectory already ended with ``Submitted`` or has no system and task messages.
        """
        messages = list(trajectory["messages"])
        info = trajectory.get("info", {})
        if info.get("exit_status") == "Submitted":
            raise ValueError("this run already ended with Submitted (target met); start a new run instead")
        while messages and messages[-1].get("role") in ("exit", "assistant"):
            messages.pop()
        if len(messages) < 2 or messages[0].get("role") != "system":
            raise ValueError("the trajectory has no system and task messages to resume from")
        state = info.get("ptxbench", {})
        n_calls = sum(1 for m in messages if m.get("role") == "assistant")
        replay_from = getattr(self.model, "resume_from", None)  # forwarded through the model's wrappers
        if replay_from is not None:
            replay_from(n_calls)
        self._resume = {
            "messages": messages,
            "n_calls": n_calls,
            "cost": sum(
                float(m.get("extra", {}).get("cost", 0.0) or 0.0)
                for m in messages
                if m.get("role") == "assistant"
            ),
            "versions": [v for v in state.get("versions", []) if isinstance(v, int)],
            "best": state.get("best"),
            "elapsed_s": float(state.get("elapsed_s", 0.0)),
        }

    def step(self) -> list[dict]:
        """``DefaultAgent.step``; the first step of a resumed run first swaps in the saved conversation.

        The model call of the step may not outlast the wall-time limit (see :class:`~mini_ptx_agent.models.bounded.BoundedModel`).
        """
        if self._resume is not None:
            state, self._resume = self._resume, None
            self.messages = state["messages"]
            self.n_calls, self.cost = state["n_calls"], state["cost"]
            self.versions = [v for v in state["versions"] if v <= self.n_calls]
            self.best = (
                state["best"] if state["best"] and state["best"].get("turn", 0) <= self.n_calls else None
            )
            self._start_time = time.time() - state["elapsed_s"]
        wall = self.config.wall_time_limit_seconds
        self.model.wall_deadline = self._start_time + wall if wall > 0 else None
        self._turn_started = time.monotonic()
        return super().step()

    # -- trajectory -----------------------------------------------------------------------------------------

    def serialize(self, *extra_dicts) -> dict:
        """``DefaultAgent.serialize`` plus ``info.ptxbench`` (task, versions, best, elapsed time, demo).

        ``demo`` is true when the replies are a demo replay, not a model's output (:func:`is_demo_model`):
        such a trajectory is never a model's result nor training data (docs/run-directory.md).
        """
        state = {
            "info": {
                "ptxbench": {
                    "demo": is_demo_model(self.model),
                    "task": self.config.task.model_dump(mode="json"),
                    "turns": sum(1 for m in self.messages if m.get("role") == "assistant"),  # answered calls
                    "versions": list(self.versions),
                    "best": self.best,
                    "elapsed_s": round(time.time() - self._start_time, 3),
                }
            }
        }
        return super().serialize(state, *extra_dicts)

    def save(self, path: Path | None, *extra_dicts) -> dict:
        """Serialize and, if ``path`` is given, write atomically with every secret scrubbed."""
        data = self.serialize(*extra_dicts)
        if path:
            write_json(Path(path), data)
        return data
