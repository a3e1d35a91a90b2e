"""The stop decision: whether a turn's report ends the run ``Submitted`` (the target speedup met and, when the
feedback options require it, the instruction families the target architecture calls for).
"""

from __future__ import annotations

from ..architecture import has_target_families
from ..feedback_options import FeedbackOptions
from .report import KernelReport


def shown_families(report: KernelReport, *, executed: bool) -> list[str] | None:
    """The kernel's target families: the executed ones (``executed``: from its Nsight Compute run) or the
    compiled ones (the static analysis); None when unknown (no analysis verdict, no successful profile)."""
    if executed:
        ncu = report.ncu
        return None if ncu is None or ncu.error else list(ncu.executed_families)
    analysis = report.static_analysis
    return None if analysis is None else analysis.architecture_families


def architecture_met(report: KernelReport, options: FeedbackOptions, target: str) -> bool:
    """Whether the kernel has the families ``target`` calls for, as ``options`` judge it (executed families with
    ``instruction_evidence``, else compiled ones). Unknown counts as not met: a Triton kernel has no static
    verdict (its SASS is compiled at run time), so only its executed instructions can show the families."""
    families = shown_families(report, executed=options.instruction_evidence)
    return families is not None and has_target_families(target, families)


def submits(report: KernelReport, options: FeedbackOptions, target: str) -> bool:
    """Whether the run ends ``Submitted``: the target speedup is met, and with ``require_architecture`` the
    families ``target`` (the task's architecture) calls for too."""
    return report.target_met and (
        not options.require_architecture or architecture_met(report, options, target)
    )
