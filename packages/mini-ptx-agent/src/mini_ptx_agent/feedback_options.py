"""The feedback options of a run: what the model is shown after each turn, and what ends a run.

One pydantic model, :class:`FeedbackOptions`, recorded in ``plan.json`` (``RunPlan.feedback``), set by
`ptxbench run`'s flags and by an experiment config's ``feedback`` field, so a study can switch each option
on and off and a resumed run keeps what it started with. docs/feedback-options.md shows the feedback text of
each option.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ContextPolicy = Literal["full", "latest-pair", "single-user"]
"""What the model sees each turn: ``full`` (every earlier message), ``latest-pair`` (system, task, the latest
reply and its feedback), ``single-user`` (system and one user message holding the task, the latest kernel and
its feedback)."""

SanitizerTool = Literal["memcheck", "racecheck", "synccheck", "initcheck"]
"""compute-sanitizer tools the sanitizer gate may run before timing."""

BUNDLED_NOTES = "bundled"
"""The ``notes_dir`` value that names the fix notes shipped with mini-ptx-agent (``mini_ptx_agent/fix_notes``)."""


class FeedbackOptions(BaseModel):
    """Per-run feedback options (``plan.json``'s ``feedback``); the defaults are the plain agent loop."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    context_policy: ContextPolicy = "full"
    """Which earlier messages each model call sees (see :data:`ContextPolicy`); the trajectory keeps all."""
    sanitizer_gate: list[SanitizerTool] = Field(default_factory=list)
    """compute-sanitizer tools run on each candidate before it is evaluated and timed (one run per tool and
    workload); any finding rejects the kernel untimed, and the feedback quotes each finding with its source
    line. Empty: no gate."""
    architecture_warning: bool = True
    """Say in the feedback when the kernel lacks the instruction families its target calls for (sm_90a: wgmma
    or TMA; sm_100a: tcgen05), from the service's static analysis of the SASS."""
    require_architecture: bool = False
    """Make those families a stop condition: ``Submitted`` needs correct + target speedup + the families (the
    executed families when ``instruction_evidence`` is on, else the compiled ones)."""
    instruction_evidence: bool = False
    """Profile each correct kernel with Nsight Compute (executed instructions per SASS opcode, on the workload
    with the lowest speedup) and report which families executed; cached per kernel hash in the run directory."""
    profile_in_loop: bool = False
    """Add a short Nsight Compute summary of each correct kernel (SOL %, achieved occupancy, top stall
    reasons) to the feedback."""
    notes_dir: str | None = None
    """A folder of fix notes (``*.md``), or ``bundled`` (:data:`BUNDLED_NOTES`) for the notes shipped with
    mini-ptx-agent; when set, the top BM25 hits for a failure are added to its feedback. None: no notes."""

    @property
    def needs_profile(self) -> bool:
        """Whether a correct kernel is profiled with Nsight Compute (evidence or the in-loop summary)."""
        return self.instruction_evidence or self.profile_in_loop
