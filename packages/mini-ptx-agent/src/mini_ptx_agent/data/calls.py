"""Model calls for data steps: journaled one file per item, concurrent, interruptible, estimated before any call.

The repair and reasoning steps ask a model once per record. Each finished call is written at once to
``<output>/journal/<record id>.json`` (atomically), together with whatever the step did with it (the repair's
evaluation), so a step stopped by Ctrl-C, a kill or an outage is run again with the same command and repeats
no finished call: an item whose journal holds the call is not asked again. The journal never holds a key
(:func:`mini_ptx_agent.trajectory.write_json` scrubs secrets).

:func:`run_items` works through the items in daemon threads (the work is waiting for a model or for FIBServe),
at most ``concurrency`` at once, with a progress bar; the first Ctrl-C starts no new item and lets the calls in
flight finish and be journaled, a second one leaves at once. An item whose model or service failed is
counted as failed and left for the next run. :func:`estimate` is ``--dry-run``: the calls that would be made,
their prompt tokens counted with the offline tokenizer (:mod:`mini_ptx_agent.prompts.tokens`), an estimate
of their completion tokens, and the cost when the model has a price in ``models.yaml``.
"""

from __future__ import annotations

import datetime as _dt
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ..prompts.tokens import count_tokens
from ..trajectory import write_json
from .records import read_json

T = TypeVar("T")
E = TypeVar("E", bound=BaseModel)
JOURNAL_DIR = "journal"

MESSAGE_OVERHEAD_TOKENS = 4
"""Tokens a chat template adds around each message (role markers), as OpenAI counts them for its models."""


class ModelCall(BaseModel):
    """One finished model call."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    model: str
    """The model's name as given."""
    content: str
    """The reply."""
    reasoning_content: str | None = None
    """The reasoning the API returned apart from the reply (reasoning models), if any."""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    """None: the model has no known price."""
    seconds: float
    """Wall time of the call, retries included (s)."""
    at: str
    """When it finished (UTC, ISO 8601)."""

    def reasoning(self, language: str) -> str:
        """The reasoning of the reply: the API's separate reasoning (when it sent one) followed by the reply's
        text outside its fenced blocks (``language``'s kernel included), stripped."""
        from ..extraction import extract_kernel

        parts = [self.reasoning_content or "", extract_kernel(self.content, language).prose]
        return "\n\n".join(p.strip() for p in parts if p.strip())


def call_model(model: Any, messages: list[dict[str, str]]) -> ModelCall:
    """Ask ``model`` (the factory's, :func:`mini_ptx_agent.models.make_model`) once.

    Raises:
        ModelUnavailableError, ModelRequestError: the model API failed (nothing is journaled).
    """
    started = time.monotonic()
    reply = model.query(messages)
    extra = reply.get("extra") or {}
    usage = extra.get("usage") or {}
    return ModelCall(
        model=str(getattr(model.config, "model_name", "")),
        content=str(reply.get("content") or ""),
        reasoning_content=extra.get("reasoning_content") or None,
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        cost_usd=extra.get("cost_usd"),
        seconds=round(time.monotonic() - started, 3),
        at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    )


class Journal:
    """``<output>/journal/<id>.json``: one entry (a pydantic model) per item."""

    def __init__(self, output: Path):
        self.directory = Path(output) / JOURNAL_DIR

    def load(self, item_id: str, model: type[E]) -> E | None:
        """The entry of ``item_id``, or None (never written, or unreadable: the item is done again)."""
        data = read_json(self.directory / f"{item_id}.json")
        if data is None:
            return None
        try:
            return model.model_validate(data)
        except ValueError:
            return None

    def save(self, item_id: str, entry: BaseModel) -> None:
        """Write the entry of ``item_id`` atomically, secrets scrubbed."""
        write_json(self.directory / f"{item_id}.json", entry.model_dump(mode="json"))

    def collect(self, item_ids: Sequence[str], model: type[E], path: Path) -> list[E]:
        """The entries of ``item_ids`` that exist, in that order, also written to the JSON Lines file ``path``."""
        from .records import write_jsonl

        entries = [e for item_id in item_ids if (e := self.load(item_id, model)) is not None]
        write_jsonl(path, entries)
        return entries


class StepResult(BaseModel):
    """What a step of model calls did in one run."""

    model: str
    items: int
    """Records the step worked on."""
    called: int
    """Model calls made in this run."""
    written: int
    """Records with a journaled reply (the step's JSON Lines file)."""
    failed: dict[str, str] = Field(default_factory=dict)
    """Record id -> why its model call or evaluation failed (run the step again to retry)."""
    interrupted: bool = False


