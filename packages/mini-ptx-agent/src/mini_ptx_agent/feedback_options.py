"""The feedback options of a run: what the model is shown after each turn, and what ends a run.

One pydantic model, :class:`FeedbackOptions`, recorded in ``plan.json`` (``RunPlan.feedback``), set by
`ptxbench run`'s flags and by an experiment config's ``feedback`` field, so a study can switch each option
on and off and a resumed run keeps what it started with.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ContextPolicy = Literal["full", "latest-pair", "single-user"]
"""What the model sees each turn: ``full`` (every earlier message), ``latest-pair`` (system, task, the latest
reply and its feedback), ``single-user`` (system and one user message holding the task, the latest kernel and
its feedback)."""

SanitizerTool = Literal["memcheck", "racecheck", "synccheck"]
"""compute-sanitizer tools the sanitizer gate may run before timing."""


class FeedbackOptions(BaseModel):
    """Per-run feedback options (``plan.json``'s ``feedback``); the defaults are the plain agent loop."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    context_policy: ContextPolicy = "full"
    """Which earlier messages each model call sees (see :data:`ContextPolicy`)."""
    sanitizer_gate: list[SanitizerTool] = Field(default_factory=list)
    """compute-sanitizer tools run on a correct candidate before it is timed; empty: no gate."""
    architecture_warning: bool = True
    """Say in the feedback when the kernel lacks the instruction families its target calls for."""
    require_architecture: bool = False
    """Make those families a stop condition: ``Submitted`` needs correct + target speedup + the families."""
    instruction_evidence: bool = False
    """Profile the best correct kernel of a turn with Nsight Compute and report which families executed."""
    profile_in_loop: bool = False
    """Add a short Nsight Compute summary of the candidate (SOL %, occupancy, top stalls) to the feedback."""
    notes_dir: str | None = None
    """A folder of fix notes; when set, the top BM25 hits for a failure are added to its feedback."""
