"""``ptxbench data repair``: one repair turn per mined failure, evaluated through FIBServe.

The repair model sees the conversation as the agent had it at the failed turn, cut to one exchange: the agent's
system prompt, the task message, the failing kernel (as the assistant's reply) and its error log (the
evaluation as feedback text) with one added request: explain what went wrong, then send the whole fixed kernel.
The kernel of its reply is evaluated on the failure's own task (definition, workloads, tolerances) by FIBServe
(``--service-url``/``$SERVICE_URL``, else an embedded one), and both the reply and the evaluation are journaled
per failure (:mod:`mini_ptx_agent.data.calls`): a run stopped at any point, run again, asks no failure twice and
evaluates only what was not evaluated. At the end ``repairs.jsonl`` holds every journaled repair and
``repair.json`` the counts.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..environment import EvaluationInfrastructureError
from ..environment.report import KernelReport
from ..extraction import FENCE_TAG, extract_kernel, fenced
from ..prompts.tokens import count_tokens
from ..trajectory import write_json
from .calls import CallEstimate, Journal, ModelCall, StepResult, call_model, estimate, run_items
from .flags import Flag, kernel_flags
from .mining import FAILURES_FILE, FailureRecord
from .records import read_jsonl, step_file

REPAIRS_FILE = "repairs.jsonl"
SUMMARY_FILE = "repair.json"

REPAIR_REQUEST = (
    "Repair this kernel in one reply. First explain what went wrong and how you fix it, step by step; then send "
    "the whole corrected kernel in one fenced code block, as before."
)
"""Added after the error log: what the repair model is asked to do."""


class RepairEntry(BaseModel):
    """One failure's repair: the model's reply and the evaluation of its kernel (a journal entry, and a line of
    ``repairs.jsonl``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    format: Literal["ptxbench.fixit-repair/1"] = "ptxbench.fixit-repair/1"
    failure: FailureRecord
    call: ModelCall
    kernel: str | None = None
    """The reply's kernel (None: the reply held no complete block of the task's language)."""
    kernel_hash: str | None = None
    """sha256 of the fixed kernel as a Solution (:meth:`fibserve.trace.Solution.hash`)."""
    report: KernelReport | None = None
    """FIBServe's evaluation of the fixed kernel on the failure's task (None: no kernel, or not evaluated yet)."""
    flags: list[Flag] = Field(default_factory=list)
    """The evaluator's flags on the fixed kernel."""

    @property
    def complete(self) -> bool:
        """Nothing is left to do: evaluated, or there was no kernel to evaluate."""
        return self.kernel is None or self.report is not None


def repair_messages(failure: FailureRecord) -> list[dict[str, str]]:
    """The repair request: system prompt, task, the failing kernel as the assistant's reply, its error log
    with :data:`REPAIR_REQUEST`."""
    return [
        {"role": "system", "content": failure.system},
        {"role": "user", "content": failure.task_message},
        {"role": "assistant", "content": fenced(failure.kernel, FENCE_TAG[failure.task.language])},
        {"role": "user", "content": f"{failure.error_log}\n\n{REPAIR_REQUEST}"},
    ]


def _reply_entry(failure: FailureRecord, call: ModelCall) -> RepairEntry:
    kernel = extract_kernel(call.content, failure.task.language).source
    digest = failure.task.solution(kernel, name="kernel").hash() if kernel is not None else None
    return RepairEntry(failure=failure, call=call, kernel=kernel, kernel_hash=digest)


def _estimate(model: str, failures: Sequence[FailureRecord], journal: Journal) -> CallEstimate:
    entries = {f.id: journal.load(f.id, RepairEntry) for f in failures}
    to_call = [f for f in failures if entries[f.id] is None]
    to_evaluate = sum(1 for e in entries.values() if e is not None and not e.complete)
    estimate_ = estimate(
        model, [repair_messages(f) for f in to_call], [2 * count_tokens(f.kernel) for f in to_call],
        items=len(failures), evaluations=len(to_call) + to_evaluate,
    )  # fmt: skip
    estimate_.notes.append(
        "completion tokens: a fixed kernel as long as the failing one, and as much reasoning"
    )
    return estimate_


class RepairResult(StepResult):
    """What ``ptxbench data repair`` did (also ``repair.json``)."""

    passed: int
    """Repairs whose kernel passed every workload."""
    without_kernel: int


def repair_failures(
    failures_path: Path,
    output: Path,
    *,
    model: str,
    model_host: str | None = None,
    service_url: str | None = None,
    concurrency: int = 4,
    limit: int | None = None,
    dry_run: bool = False,
    console: Any = None,
) -> RepairResult | CallEstimate:
    """Repair each failure of ``failures_path`` (a ``failures.jsonl`` or the directory holding it) with
    ``model`` into ``output``; with ``dry_run`` only the :class:`CallEstimate`, before the model is even built.

    Raises:
        DataStepError: the failures file is missing or does not validate.
        ModelConfigError: the model is misconfigured (before any call).
        ServiceStartError: no FIBServe could be started.
    """
    from ..environment.embedded import service_url as resolve_service
    from ..environment.fibserve import FIBServeBackend
    from ..models import ModelRequestError, ModelUnavailableError, make_model

    failures = read_jsonl(step_file(failures_path, FAILURES_FILE), FailureRecord)[:limit]
    journal = Journal(output)
    if dry_run:
        return _estimate(model, failures, journal)
    kernel_model = make_model(model, model_host=model_host)
    called: list[str] = []  # list.append is atomic across the worker threads

    with resolve_service(service_url, log_path=Path(output) / "logs" / "fibserve.log") as (url, embedded):
        backend = FIBServeBackend(url, token=None if embedded else os.environ.get("FIBSERVE_TOKEN") or None)

        def work(failure: FailureRecord) -> None:
            entry = journal.load(failure.id, RepairEntry)
            if entry is None:
                entry = _reply_entry(failure, call_model(kernel_model, repair_messages(failure)))
                journal.save(failure.id, entry)
                called.append(failure.id)
            if entry.kernel is not None and entry.report is None:
                solution = failure.task.solution(entry.kernel, name=f"fixit-{failure.id}", author=model)
                report = backend.evaluate(solution, failure.task)
                journal.save(
                    failure.id, entry.model_copy(update={"report": report, "flags": kernel_flags(report)})
                )

        todo = [f for f in failures if not _complete(journal.load(f.id, RepairEntry))]
        tally = run_items(
            todo, work, lambda f: f.id, concurrency=concurrency, description="repairing",
            retryable=(ModelUnavailableError, ModelRequestError, EvaluationInfrastructureError), console=console,
        )  # fmt: skip
    entries = journal.collect([f.id for f in failures], RepairEntry, Path(output) / REPAIRS_FILE)
    result = RepairResult(
        model=model, items=len(failures), called=len(called), written=len(entries),
        passed=sum(1 for e in entries if e.report is not None and e.report.all_passed),
        without_kernel=sum(1 for e in entries if e.kernel is None), failed=tally.failed,
        interrupted=tally.interrupted,
    )  # fmt: skip
    write_json(Path(output) / SUMMARY_FILE, result.model_dump(mode="json"))
    return result


def _complete(entry: RepairEntry | None) -> bool:
    return entry is not None and entry.complete
