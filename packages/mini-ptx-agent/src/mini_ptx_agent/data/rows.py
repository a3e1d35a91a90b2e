"""The SFT row (``ptxbench.sft/1``): chat messages, a loss mask on the final assistant message, tokens, provenance.

The schema is the contract with trainers and the inspector; docs/training-data.md documents it field by field,
and a change of meaning bumps :data:`SFT_FORMAT`. Two layouts:

- **kernelgen** (3 messages): system prompt, task, assistant ``<think>reasoning</think>`` + the kernel;
- **fixit** (5 messages): system prompt, task, assistant with the wrong kernel, user with its error log,
  assistant ``<think>reasoning</think>`` + the fixed kernel.

Messages are normalised for chat templates (:func:`normalise`): roles ``system``/``user``/``assistant`` only,
``\\n`` line ends, no trailing spaces, no empty or repeated-role messages, exactly one ``<think>`` block and only in
the final message. The loss mask has one entry per message, 1 on the final assistant message only (what the
model learns to write), 0 on the rest (what it reads). Tokens are counted offline with ``cl100k_base``
(:mod:`mini_ptx_agent.prompts.tokens`); a trainer's own tokenizer differs by some percent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..extraction import FENCE_TAG, fenced
from ..prompts.tokens import TOKENIZER, count_tokens
from .calls import MESSAGE_OVERHEAD_TOKENS, conversation_tokens
from .flags import Flag
from .records import Provenance

SFT_FORMAT = "ptxbench.sft/1"
"""Version of the row schema; bump when a field changes meaning."""
Role = Literal["system", "user", "assistant"]
_THINK = re.compile(r"</?think>")


class ChatMessage(BaseModel):
    """One message of a row."""

    model_config = ConfigDict(extra="forbid")

    role: Role
    content: str


class TokenCounts(BaseModel):
    """Tokens of a row (``tokenizer``), each message counted with :data:`MESSAGE_OVERHEAD_TOKENS` more."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    prompt: int
    """Every message before the final one (loss mask 0)."""
    completion: int
    """The final assistant message (loss mask 1)."""
    total: int
    tokenizer: str = TOKENIZER


class FixOutcome(BaseModel):
    """Fixit: the repair a row teaches, and how its kernel was evaluated."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    kernel_hash: str
    """sha256 of the fixed kernel as a Solution (:meth:`fibserve.trace.Solution.hash`)."""
    status: str
    """The fix's overall status (``PASSED``)."""
    executed_on_gpu: bool
    min_speedup: float | None = None
    architecture_families: list[str] | None = None
    """Target families in the fix's compiled code (None: unknown, e.g. Triton)."""
    repair_record: str
    """The repair's journal entry (its reply and its whole KernelReport): ``<repair dir>/journal/<id>.json``."""


class SFTRow(BaseModel):
    """One training example (a line of ``sft.jsonl``, a row of ``sft.parquet``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    format: Literal["ptxbench.sft/1"] = SFT_FORMAT
    id: str
    """``<recipe>-<record id>``: stable across rebuilds of the same inputs."""
    recipe: Literal["fixit", "kernelgen"]
    messages: list[ChatMessage]
    loss_mask: list[int]
    """One entry per message: 1 on the final assistant message (trained on), 0 elsewhere."""
    tokens: TokenCounts
    provenance: Provenance
    """The turn the row comes from: kernelgen, the correct kernel's turn; fixit, the failed kernel's turn."""
    kernel_hash: str
    """The kernel the final message teaches (fixit: the fixed kernel)."""
    teacher_model: str
    """The model that wrote the final message's reasoning (fixit: the reasoning and the fix)."""
    fix: FixOutcome | None = None
    """Fixit only."""
    flags: list[Flag] = Field(default_factory=list)
    """The evaluator's flags on the taught kernel; rows with any are left out unless asked for."""

    @model_validator(mode="after")
    def _mask_fits(self) -> SFTRow:
        if len(self.loss_mask) != len(self.messages) or self.messages[-1].role != "assistant":
            raise ValueError("one loss-mask entry per message, and the final message is the assistant's")
        return self


def normalise(messages: Sequence[dict[str, str]]) -> list[ChatMessage]:
    """Messages as chat templates want them (see the module docstring): ``\\n`` line ends and no trailing
    spaces, empty messages dropped, adjacent messages of one role joined, ``<think>`` tags removed from every
    message but the final one.

    Raises:
        ValueError: a role other than system/user/assistant, a system message after the first, or a
            conversation that does not end with the assistant.
    """
    out: list[ChatMessage] = []
    for index, message in enumerate(messages):
        text = "\n".join(line.rstrip() for line in message["content"].replace("\r\n", "\n").split("\n"))
        text = text.strip("\n")
        if index < len(messages) - 1:
            text = _THINK.sub("", text)
        if not text.strip():
            continue
        role = message["role"]
        if role == "system" and out:
            raise ValueError("a system message may only come first")
        if out and out[-1].role == role:
            out[-1] = ChatMessage(role=role, content=f"{out[-1].content}\n\n{text}")
        else:
            out.append(ChatMessage.model_validate({"role": role, "content": text}))
    if not out or out[-1].role != "assistant":
        raise ValueError("a training conversation ends with the assistant's message")
    return out


def final_answer(reasoning: str, kernel: str, language: str) -> str:
    """The message a row teaches: ``<think>`` the reasoning ``</think>``, then the kernel in a fenced block."""
    thinking = _THINK.sub("", reasoning).strip()
    return f"<think>\n{thinking}\n</think>\n\n{fenced(kernel, FENCE_TAG[language])}"


def token_counts(messages: Sequence[ChatMessage]) -> TokenCounts:
    """The row's tokens: prompt (all but the final message) and completion (the final one)."""
    prompt = conversation_tokens([m.model_dump() for m in messages[:-1]])
    completion = count_tokens(messages[-1].content) + MESSAGE_OVERHEAD_TOKENS
    return TokenCounts(prompt=prompt, completion=completion, total=prompt + completion)


def loss_mask(messages: Sequence[ChatMessage]) -> list[int]:
    """1 on the final message, 0 on the others."""
    return [0] * (len(messages) - 1) + [1]