class CallEstimate(BaseModel):
    """What a step would call (``--dry-run``), before any call."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    model: str
    items: int
    """Records the step works on."""
    journaled: int
    """Of those, already answered in the journal (no call)."""
    calls: int
    """Model calls it would make."""
    prompt_tokens: int
    """Prompt tokens of those calls (tiktoken cl100k_base, offline; other tokenizers differ by some percent)."""
    completion_tokens_estimate: int
    """Completion tokens expected (see the step: a kernel's tokens plus its reasoning)."""
    cost_usd_estimate: float | None = None
    """From the model's price in ``models.yaml``; None when it has none."""
    evaluations: int = 0
    """FIBServe evaluations it would run (the repair step)."""
    notes: list[str] = Field(default_factory=list)


def conversation_tokens(messages: Sequence[dict[str, str]]) -> int:
    """Tokens of a chat (offline ``cl100k_base``): each message's content plus :data:`MESSAGE_OVERHEAD_TOKENS`."""
    return sum(count_tokens(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)


def estimate(
    model_name: str,
    prompts: Sequence[list[dict[str, str]]],
    completion_tokens: Sequence[int],
    *,
    items: int,
    evaluations: int = 0,
) -> CallEstimate:
    """The estimate of calling ``model_name`` with ``prompts`` (one per call still to make), each expected to
    answer ``completion_tokens``; ``items``: all records (journaled ones included)."""
    from ..models.config import load_models_config

    family = load_models_config(None).family_for(model_name)
    prompt = sum(conversation_tokens(p) for p in prompts)
    completion = sum(completion_tokens)
    cost = None
    notes = []
    if family is not None and family.pricing is not None:
        price = family.pricing
        cost = round((prompt * price.input_usd_per_mtok + completion * price.output_usd_per_mtok) / 1e6, 4)
    else:
        notes.append(f"no price for {model_name} in models.yaml: cost unknown")
    return CallEstimate(
        model=model_name, items=items, journaled=items - len(prompts), calls=len(prompts),
        prompt_tokens=prompt, completion_tokens_estimate=completion, cost_usd_estimate=cost,
        evaluations=evaluations, notes=notes,
    )  # fmt: skip


@dataclass
class Tally:
    """How a run of :func:`run_items` went."""

    done: int = 0
    """Items finished in this run."""
    failed: dict[str, str] = field(default_factory=dict)
    """Item id -> why its model or service failed (done again by the next run)."""
    interrupted: bool = False
    """Ctrl-C stopped it before every item started."""


def run_items(
    items: Sequence[T],
    work: Callable[[T], None],
    item_id: Callable[[T], str],
    *,
    concurrency: int,
    retryable: tuple[type[BaseException], ...],
    description: str,
    console: Any = None,
) -> Tally:
    """Run ``work`` on each item in daemon threads, at most ``concurrency`` at once, with a progress bar on
    ``console`` (None: quiet). An exception of a ``retryable`` type fails only its item; any other stops the
    run (the items in flight are left to finish) and is raised."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    tally = Tally()
    todo: queue.SimpleQueue[T] = queue.SimpleQueue()
    for item in items:
        todo.put(item)
    finished: queue.SimpleQueue[tuple[str, BaseException | None]] = queue.SimpleQueue()
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            try:
                item = todo.get_nowait()
            except queue.Empty:
                return
            try:
                work(item)
                finished.put((item_id(item), None))
            except BaseException as exc:  # handed to the main thread, which decides
                finished.put((item_id(item), exc))

    threads = [
        threading.Thread(target=worker, daemon=True) for _ in range(max(1, min(concurrency, len(items))))
    ]
    for thread in threads:
        thread.start()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console or Console(quiet=True), transient=False) as progress:
        bar = progress.add_task(description, total=len(items))
        pending, error = len(items), None
        while (pending and any(t.is_alive() for t in threads)) or not finished.empty():
            try:
                name, exc = finished.get(timeout=0.2)
            except queue.Empty:
                continue
            except KeyboardInterrupt:
                if stop.is_set():
                    raise
                stop.set()
                tally.interrupted = True
                continue
            pending -= 1
            progress.advance(bar)
            if exc is None:
                tally.done += 1
            elif isinstance(exc, retryable):
                tally.failed[name] = str(exc)
            elif error is None:
                stop.set()
                error = exc
    if error is not None:
        raise error
    return tally
