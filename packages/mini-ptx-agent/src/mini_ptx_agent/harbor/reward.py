"""The reward of a Harbor task: from one kernel's :class:`~mini_ptx_agent.environment.report.KernelReport` to ``reward.json``.

Harbor reads ``/logs/verifier/reward.json``, a flat object of numbers, and aggregates each key over trials;
``reward`` is the one its metrics and leaderboards use. The verifier always writes every component, so a
binary task still shows speed and architecture:

- ``correctness``: 1 when every workload PASSED (on a GPU, or for Triton on the CPU interpreter), else 0.
  A CUDA kernel that was built but not run (no GPU) is 0: its correctness is unknown.
- ``speedup``: the minimum speedup over the workloads (x), against the definition's baseline Solution where it
  has one (``speedup_basis`` in ``verifier.json`` says which); 0 unless correct and timed on a GPU, and 0 when
  the service flagged a time as faster than the device roofline.
- ``speedup_score``: ``min(speedup / target_speedup, 1)``.
- ``architecture``: 1 when the kernel shows the instruction families its target calls for (sm_90a: wgmma or
  TMA; sm_100a: tcgen05): the executed ones when the task asks for Nsight Compute evidence, else the compiled
  ones (the static analysis of its SASS). Triton kernels have no compiled verdict, so only evidence shows them.
- ``target_met``: 1 when correct, timed on a GPU and at least ``target_speedup`` (the agent's ``Submitted``).

``reward`` is ``correctness`` for a binary task; for a graded one it is 0 unless correct, else
``w_c + w_s * speedup_score + w_a * architecture`` over the sum of the weights (defaults 0.5, 0.3, 0.2), so a
correct kernel earns at least half, and the rest is speed and the architecture the benchmark is about.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..environment.report import KernelReport
from ..environment.stop import architecture_met
from ..feedback_options import FeedbackOptions
from ..task import TaskConfig

RewardMode = Literal["binary", "graded"]
"""``binary``: reward = correctness (1/0). ``graded``: correctness, speed and architecture combined."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class RewardWeights(_Model):
    """Weights of the graded reward's three parts (normalised by their sum)."""

    correctness: float = Field(default=0.5, ge=0)
    """Weight of being correct (every workload PASSED)."""
    speedup: float = Field(default=0.3, ge=0)
    """Weight of ``speedup_score``."""
    architecture: float = Field(default=0.2, ge=0)
    """Weight of showing the target's instruction families."""

    @model_validator(mode="after")
    def _positive_sum(self) -> RewardWeights:
        if self.correctness + self.speedup + self.architecture <= 0:
            raise ValueError("at least one reward weight must be positive")
        return self


class Rewards(_Model):
    """The numbers written to ``reward.json`` (all finite; units in the module docstring)."""

    reward: float
    correctness: float
    speedup: float
    speedup_score: float
    architecture: float
    target_met: float


def rewards_for(
    report: KernelReport,
    task: TaskConfig,
    *,
    mode: RewardMode = "binary",
    instruction_evidence: bool = False,
    weights: RewardWeights | None = None,
) -> Rewards:
    """The rewards of one evaluated kernel (see the module docstring for each number)."""
    weights = weights or RewardWeights()
    correct = 1.0 if report.all_passed else 0.0
    timed = report.all_passed and report.executed_on_gpu and not report.implausible
    speedup = float(report.min_speedup) if timed and report.min_speedup is not None else 0.0
    score = min(speedup / task.target_speedup, 1.0)
    options = FeedbackOptions(instruction_evidence=instruction_evidence)
    architecture = 1.0 if architecture_met(report, options, task.arch) else 0.0
    if mode == "binary":
        reward = correct
    else:
        total = weights.correctness + weights.speedup + weights.architecture
        earned = weights.correctness + weights.speedup * score + weights.architecture * architecture
        reward = correct * earned / total
    return Rewards(
        reward=round(reward, 6),
        correctness=correct,
        speedup=round(speedup, 6),
        speedup_score=round(score, 6),
        architecture=architecture,
        target_met=1.0 if report.target_met else 0.0,
    )


def no_kernel_rewards() -> Rewards:
    """All zeros: the agent left no kernel file to evaluate."""
    return Rewards(
        reward=0.0, correctness=0.0, speedup=0.0, speedup_score=0.0, architecture=0.0, target_met=0.0
    )
