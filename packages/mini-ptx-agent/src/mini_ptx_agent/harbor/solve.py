"""The kernel agent inside a Harbor task container (``ptxbench harbor solve``, what the Harbor adapter runs).

The task comes from the container's task file (``/opt/ptxbench/task.json``, the one `ptxbench eval` reads), so the
agent gets exactly the system prompt and task message `ptxbench run` would give it, not a paraphrase. It runs
`ptxbench run`'s loop into a run directory under the agent's log folder, then:

- writes the kernel to submit where the verifier looks (``/workspace/kernel.cu`` or ``kernel.py``): the fastest
  correct version when there is one, else the last kernel the model wrote (a CUDA kernel on a service without a
  GPU is never "correct", so its last version is what the verifier gets);
- converts the trajectory to ATIF (``trajectory.json``, :mod:`mini_ptx_agent.harbor.atif`), which Harbor shows and
  exports.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..runs.directory import RunLayout
from ..runs.options import RunOptions
from ..runs.summary import RunSummary
from ..task import TaskConfig
from .atif import write_atif


class SolveResult(BaseModel):
    """What ``ptxbench harbor solve`` did."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    run_dir: str
    """The agent's run directory (plan.json, summary.json, the trajectory, every kernel)."""
    summary: RunSummary
    kernel: str | None
    """Where the submitted kernel was written; None when the model wrote none."""
    submitted_turn: int | None
    """The turn whose kernel was submitted."""
    atif: str | None
    """The ATIF trajectory written; None when the run left no trajectory (it failed before the first call)."""


def submitted_kernel(run_dir: Path, summary: RunSummary, suffix: str) -> tuple[Path, int | None] | None:
    """The kernel file to submit and its turn: the fastest correct version, else the latest kernel (turn
    unknown), else None."""
    layout = RunLayout(run_dir)
    best = (summary.best or {}).get("turn")
    if isinstance(best, int):
        version = layout.version_path(best, suffix)
        if version.is_file():
            return version, best
    latest = layout.kernel_path(suffix)
    return (latest, None) if latest.is_file() else None


def solve(
    task: TaskConfig,
    *,
    kernel_path: Path,
    output_root: Path,
    atif_path: Path | None,
    model: str | None = None,
    num_turns: int | None = None,
    prompt_tag: str | None = None,
    service_url: str | None = None,
    console: object = None,
) -> SolveResult:
    """Run the kernel agent on ``task`` into a new run directory under ``output_root``, then write the submitted
    kernel to ``kernel_path`` and the ATIF trajectory to ``atif_path`` (see the module docstring).

    Raises:
        RunOptionError: the task, model or prompt tag cannot be used (nothing was created).
        OSError: the kernel or the ATIF file cannot be written.
    """
    from ..runs.launch import run_agent

    options = RunOptions(
        definition=task.definition, language=task.language, arch=task.arch, workloads=task.workloads,
        target_speedup=task.target_speedup, model=model, num_turns=num_turns, prompt_tag=prompt_tag,
        sanitizer=task.sanitizer or None,
    )  # fmt: skip
    run_dir, summary = run_agent(options, output_root=output_root, service_url=service_url, console=console)
    chosen = submitted_kernel(run_dir, summary, Path(task.entry_file).suffix)
    written = None
    if chosen is not None:
        Path(kernel_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(chosen[0], kernel_path)
        written = str(kernel_path)
    trajectory = RunLayout(run_dir).trajectory_path
    atif = None
    if atif_path is not None and trajectory.is_file():
        write_atif(trajectory, atif_path, session_id=summary.run_id)
        atif = str(atif_path)
    return SolveResult(
        run_dir=str(run_dir), summary=summary, kernel=written,
        submitted_turn=chosen[1] if chosen else None, atif=atif,
    )  # fmt: skip
