"""``ptxbench data pairs``: the wrong -> fixed pairs whose fix passed every workload.

From ``repairs.jsonl`` a pair is kept when the repair's kernel passed every workload of the failure's task (on
a GPU, or for Triton on the CPU interpreter), differs from the failing kernel, has reasoning to learn, and, with
``require_architecture``, has the families its target calls for in its compiled code (``wgmma`` and TMA on
sm_90a, ``tcgen05`` on sm_100a: :mod:`mini_ptx_agent.architecture`; a Triton kernel's SASS is compiled at run
time, so it never shows them statically and is dropped). Pairs whose fix the evaluator flagged are kept with
their flags (read again from the fix's KernelReport); the SFT builder leaves them out by default. Writes ``pairs.jsonl`` and ``pairs.json``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..architecture import has_target_families
from ..environment.report import KernelReport
from ..environment.stop import shown_families
from ..trajectory import write_json
from .calls import Journal, ModelCall
from .flags import Flag, kernel_flags
from .mining import FailureRecord
from .records import read_jsonl, step_file, write_jsonl
from .repair import REPAIRS_FILE, RepairEntry

PAIRS_FILE = "pairs.jsonl"
SUMMARY_FILE = "pairs.json"


class PairRecord(BaseModel):
    """A failing kernel, its error log, and a repair that passed (``pairs.jsonl``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    format: Literal["ptxbench.fixit-pair/1"] = "ptxbench.fixit-pair/1"
    id: str
    """The failure's id."""
    failure: FailureRecord
    call: ModelCall
    """The repair model's reply."""
    reasoning: str
    """What the repair model wrote besides the kernel (its explanation of the fix)."""
    fixed_kernel: str
    fixed_kernel_hash: str
    repair_record: str
    """The repair's journal entry (its reply and its whole KernelReport): ``<repair dir>/journal/<id>.json``."""
    report: KernelReport
    """The fix's evaluation (every workload PASSED)."""
    architecture_families: list[str] | None = None
    """The target families found in the fix's compiled code (None: unknown, e.g. Triton)."""
    flags: list[Flag] = Field(default_factory=list)
    """The evaluator's flags on the fix."""


def _verdict(entry: RepairEntry, require_architecture: bool) -> str:
    """``keep`` or why the repair is dropped."""
    if entry.kernel is None:
        return "no_kernel"
    if entry.report is None:
        return "not_evaluated"
    if not entry.report.all_passed:
        return "not_passed"
    if entry.kernel_hash == entry.failure.provenance.kernel_hash:
        return "unchanged"
    if not entry.call.reasoning(entry.failure.task.language):
        return "no_reasoning"
    families = shown_families(entry.report, executed=False)
    if require_architecture and not (
        families is not None and has_target_families(entry.failure.task.arch, families)
    ):
        return "architecture"
    return "keep"


def make_pairs(repairs_path: Path, output: Path, *, require_architecture: bool = False) -> dict[str, object]:
    """Write ``output/pairs.jsonl`` (:class:`PairRecord`) from ``repairs_path`` (a ``repairs.jsonl`` or its
    directory) and ``output/pairs.json``; returns that summary (kept, flagged, dropped by reason).

    Raises:
        DataStepError: the repairs file is missing or does not validate.
    """
    repairs_file = step_file(repairs_path, REPAIRS_FILE)
    entries = read_jsonl(repairs_file, RepairEntry)
    journal = Journal(repairs_file.parent).directory.resolve()
    verdicts = Counter[str]()
    pairs = []
    for entry in entries:
        verdict = _verdict(entry, require_architecture)
        verdicts[verdict] += 1
        if verdict != "keep" or entry.kernel is None or entry.report is None or entry.kernel_hash is None:
            continue
        language = entry.failure.task.language
        pairs.append(
            PairRecord(
                id=entry.failure.id, failure=entry.failure, call=entry.call, reasoning=entry.call.reasoning(language),
                fixed_kernel=entry.kernel, fixed_kernel_hash=entry.kernel_hash, report=entry.report,
                repair_record=str(journal / f"{entry.failure.id}.json"),
                architecture_families=shown_families(entry.report, executed=False),
                flags=kernel_flags(entry.report),
            )
        )  # fmt: skip
    write_jsonl(Path(output) / PAIRS_FILE, pairs)
    kept = verdicts.pop("keep", 0)
    summary: dict[str, object] = {
        "repairs": len(entries),
        "pairs": kept,
        "flagged": sum(1 for p in pairs if p.flags),
        "dropped": dict(verdicts),
        "require_architecture": require_architecture,
        "by_definition": dict(Counter(p.failure.provenance.definition for p in pairs)),
        "by_class": dict(Counter(p.failure.provenance.failure_class for p in pairs)),
    }
    write_json(Path(output) / SUMMARY_FILE, summary)
    return summary
