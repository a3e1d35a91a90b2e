"""A kernel agent's trajectory (mini-swe-agent-1.1 JSON) as ATIF, the Agent Trajectory Interchange Format of Harbor.

The mapping, message by message:

- the system message and the task message become a ``system`` and a ``user`` step;
- each model reply becomes an ``agent`` step: its text as ``message``, its token counts and cost as
  ``metrics``; when the kernel in it was evaluated, one tool call ``evaluate_kernel`` (``turn``, ``file``)
  whose observation is the feedback message (``source_call_id`` names the call); a reply without a kernel
  block has no tool call and the format-error message as its observation;
- the exit message (``Submitted``, ``LimitsExceeded``, ...) is not a step: its status and text go into the
  root ``notes`` and ``extra.exit``, with the run's ``info.ptxbench`` (task, versions, best) in ``extra``.

Timestamps are the messages' own (``extra.timestamp``, seconds since the epoch) in ISO 8601. Only fields of
ATIF-v1.6 are written, so Harbor's validator (``harbor.utils.trajectory_validator``) accepts the result; the
tests run it.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any

from ..task import ENTRY_FILES

ATIF_VERSION = "ATIF-v1.6"
"""The ATIF version written."""

EVALUATE_TOOL = {
    "type": "function",
    "function": {
        "name": "evaluate_kernel",
        "description": (
            "Not called by the model: the agent evaluates the kernel block of every reply through FIBServe "
            "(build, correctness against the reference, timing against the baseline) and answers with feedback."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "turn": {"type": "integer", "description": "the model call whose reply held the kernel"},
                "file": {"type": "string", "description": "kernel.cu or kernel.py"},
            },
        },
    },
}
"""How the agent's one action appears among ATIF's ``agent.tool_definitions``."""


def _iso(seconds: Any) -> str | None:
    if not isinstance(seconds, int | float):
        return None
    return _dt.datetime.fromtimestamp(float(seconds), _dt.UTC).isoformat()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content
        )
    return "" if content is None else str(content)


def _metrics(extra: dict[str, Any]) -> dict[str, Any] | None:
    """ATIF step metrics from an assistant message's ``extra`` (``usage`` and ``cost_usd``/``cost``)."""
    usage = extra.get("usage") or {}
    metrics: dict[str, Any] = {}
    for ours, theirs in (("prompt_tokens", "prompt_tokens"), ("completion_tokens", "completion_tokens")):
        if isinstance(usage.get(ours), int):
            metrics[theirs] = usage[ours]
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    if isinstance(cached, int) and cached > 0:
        metrics["cached_tokens"] = cached
    cost = extra.get("cost_usd", extra.get("cost"))
    if isinstance(cost, int | float) and cost > 0:
        metrics["cost_usd"] = float(cost)
    return metrics or None


def _agent_step(
    step_id: int, message: dict[str, Any], answer: dict[str, Any] | None, file: str
) -> dict[str, Any]:
    """One model reply and, when present, the message that answered it (feedback or format error); ``file``
    is the kernel file the evaluation built (``kernel.cu`` or ``kernel.py``)."""
    extra = message.get("extra") or {}
    step: dict[str, Any] = {"step_id": step_id, "source": "agent", "message": _text(message.get("content"))}
    if (stamp := _iso(extra.get("timestamp"))) is not None:
        step["timestamp"] = stamp
    if (metrics := _metrics(extra)) is not None:
        step["metrics"] = metrics
    if answer is None:
        return step
    state = (answer.get("extra") or {}).get("ptxbench") or {}
    result: dict[str, Any] = {"content": _text(answer.get("content"))}
    if state.get("kind") == "evaluation":
        call_id = f"evaluate-turn-{state.get('turn', step_id)}"
        step["tool_calls"] = [
            {
                "tool_call_id": call_id,
                "function_name": "evaluate_kernel",
                "arguments": {"turn": state.get("turn"), "file": file},
            }
        ]
        result["source_call_id"] = call_id
    step["observation"] = {"results": [result]}
    return step


def to_atif(trajectory: dict[str, Any], *, session_id: str | None = None) -> dict[str, Any]:
    """The ATIF document (a JSON object) of a kernel agent trajectory.

    ``session_id`` defaults to ``mini-ptx-agent-<definition>``; the model is recorded in ``agent.model_name``.
    Token totals in ``final_metrics`` are sums over the replies that reported usage.

    Raises:
        ValueError: the trajectory has no messages, or is not mini-swe-agent-1.1.
    """
    if trajectory.get("trajectory_format") != "mini-swe-agent-1.1":
        raise ValueError(
            f"expected a mini-swe-agent-1.1 trajectory, got format {trajectory.get('trajectory_format')!r}"
        )
    messages = [m for m in trajectory.get("messages") or [] if isinstance(m, dict)]
    if not messages:
        raise ValueError("the trajectory has no messages")
    info = trajectory.get("info") or {}
    model = ((info.get("config") or {}).get("model") or {}).get("model_name")
    task = (info.get("ptxbench") or {}).get("task") or {}
    file = ENTRY_FILES.get(str(task.get("language")), ENTRY_FILES["cuda"])
    steps: list[dict[str, Any]] = []
    exits: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            following = messages[index + 1] if index + 1 < len(messages) else None
            answer = following if following is not None and following.get("role") == "user" else None
            steps.append(_agent_step(len(steps) + 1, message, answer, file))
        elif role == "system" or (role == "user" and not any(s["source"] == "agent" for s in steps)):
            steps.append(
                {"step_id": len(steps) + 1, "source": role, "message": _text(message.get("content"))}
            )
        elif role == "exit":
            exits.append(message)
    from mini_ptx_agent import __version__

    document: dict[str, Any] = {
        "schema_version": ATIF_VERSION,
        "session_id": session_id or f"mini-ptx-agent-{task.get('definition', 'run')}",
        "agent": {
            "name": "mini-ptx-agent",
            "version": __version__,
            "tool_definitions": [EVALUATE_TOOL],
            "extra": {"trajectory_format": "mini-swe-agent-1.1", "mini_version": info.get("mini_version")},
        },
        "steps": steps,
        "final_metrics": _totals(steps),
        "extra": {"ptxbench": info.get("ptxbench") or {}},
    }
    if model:
        document["agent"]["model_name"] = str(model)
    if exits:
        last = exits[-1]
        status = (last.get("extra") or {}).get("exit_status") or info.get("exit_status") or ""
        document["notes"] = f"exit status {status}: {_text(last.get('content'))}".strip()
        document["extra"]["exit"] = {"status": status, "message": _text(last.get("content"))}
    return document


def _totals(steps: list[dict[str, Any]]) -> dict[str, Any]:
    totals: dict[str, Any] = {"total_steps": len(steps)}
    for key, total in (
        ("prompt_tokens", "total_prompt_tokens"),
        ("completion_tokens", "total_completion_tokens"),
        ("cached_tokens", "total_cached_tokens"),
        ("cost_usd", "total_cost_usd"),
    ):
        values = [s["metrics"][key] for s in steps if key in (s.get("metrics") or {})]
        if values:
            totals[total] = sum(values)
    return totals


def write_atif(trajectory_path: Path, out: Path, *, session_id: str | None = None) -> dict[str, Any]:
    """Convert the trajectory file ``trajectory_path`` and write the ATIF JSON to ``out``; returns the document.

    Raises:
        OSError: a file cannot be read or written.
        ValueError: the file is not JSON or not a mini-swe-agent-1.1 trajectory.
    """
    document = to_atif(json.loads(Path(trajectory_path).read_text(encoding="utf-8")), session_id=session_id)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return document
