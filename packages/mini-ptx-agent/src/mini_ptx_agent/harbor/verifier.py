"""The verifier of a PTXBench Harbor task (``ptxbench harbor verify``, what ``tests/test.sh`` runs).

It evaluates the agent's kernel file exactly as `ptxbench eval` does (the task file, the sanitizer gate, FIBServe
from ``$SERVICE_URL`` or embedded in the verifier's container) and writes into the verifier's log folder:

- ``evaluation.json``: the :class:`~mini_ptx_agent.environment.report.KernelReport` (schema ``ptxbench.eval.v1``);
- ``reward.json``: the :class:`~mini_ptx_agent.harbor.reward.Rewards` Harbor reads;
- ``verifier.json``: :class:`VerifierResult`, what was decided and why, for people;
- ``fibserve.log``: the embedded service's log, when one was started.

A kernel file that is missing is the agent's failure: every reward 0. A service that fails is not: no
``reward.json`` is written, so Harbor records a verifier error (to retry) instead of a zero against the model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ..environment.report import KernelReport, NotEvaluated
from ..task import TaskConfig
from .reward import RewardMode, Rewards, RewardWeights, no_kernel_rewards, rewards_for

VERIFIER_SCHEMA = "ptxbench.harbor-verifier/1"


class VerifierResult(BaseModel):
    """What the verifier decided (``verifier.json``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    schema_version: Literal["ptxbench.harbor-verifier/1"] = VERIFIER_SCHEMA
    task_id: str | None
    definition: str
    kernel: str
    """The kernel file the agent was to write."""
    reward_mode: RewardMode
    status: str
    """The kernel's status (``PASSED``, ``INCORRECT_NUMERICAL``, ...), ``NO_KERNEL`` when the file is missing,
    ``INFRASTRUCTURE_ERROR`` when the service failed."""
    rewards: Rewards | None
    """What ``reward.json`` holds; None when the service failed (no ``reward.json`` then)."""
    speedup_basis: str | None = None
    """What ``speedup`` is against: ``baseline`` (the definition's baseline Solution) or ``reference``."""
    error: str | None = None
    """Why there is no verdict (a missing kernel, a failed service)."""


def _write(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n", encoding="utf-8")


def verify(
    kernel: Path,
    task: TaskConfig,
    logs_dir: Path,
    *,
    mode: RewardMode = "binary",
    instruction_evidence: bool = False,
    weights: RewardWeights | None = None,
    service_url: str | None = None,
) -> VerifierResult:
    """Evaluate ``kernel`` for ``task`` and write the verifier's files into ``logs_dir`` (see the module).

    Raises:
        OSError: ``logs_dir`` cannot be written.
        TaskConfigError: the kernel's suffix does not fit the task's language.
    """
    from ..environment.fibserve import evaluate_kernel

    logs_dir.mkdir(parents=True, exist_ok=True)
    (logs_dir / "reward.json").unlink(missing_ok=True)  # a stale one must not outlive a failed service
    common = {
        "task_id": task.task_id,
        "definition": task.definition,
        "kernel": str(kernel),
        "reward_mode": mode,
    }
    if not Path(kernel).is_file():
        result = VerifierResult(
            **common, status="NO_KERNEL", rewards=no_kernel_rewards(),
            error=f"no kernel file at {kernel}: the agent did not write one",
        )  # fmt: skip
    else:
        report: KernelReport = evaluate_kernel(
            Path(kernel),
            task,
            service_url=service_url,
            log_path=logs_dir / "fibserve.log",
            instruction_evidence=instruction_evidence,
        )
        _write(logs_dir / "evaluation.json", report.model_dump(mode="json"))
        if report.status is NotEvaluated.INFRASTRUCTURE_ERROR:
            result = VerifierResult(**common, status=report.status.value, rewards=None, error=report.error)
        else:
            rewards = rewards_for(
                report, task, mode=mode, instruction_evidence=instruction_evidence, weights=weights
            )
            bases = {w.speedup_basis for w in report.workloads if w.speedup_basis is not None}
            basis = "reference" if "reference" in bases else ("baseline" if bases else None)
            result = VerifierResult(
                **common, status=report.status.value, rewards=rewards, speedup_basis=basis
            )
    if result.rewards is not None:
        _write(logs_dir / "reward.json", result.rewards.model_dump(mode="json"))
    _write(logs_dir / "verifier.json", result.model_dump(mode="json"))
    return result
