"""``replay:PATH``: a model that answers with the assistant messages of a recorded trajectory, in order.

Used for demos without a model, for regression tests of the agent loop and feedback, and for re-evaluating a
recorded run against a changed evaluator. The trajectory is a mini-swe-agent JSON file
(``trajectory_format`` ``mini-swe-agent-1.1``, or ``mini-swe-agent-1``) with a ``messages`` list.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from mini_ptx_agent.models.base import KernelModelBase, ModelConfigError, ModelUsage, ReplayExhaustedError

REPLAY_PREFIX = "replay:"
ACCEPTED_FORMATS = ("mini-swe-agent-1.1", "mini-swe-agent-1")


class ReplayModelConfig(BaseModel):
    """Configuration of :class:`ReplayModel`."""

    model_config = ConfigDict(extra="forbid")

    model_name: str
    """``replay:<path>`` as given."""
    path: str
    """The trajectory file (for a bundled demo, which one: ``bundled demo vector_add_f32 (triton)``)."""
    n_messages: int
    """Number of assistant messages available."""
    fallback: bool = False
    """True when chosen because no model was configured (the run says so loudly)."""
    demo: bool = False
    """The replies are not a model's output: the trajectory is flagged as a demo (:func:`is_demo_trajectory`) or
    the replay is the no-model fallback. Runs record it (``info.ptxbench.demo``, ``demo`` in plan and summary)."""


def is_demo_trajectory(data: Any) -> bool:
    """Whether a trajectory's ``info`` flags it as a demo: ``info.ptxbench.demo`` true, or the bundled demo's
    ``info.ptxbench_demo`` section. A replay of a demo (or of a run that replayed one) is a demo too."""
    info = data.get("info") if isinstance(data, dict) else None
    if not isinstance(info, dict):
        return False
    state = info.get("ptxbench")
    return bool(isinstance(state, dict) and state.get("demo") is True) or "ptxbench_demo" in info


def read_trajectory(path: Path) -> dict[str, Any]:
    """The replayable trajectory at ``path`` (a JSON object of an accepted ``trajectory_format``).

    Raises:
        ModelConfigError: missing file, invalid JSON, or unknown ``trajectory_format``.
    """
    if not path.is_file():
        raise ModelConfigError(f"replay trajectory {path} does not exist")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelConfigError(f"replay trajectory {path} is not readable JSON: {exc}") from exc
    fmt = data.get("trajectory_format") if isinstance(data, dict) else None
    if fmt not in ACCEPTED_FORMATS:
        raise ModelConfigError(
            f"replay trajectory {path} has trajectory_format {fmt!r}; expected one of {list(ACCEPTED_FORMATS)}"
        )
    return data


def assistant_contents(data: dict[str, Any], path: Path) -> list[str]:
    """Contents of the assistant messages of trajectory ``data`` (read from ``path``), in order.

    Raises:
        ModelConfigError: no assistant message.
    """
    contents = []
    for message in data.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "assistant":
            content = message.get("content")
            if isinstance(content, list):  # multimodal parts: keep the text
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            contents.append(content or "")
    if not contents:
        raise ModelConfigError(f"replay trajectory {path} contains no assistant messages")
    return contents


class ReplayModel(KernelModelBase):
    """mini-swe-agent-compatible model replaying recorded assistant messages; costs nothing.

    Raises at construction:
        ModelConfigError: see :func:`read_trajectory` and :func:`assistant_contents`.
    """

    def __init__(
        self,
        *,
        path: str | Path,
        model_name: str | None = None,
        fallback: bool = False,
        data: dict[str, Any] | None = None,
    ):
        """``data``: the trajectory itself (a bundled demo, :func:`mini_ptx_agent.demo.demo_trajectory`), which
        ``path`` then only names; None reads ``path``."""
        trajectory = Path(path)
        if data is None:
            data = read_trajectory(trajectory)
        self._contents = assistant_contents(data, trajectory)
        self.config = ReplayModelConfig(
            model_name=model_name or f"{REPLAY_PREFIX}{trajectory}",
            path=str(path),
            n_messages=len(self._contents),
            fallback=fallback,
            demo=fallback or is_demo_trajectory(data),
        )
        self.usage = ModelUsage()
        self.index = 0

    def resume_from(self, n_done: int) -> None:
        """Continue after ``n_done`` messages were already replayed (a resumed run skips its completed turns).

        Raises:
            ValueError: ``n_done`` is negative or larger than the number of recorded messages.
        """
        if not 0 <= n_done <= len(self._contents):
            raise ValueError(
                f"cannot resume replay at {n_done}: the trajectory has {len(self._contents)} messages"
            )
        self.index = n_done

    def query(self, messages: list[dict], **kwargs: Any) -> dict:
        """The next recorded assistant message.

        Raises:
            ReplayExhaustedError: all recorded messages were already returned.
        """
        if self.index >= len(self._contents):
            raise ReplayExhaustedError(
                f"{self.config.path} has no reply left: its {len(self._contents)} recorded replies were used "
                f"(the agent asked for number {self.index + 1})"
            )
        content = self._contents[self.index]
        self.index += 1
        self.usage.add(0, 0, 0.0)
        return self.assistant_message(
            content, {"cost_usd": 0.0, "usage": {"prompt_tokens": 0, "completion_tokens": 0},
                      "replay_index": self.index, "model": self.config.model_name},
        )  # fmt: skip


def demo_model(definition: str | None, language: str | None) -> ReplayModel:
    """The model ``demo``: a replay of the bundled demo of ``definition`` in ``language``
    (:mod:`mini_ptx_agent.demo`), flagged as a demo; its model name stays ``demo``, so a resumed run finds it.

    Raises:
        ModelConfigError: no task given, or no demo for it (the message lists the demos).
    """
    from mini_ptx_agent.demo import DEMO_MODEL_NAME, DemoDataError, demo_trajectory, describe_demos

    if not definition or not language:
        raise ModelConfigError(
            f"the model demo needs the run's definition and language; demos: {describe_demos()}"
        )
    try:
        data = demo_trajectory(language, definition)
    except (ValueError, DemoDataError) as exc:
        raise ModelConfigError(f"--model demo: {exc}") from None
    return ReplayModel(path=f"bundled demo {definition} ({language})", model_name=DEMO_MODEL_NAME, data=data)
