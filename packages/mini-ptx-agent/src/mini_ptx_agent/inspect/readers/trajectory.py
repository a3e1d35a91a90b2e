"""One trajectory read for browsing: its turns found in one pass, each turn's parts read when it is shown.

A trajectory (``mini-swe-agent-1.1`` JSON, :mod:`mini_ptx_agent.trajectory`) is a list of messages; a *turn*
is one assistant reply and what followed it: the evaluation feedback (a user message whose
``extra.ptxbench.kind`` is ``evaluation``), a format error (``format_error``), or the exit message of a run
that ended during its evaluation. Opening reads the JSON once and walks the messages once; the kernel, the
diff against the previous kernel and the :class:`~mini_ptx_agent.environment.report.KernelReport` of a turn are
computed when asked for and kept. So a 50 MB trajectory opens in the time ``json.loads`` takes.

The report of a turn comes from the run directory's ``exp_000/evaluations/turn_NNN.json`` when the trajectory
belongs to one, else from the copy the agent keeps in the feedback message.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ...environment.report import KernelReport, NotEvaluated
from ...extraction import extract_kernel
from ...runs.directory import RunLayout, RunPlan
from ...runs.summary import RunSummary
from ...runs.turns import FORMAT_ERROR
from ...task import TaskConfig
from ...trajectory import TrajectoryError, load_trajectory
from . import InspectError

NO_FEEDBACK = "NO_FEEDBACK"
"""The status of a reply that got no feedback (the run stopped while it was evaluated)."""

SearchField = Literal["reply", "kernel"]
"""The texts a search looks through, per turn."""


class FeedbackState(BaseModel):
    """What the agent records about a turn in its feedback message (``extra.ptxbench``; the report is read
    apart, typed, by :meth:`TrajectoryData.report`)."""

    model_config = ConfigDict(extra="ignore")

    kind: str
    """``evaluation`` or ``format_error``."""
    turn: int | None = None
    status: str | None = None
    """The KernelReport's status (evaluations only)."""
    min_speedup: float | None = None
    target_met: bool = False
    executed_on_gpu: bool = False


@dataclass(frozen=True)
class Turn:
    """Where one turn sits in the messages, and its outcome as the feedback message records it."""

    number: int
    """1-based model call number."""
    reply_index: int
    """Index of the assistant message."""
    feedback_index: int | None
    """Index of the message that answered it (feedback, format error or exit); None when none did."""
    status: str
    """The evaluator's status, ``FORMAT_ERROR``, ``INFRASTRUCTURE_ERROR`` or ``NO_FEEDBACK``."""
    min_speedup: float | None = None
    executed_on_gpu: bool = False
    target_met: bool = False

    @property
    def evaluated(self) -> bool:
        """The kernel was sent to the evaluator and a report came back."""
        return self.status not in (FORMAT_ERROR, NotEvaluated.INFRASTRUCTURE_ERROR, NO_FEEDBACK)


@dataclass(frozen=True)
class Reply:
    """One assistant message: its text, the reasoning the API returned apart (or a leading ``<think>`` block),
    and what the model endpoint reported (tokens, USD, seconds; None when it did not say)."""

    content: str
    reasoning: str
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    latency_s: float | None


