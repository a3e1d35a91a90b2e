"""Mining turns from experiments: failed kernels for Fixit, correct kernels for KernelGen.

``ptxbench data failures`` keeps evaluated turns whose kernel failed in a chosen class (``compile``,
``runtime``, ``incorrect``, ``timeout``, ``policy``); ``ptxbench data kernelgen`` keeps turns whose kernel
passed every workload. Both then

1. drop repeats: one record per kernel hash (the first seen, in source, plan and turn order), since a model
   often sends the same kernel again;
2. rebalance: at most ``per_cell`` records per cell (Fixit: definition x failure class; KernelGen: definition),
   chosen within a cell in kernel-hash order (stable, and independent of which replica came first);
3. cap the total at ``limit``, taking the cells in turn so every cell keeps a share.

Each record carries its provenance and the flags of its evaluation (:mod:`mini_ptx_agent.data.flags`); the step
writes ``failures.jsonl`` or ``kernels.jsonl`` and ``selection.json`` (what was found and dropped, and why).
Mining reads only files, so running it again gives the same output.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..runs.turns import FailureClass
from ..task import TaskConfig
from ..trajectory import write_json
from .flags import Flag, kernel_flags
from .records import DataStepError, Provenance, write_jsonl
from .sources import EvaluatedTurn, scan_sources

REPAIRABLE: tuple[FailureClass, ...] = ("compile", "runtime", "incorrect", "timeout", "policy")
"""Failure classes a repair can learn from (a format error has no kernel; ``not_executed`` and
``infrastructure`` say nothing about the kernel)."""
FAILURES_FILE = "failures.jsonl"
KERNELS_FILE = "kernels.jsonl"
SELECTION_FILE = "selection.json"


class MinedTurn(BaseModel):
    """A turn chosen for training data: the kernel, the conversation it answered, where it came from."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    id: str
    """Stable id: 16 hex digits of sha256 over source, trajectory, turn and kernel hash."""
    provenance: Provenance
    kernel: str
    """The kernel source."""
    system: str
    """The system prompt the agent saw."""
    task_message: str
    """The first user message: the task with the definition JSON."""
    task: TaskConfig
    """The trajectory's task (definition, workloads, language, arch, tolerances): a repair is evaluated on it."""
    flags: list[Flag] = Field(default_factory=list)
    """The evaluator's flags on this kernel's evaluation."""


class FailureRecord(MinedTurn):
    """A failed kernel for Fixit (``failures.jsonl``)."""

    format: Literal["ptxbench.fixit-failure/1"] = "ptxbench.fixit-failure/1"
    error_log: str
    """The evaluation as feedback text: statuses, the error and compile log, the verdict."""


class KernelRecord(MinedTurn):
    """A correct kernel for KernelGen (``kernels.jsonl``)."""

    format: Literal["ptxbench.kernelgen-kernel/1"] = "ptxbench.kernelgen-kernel/1"


def _record_id(turn: EvaluatedTurn) -> str:
    p = turn.provenance
    key = f"{p.source_dir}\0{p.run_dir}\0{p.turn}\0{p.kernel_hash}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _common(turn: EvaluatedTurn) -> dict[str, Any]:
    return {
        "id": _record_id(turn), "provenance": turn.provenance, "kernel": turn.kernel, "system": turn.system,
        "task_message": turn.task_message, "task": turn.plan.task, "flags": kernel_flags(turn.report),
    }  # fmt: skip


