"""The evaluator's flags that a training row must not learn from, read from typed models only.

A kernel the evaluator had doubts about may be a hack that happened to pass; training data must not teach it.
:func:`kernel_flags` reads one :class:`~mini_ptx_agent.environment.report.KernelReport` through the models FIBServe
writes its facts with (:class:`fibserve.trace.TimingFacts` for ``performance.extra``,
:class:`fibserve.trace.CorrectnessFacts` for ``correctness.extra``, the report's own typed fields), never by
searching log text or indexing a dict by string:

============== ==============================================================================================
kind           when
============== ==============================================================================================
implausible    a time faster than the device's roofline allows (``CorrectnessFacts.plausibility``, and
               ``KernelReport.implausible``)
neighbour_bias the comparator ran slower right after the candidate's calls (``TimingFacts.neighbour_bias``)
integrity      an integrity note of the timing: work outlived the end event (``device-synchronized`` basis),
               the cold-L2 overwrite ran long next to the candidate, the candidate set aside persisting L2,
               or a comparator ran its overwrite without the gate kernel
degenerate     an output no comparison can judge (``CorrectnessFacts.degenerate`` kind ``constant``)
limit_hit      the candidate ran into a sandbox resource limit (``KernelReport.limits_hit``)
policy         source-policy findings on a kernel that was still run (a policy not enforced, or caught late)
============== ==============================================================================================

A flagged record is kept with its flags (so people can look at it) and left out of SFT rows by default. Demo
replays are not flagged but skipped whole when mining (:mod:`mini_ptx_agent.data.sources`): no record of one
exists.
"""

from __future__ import annotations

from typing import Literal

from fibserve.trace import CorrectnessFacts, EvaluationStatus, TimingFacts
from pydantic import BaseModel, ConfigDict

from ..environment.report import KernelReport

FlagKind = Literal["implausible", "neighbour_bias", "integrity", "degenerate", "limit_hit", "policy"]


class Flag(BaseModel):
    """One reason to distrust a kernel's result."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    kind: FlagKind
    workload: str | None = None
    """The workload uuid it concerns (None: the whole kernel)."""
    detail: str
    """What the evaluator found, for people."""


def kernel_flags(report: KernelReport) -> list[Flag]:
    """Every flag of one evaluated kernel, in workload order (see the module docstring)."""
    implausible = set(report.implausible)
    flags = []
    for trace in report.traces:
        evaluation = trace.evaluation
        if evaluation is None:
            continue
        uuid = trace.workload.uuid
        correctness = CorrectnessFacts.of(evaluation.correctness)
        if correctness.plausibility is not None and correctness.plausibility.flagged:
            implausible.add(uuid)
        flags += _timing_flags(uuid, TimingFacts.of(evaluation.performance))
        constant = correctness.constant_outputs
        if constant and evaluation.status == EvaluationStatus.PASSED:
            flags.append(
                Flag(
                    kind="degenerate", workload=uuid,
                    detail=f"outputs {constant} are constant: no comparison tells a kernel writing them from a correct one",
                )
            )  # fmt: skip
    flags += [
        Flag(kind="implausible", workload=w, detail="faster than the device's roofline allows")
        for w in sorted(implausible)
    ]
    flags += [Flag(kind="limit_hit", workload=w, detail=text) for w, text in report.limits_hit.items()]
    analysis = report.static_analysis
    if analysis is not None and analysis.policy_violations and report.status == EvaluationStatus.PASSED:
        flags.append(Flag(kind="policy", detail="; ".join(analysis.policy_violations)))
    return flags


def _timing_flags(workload: str, facts: TimingFacts) -> list[Flag]:
    flags = []
    bias = facts.neighbour_bias
    if bias is not None and bias.flagged:
        flags.append(
            Flag(
                kind="neighbour_bias", workload=workload,
                detail=f"the comparator ran {bias.ratio:.3f}x as long after the candidate's calls as after its own",
            )
        )  # fmt: skip
    notes = []
    if facts.timing_basis == "device-synchronized":
        notes.append(f"its work outlived the end event by {facts.hidden_work_ms or 0:.3f} ms")
    if facts.l2_overwrite is not None and facts.l2_overwrite.flagged:
        notes.append(f"the cold-L2 overwrite ran {facts.l2_overwrite.excess_ms:.4f} ms longer next to it")
    if facts.persisting_l2 is not None and facts.persisting_l2.candidate_max_bytes:
        notes.append(f"it set aside {facts.persisting_l2.candidate_max_bytes} bytes of persisting L2")
    if facts.comparator_overwrite_ungated:
        notes.append("a comparator's cold-L2 overwrite ran without its gate kernel")
    if notes:
        flags.append(Flag(kind="integrity", workload=workload, detail="; ".join(notes)))
    return flags