_THINK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.S)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class TrajectoryData:
    """A trajectory and, when it has one, its run directory (plan, summary, evaluator results).

    Build with :meth:`load`. ``turns`` is ready at once; the other methods read on demand and cache.
    """

    def __init__(self, path: Path, data: dict[str, Any], run_dir: Path | None = None):
        self.path = Path(path)
        self.run_dir = run_dir
        self.messages: list[dict[str, Any]] = data["messages"]
        self.info: dict[str, Any] = data.get("info") if isinstance(data.get("info"), dict) else {}
        self.plan = _read_model(RunLayout(run_dir).plan_path, RunPlan) if run_dir else None
        self.problems: list[str] = []
        """What could not be read but does not stop the trajectory from being shown (an older summary.json)."""
        self.summary: RunSummary | None = None
        try:
            self.summary = _read_model(RunLayout(run_dir).summary_path, RunSummary) if run_dir else None
        except InspectError as exc:
            self.problems.append(str(exc))
        self.turns = self._find_turns()
        self._kernels: dict[int, str | None] = {}
        self._reports: dict[int, KernelReport | str | None] = {}

    @classmethod
    def load(cls, path: Path, run_dir: Path | None = None) -> TrajectoryData:
        """Read the trajectory at ``path`` (of the run directory ``run_dir``, when given).

        Raises:
            InspectError: unreadable, not JSON (truncated), not a mini-swe-agent-1.1 trajectory; the run's
                plan.json unreadable or of another format version.
        """
        try:
            data = load_trajectory(path)
        except TrajectoryError as exc:
            raise InspectError(str(exc)) from None
        return cls(path, data, run_dir)

    # -- what the whole trajectory is ------------------------------------------------------------------------

    @cached_property
    def task(self) -> TaskConfig | None:
        """The task from the run's plan, else the trajectory's ``info.ptxbench.task`` (None when neither)."""
        if self.plan is not None:
            return self.plan.task
        state = self.info.get("ptxbench") if isinstance(self.info.get("ptxbench"), dict) else {}
        try:
            return TaskConfig.model_validate(state.get("task"))
        except ValidationError:
            return None

    @property
    def language(self) -> str:
        """``cuda`` or ``triton``: the task's, else the language whose fenced blocks the replies use."""
        if self.task is not None:
            return self.task.language
        replies = (m.get("content") or "" for m in self.messages if m.get("role") == "assistant")
        return "triton" if any("```python" in text or "```py\n" in text for text in replies) else "cuda"

    @property
    def demo(self) -> bool:
        """A demo replay (trajectory, plan or summary says so): never a model's result nor training data."""
        state = self.info.get("ptxbench") if isinstance(self.info.get("ptxbench"), dict) else {}
        return (
            state.get("demo") is True
            or bool(self.plan and self.plan.demo)
            or bool(self.summary and self.summary.demo)
        )

    @property
    def model(self) -> str:
        """The model's name: the plan's, else the one the trajectory's config records, else ``unknown``."""
        if self.plan is not None:
            return self.plan.model
        model = (
            (self.info.get("config") or {}).get("model")
            if isinstance(self.info.get("config"), dict)
            else None
        )
        name = model.get("model_name") if isinstance(model, dict) else None
        return str(name) if name else "unknown"

    @property
    def exit_status(self) -> str | None:
        """How the run ended (summary, else the trajectory's ``info.exit_status``); None while it runs."""
        if self.summary is not None:
            return self.summary.exit_status
        status = self.info.get("exit_status")
        return str(status) if status else None

    def describe(self) -> dict[str, Any]:
        """What ``ptxbench-inspect --json`` prints for a trajectory."""
        return {
            "kind": "run" if self.run_dir else "trajectory",
            "path": str(self.run_dir or self.path),
            "definition": self.task.definition if self.task else None,
            "language": self.language,
            "model": self.model,
            "exit_status": self.exit_status,
            "demo": self.demo,
            "turns": [
                {
                    "turn": t.number,
                    "status": t.status,
                    "min_speedup": t.min_speedup,
                    "target_met": t.target_met,
                }
                for t in self.turns
            ],
        }

    # -- one turn ------------------------------------------------------------------------------------------

    def _find_turns(self) -> list[Turn]:
        turns = []
        for index, message in enumerate(self.messages):
            if not isinstance(message, dict) or message.get("role") != "assistant":
                continue
            number = len(turns) + 1
            following = self.messages[index + 1] if index + 1 < len(self.messages) else None
            if not isinstance(following, dict):
                turns.append(Turn(number, index, None, NO_FEEDBACK))
                continue
            extra = following.get("extra") if isinstance(following.get("extra"), dict) else {}
            try:
                state = FeedbackState.model_validate(extra.get("ptxbench"))
            except ValidationError:
                state = None
            if following.get("role") == "user" and state is not None and state.kind == "evaluation":
                turns.append(
                    Turn(number, index, index + 1, state.status or "UNKNOWN", state.min_speedup,
                         state.executed_on_gpu, state.target_met)
                )  # fmt: skip
            elif following.get("role") == "user" and state is not None and state.kind == "format_error":
                turns.append(Turn(number, index, index + 1, FORMAT_ERROR))
            elif following.get("role") == "exit":
                infra = extra.get("exit_status") == "InfrastructureError"
                turns.append(
                    Turn(
                        number, index, index + 1, NotEvaluated.INFRASTRUCTURE_ERROR if infra else NO_FEEDBACK
                    )
                )
            else:
                turns.append(Turn(number, index, None, NO_FEEDBACK))
        return turns

    def reply(self, turn: Turn) -> Reply:
        """The assistant message of ``turn``."""
        message = self.messages[turn.reply_index]
        content = str(message.get("content") or "")
        extra = message.get("extra") if isinstance(message.get("extra"), dict) else {}
        reasoning = str(extra.get("reasoning_content") or "")
        think = _THINK.match(content)
        if think and not reasoning:
            reasoning, content = think.group(1).strip(), content[think.end() :]
        usage = extra.get("usage") if isinstance(extra.get("usage"), dict) else {}
        tokens_in, tokens_out = _number(usage.get("prompt_tokens")), _number(usage.get("completion_tokens"))
        return Reply(
            content=content,
            reasoning=reasoning,
            tokens_in=int(tokens_in) if tokens_in is not None else None,
            tokens_out=int(tokens_out) if tokens_out is not None else None,
            cost_usd=_number(extra.get("cost_usd")),
            latency_s=_number(extra.get("latency_s")),
        )

    def kernel(self, turn: Turn) -> str | None:
        """The kernel the evaluator got from ``turn`` (the reply's last block of the task's language, as the
        agent extracts it); None when the reply has none."""
        if turn.number not in self._kernels:
            content = str(self.messages[turn.reply_index].get("content") or "")
            self._kernels[turn.number] = extract_kernel(content, self.language).source
        return self._kernels[turn.number]

    def previous_kernel(self, turn: Turn) -> tuple[Turn, str] | None:
        """The nearest earlier turn that sent a kernel, and that kernel."""
        for earlier in reversed(self.turns[: turn.number - 1]):
            source = self.kernel(earlier)
            if source is not None:
                return earlier, source
        return None

    def diff(self, turn: Turn) -> list[str] | None:
        """Unified diff lines from the previous kernel to this turn's (None: no kernel here or before)."""
        source, previous = self.kernel(turn), self.previous_kernel(turn)
        if source is None or previous is None:
            return None
        before, text = previous
        return list(
            difflib.unified_diff(
                text.splitlines(),
                source.splitlines(),
                f"turn {before.number}",
                f"turn {turn.number}",
                lineterm="",
            )
        )

    def feedback(self, turn: Turn) -> str:
        """The text the model got after ``turn`` (feedback, format error), or the exit message; empty if none."""
        if turn.feedback_index is None:
            return ""
        return str(self.messages[turn.feedback_index].get("content") or "")

    def report(self, turn: Turn) -> KernelReport | str | None:
        """The KernelReport of an evaluated turn; a sentence saying why it cannot be read; None when the turn
        was not evaluated."""
        if not turn.evaluated:
            return None
        if turn.number not in self._reports:
            self._reports[turn.number] = self._read_report(turn)
        return self._reports[turn.number]

    def _read_report(self, turn: Turn) -> KernelReport | str:
        path = None
        if self.run_dir is not None:
            path = RunLayout(self.run_dir).evaluation_path(turn.number)
        try:
            if path is not None and path.is_file():
                data = json.loads(path.read_text(encoding="utf-8"))
            else:
                extra = self.messages[turn.feedback_index or 0].get("extra") or {}
                data = (extra.get("ptxbench") or {}).get("report")
                path = None
            if data is None:
                return "the feedback message keeps no report and there is no evaluations file"
            return KernelReport.model_validate(data)
        except (OSError, ValueError, AttributeError) as exc:
            where = path.name if path is not None else "the report in the feedback message"
            return f"{where} is not a ptxbench.eval/1 KernelReport: {str(exc).splitlines()[0]}"

    def notes(self, turn: Turn) -> list[str]:
        """The evaluator's notes on ``turn`` that a reader of its result must see: the service's notes
        (timing basis, neighbour bias, L2 overwrite, CPU mode, sandbox) and workloads flagged as faster than
        the roofline."""
        report = self.report(turn)
        if not isinstance(report, KernelReport):
            return []
        notes = [line for line in report.notes.splitlines() if line.strip()]
        notes += [f"implausible timing (faster than the roofline): workload {w}" for w in report.implausible]
        return notes

    # -- search ----------------------------------------------------------------------------------------------

    def text(self, turn: Turn, field: SearchField) -> str:
        """What a search looks through: the reply (reasoning and content) or the kernel."""
        if field == "kernel":
            return self.kernel(turn) or ""
        reply = self.reply(turn)
        return f"{reply.reasoning}\n{reply.content}"

    def search(
        self, query: str, start: tuple[int, SearchField], *, backwards: bool = False
    ) -> tuple[Turn, SearchField] | None:
        """The first (turn, field) after ``start`` (turn number, field) whose text holds ``query`` (any case),
        wrapping around; ``start`` itself is searched last. None when nothing holds it."""
        if not query or not self.turns:
            return None
        needle = query.lower()
        places: list[tuple[Turn, SearchField]] = [(t, f) for t in self.turns for f in ("reply", "kernel")]
        here = next((i for i, (t, f) in enumerate(places) if (t.number, f) == start), 0)
        step = -1 if backwards else 1
        for k in range(1, len(places) + 1):
            turn, field = places[(here + step * k) % len(places)]
            if needle in self.text(turn, field).lower():
                return turn, field
        return None


def _read_model(path: Path, model: type[BaseModel]) -> Any:
    """``path`` validated as ``model``; None when absent (a run still going has no summary yet).

    Raises:
        InspectError: present but not JSON, or another format version (the message names both versions).
    """
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InspectError(f"{path} cannot be read as JSON: {exc}") from None
    expected = model.model_fields["schema_version"].default
    if isinstance(data, dict) and data.get("schema_version") != expected:
        raise InspectError(
            f"{path} has format version {data.get('schema_version')!r}; this inspector reads {expected!r}"
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InspectError(f"{path} is not a valid {expected} file: {exc.errors()[0]['msg']}") from None