def select(
    turns: Sequence[EvaluatedTurn],
    cell: Callable[[EvaluatedTurn], str],
    per_cell: int | None,
    limit: int | None,
) -> tuple[list[EvaluatedTurn], dict[str, int]]:
    """Dedup by kernel hash, cap each cell at ``per_cell``, cap the total at ``limit`` taking cells in turn
    (see the module docstring); returns the chosen turns (cells in name order) and how many each rule dropped."""
    seen: set[str] = set()
    cells: dict[str, list[EvaluatedTurn]] = defaultdict(list)
    dropped = Counter[str]()
    for turn in turns:
        if turn.provenance.kernel_hash in seen:
            dropped["repeated_kernel"] += 1
            continue
        seen.add(turn.provenance.kernel_hash)
        cells[cell(turn)].append(turn)
    queues = []
    for name in sorted(cells):
        chosen = sorted(cells[name], key=lambda t: t.provenance.kernel_hash)
        if per_cell is not None and len(chosen) > per_cell:
            dropped["per_cell"] += len(chosen) - per_cell
            chosen = chosen[:per_cell]
        queues.append(chosen)
    picked: list[EvaluatedTurn] = []
    while any(queues) and (limit is None or len(picked) < limit):
        for queue in queues:
            if queue and (limit is None or len(picked) < limit):
                picked.append(queue.pop(0))
    dropped["limit"] = sum(len(q) for q in queues)
    return picked, {k: v for k, v in dropped.items() if v}


def _summary(scan: Any, candidates: list[EvaluatedTurn], picked: list[Any], dropped: dict[str, int],
             options: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    return {
        "options": options,
        "trajectories": scan.trajectories,
        "demo_trajectories_skipped": scan.demo_trajectories,
        "evaluated_turns": len(scan.turns),
        "candidates": len(candidates),
        "dropped": dropped,
        "selected": len(picked),
        "flagged": sum(1 for r in picked if r.flags),
        "by_definition": dict(Counter(r.provenance.definition for r in picked)),
        "by_class": dict(Counter(r.provenance.failure_class for r in picked)),
        "by_model": dict(Counter(r.provenance.model for r in picked)),
    }


def mine_failures(
    sources: Sequence[Path],
    output: Path,
    *,
    classes: Sequence[FailureClass] = REPAIRABLE,
    per_cell: int | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """Write ``output/failures.jsonl`` (:class:`FailureRecord`) and ``output/selection.json``; returns the
    selection summary (counts by definition, class and model; what was dropped and why).

    Raises:
        DataStepError: a class that is not repairable; see :func:`~mini_ptx_agent.data.sources.scan_sources`.
    """
    wrong = sorted(set(classes) - set(REPAIRABLE))
    if wrong:
        raise DataStepError(f"--classes: {wrong} cannot be repaired; choose from {', '.join(REPAIRABLE)}")
    scan = scan_sources(sources)
    candidates = [t for t in scan.turns if t.provenance.failure_class in classes]
    chosen, dropped = select(
        candidates, lambda t: f"{t.provenance.definition}/{t.provenance.failure_class}", per_cell, limit
    )
    records = [FailureRecord(**_common(t), error_log=t.feedback) for t in chosen]
    write_jsonl(Path(output) / FAILURES_FILE, records)
    options = {"sources": [str(s) for s in sources], "classes": list(classes), "per_cell": per_cell,
               "limit": limit}  # fmt: skip
    summary = _summary(scan, candidates, records, dropped, options)
    write_json(Path(output) / SELECTION_FILE, summary)
    return summary


def mine_kernels(
    sources: Sequence[Path], output: Path, *, per_cell: int | None = None, limit: int | None = None
) -> dict[str, Any]:
    """Write ``output/kernels.jsonl`` (:class:`KernelRecord`: turns whose kernel passed every workload) and
    ``output/selection.json``; returns the selection summary. ``per_cell`` caps each definition.

    Raises:
        DataStepError: see :func:`~mini_ptx_agent.data.sources.scan_sources`.
    """
    scan = scan_sources(sources)
    candidates = [t for t in scan.turns if t.report.all_passed]
    chosen, dropped = select(candidates, lambda t: t.provenance.definition, per_cell, limit)
    records = [KernelRecord(**_common(t)) for t in chosen]
    write_jsonl(Path(output) / KERNELS_FILE, records)
    options = {"sources": [str(s) for s in sources], "per_cell": per_cell, "limit": limit}
    summary = _summary(scan, candidates, records, dropped, options)
    write_json(Path(output) / SELECTION_FILE, summary)
    return summary
