"""``ptxbench data reasoning``: the reasoning that leads to each correct kernel, written by a model.

For each record of ``kernels.jsonl`` the model gets the agent's system prompt and the task message followed by
the correct kernel and a request to write the thinking that arrives at it (without quoting it). The reply's
text outside code blocks (and the API's separate reasoning, when it sends one) is the reasoning. Replies are
journaled per kernel (:mod:`mini_ptx_agent.data.calls`), so a stopped run, run again, asks no kernel twice; at
the end ``reasoning.jsonl`` holds every kernel with its reasoning and ``reasoning.json`` the counts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ..extraction import FENCE_TAG, fenced
from ..trajectory import write_json
from .calls import CallEstimate, Journal, ModelCall, StepResult, call_model, estimate, run_items
from .mining import KERNELS_FILE, KernelRecord
from .records import read_jsonl, step_file

REASONING_FILE = "reasoning.jsonl"
SUMMARY_FILE = "reasoning.json"

REASONING_REQUEST = (
    "Below is a correct kernel for this task. Write the reasoning an expert kernel engineer goes through before "
    "writing it: what the definition computes, its shapes and memory traffic, how the work is split across "
    "the GPU, the tiling and the instructions chosen for the target, and the details that make it correct. "
    "Write it as your own thinking before the code exists: do not quote the kernel, do not mention that it "
    "was given, and send no code block."
)

REASONING_TOKENS_ESTIMATE = 1024
"""Completion tokens expected of one reasoning reply (``--dry-run``)."""


class ReasoningEntry(BaseModel):
    """One kernel and the reasoning written for it (a journal entry, and a line of ``reasoning.jsonl``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    format: Literal["ptxbench.kernelgen-reasoning/1"] = "ptxbench.kernelgen-reasoning/1"
    kernel: KernelRecord
    call: ModelCall
    reasoning: str
    """The reasoning (empty when the reply held none: such an entry yields no SFT row)."""


def reasoning_messages(record: KernelRecord) -> list[dict[str, str]]:
    """The request: system prompt, then the task, :data:`REASONING_REQUEST` and the kernel."""
    kernel = fenced(record.kernel, FENCE_TAG[record.task.language])
    return [
        {"role": "system", "content": record.system},
        {"role": "user", "content": f"{record.task_message}\n\n{REASONING_REQUEST}\n\n{kernel}"},
    ]


class ReasoningResult(StepResult):
    """What ``ptxbench data reasoning`` did (also ``reasoning.json``)."""

    empty: int
    """Replies without reasoning."""


def write_reasoning(
    kernels_path: Path,
    output: Path,
    *,
    model: str,
    model_host: str | None = None,
    concurrency: int = 4,
    limit: int | None = None,
    dry_run: bool = False,
    console: Any = None,
) -> ReasoningResult | CallEstimate:
    """Ask ``model`` for the reasoning of each kernel of ``kernels_path`` (a ``kernels.jsonl`` or its directory)
    into ``output``; with ``dry_run`` only the :class:`CallEstimate`, before the model is built.

    Raises:
        DataStepError: the kernels file is missing or does not validate.
        ModelConfigError: the model is misconfigured (before any call).
    """
    from ..models import ModelRequestError, ModelUnavailableError, make_model

    records = read_jsonl(step_file(kernels_path, KERNELS_FILE), KernelRecord)[:limit]
    journal = Journal(output)
    todo = [r for r in records if journal.load(r.id, ReasoningEntry) is None]
    if dry_run:
        return estimate(
            model, [reasoning_messages(r) for r in todo], [REASONING_TOKENS_ESTIMATE] * len(todo),
            items=len(records),
        )  # fmt: skip
    reasoning_model = make_model(model, model_host=model_host)

    def work(record: KernelRecord) -> None:
        call = call_model(reasoning_model, reasoning_messages(record))
        entry = ReasoningEntry(kernel=record, call=call, reasoning=call.reasoning(record.task.language))
        journal.save(record.id, entry)

    tally = run_items(
        todo, work, lambda r: r.id, concurrency=concurrency, description="writing reasoning",
        retryable=(ModelUnavailableError, ModelRequestError), console=console,
    )  # fmt: skip
    entries = journal.collect([r.id for r in records], ReasoningEntry, Path(output) / REASONING_FILE)
    result = ReasoningResult(
        model=model, items=len(records), called=tally.done, written=len(entries),
        empty=sum(1 for e in entries if not e.reasoning), failed=tally.failed, interrupted=tally.interrupted,
    )  # fmt: skip
    write_json(Path(output) / SUMMARY_FILE, result.model_dump(mode="json"))
    return result
