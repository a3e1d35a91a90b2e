"""Task files: where `ptxbench eval` finds one, and the two shapes it reads into a :class:`~mini_ptx_agent.task.TaskConfig`.

**Our shape** is the :class:`~mini_ptx_agent.task.TaskConfig` JSON itself (``definition``, ``workloads``,
``language``, ``arch``, ``target_speedup``, ``sanitizer``...).

**The public PTXBench shape** is what the public PTXBench Harbor tasks ship in ``/tests/task.json``
(:class:`PublicTaskFile`)::

    {"task_id": "gemm-n7168-k5120", "definition": "gemm_n7168_k5120",
     "workload_uuids": ["94920358-..."], "target_hardware": ["H100"],
     "nvcc_gencode": "arch=compute_90a,code=sm_90a", "tvm_ffi_dir": "/opt/tvm_ffi",
     "max_check_runs": 2, "target_speedup": 1.0}

A file that has any field only the public shape has is read as the public shape, any other as ours. Either
shape refuses a field it does not know, naming it (and saying when it belongs to the other shape), so a typo
never silently falls back to a default.

Where the file comes from (:func:`resolve_task_config`): ``--task-config``, else ``$PTXBENCH_TASK_CONFIG``,
else ``/opt/ptxbench/task.json`` (the read-only task file of the ``ptxbench-eval`` image and of exported Harbor
tasks), the order the public ``ptxbench eval`` uses.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .task import TaskConfig, TaskConfigError, validation_problems

TASK_CONFIG_ENV = "PTXBENCH_TASK_CONFIG"
"""Environment variable naming the task file when ``--task-config`` is not given."""

DEFAULT_TASK_CONFIG = Path("/opt/ptxbench/task.json")
"""The task file of a task container, read when neither ``--task-config`` nor :data:`TASK_CONFIG_ENV` is given."""

GENCODE_ARCH: dict[str, Literal["sm_90a", "sm_100a"]] = {
    "arch=compute_90a,code=sm_90a": "sm_90a",
    "arch=compute_100a,code=sm_100a": "sm_100a",
}
"""The public shape's ``nvcc_gencode`` values and the architecture each builds for."""

GENCODE_HARDWARE: dict[str, list[str]] = {
    "arch=compute_90a,code=sm_90a": ["H100"],
    "arch=compute_100a,code=sm_100a": ["Blackwell"],
}
"""The ``target_hardware`` the public shape requires with each ``nvcc_gencode`` (the public verifier's table)."""


class PublicTaskFile(BaseModel):
    """A task file of the public PTXBench tasks, and what each field means here (:meth:`to_task_config`)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    task_id: str = Field(min_length=1)
    """The task's id; copied into the result's ``task_id``."""
    definition: str = Field(min_length=1)
    """The FlashInfer Trace definition."""
    workload_uuids: list[str] = Field(min_length=1)
    """The workloads to evaluate on (at least one)."""
    target_hardware: list[str]
    """``["H100"]`` with the sm_90a gencode, ``["Blackwell"]`` with sm_100a; checked against ``nvcc_gencode``."""
    nvcc_gencode: Literal["arch=compute_90a,code=sm_90a", "arch=compute_100a,code=sm_100a"]
    """The nvcc target; decides the task's ``arch``. CUDA only: this shape has no Triton tasks."""
    tvm_ffi_dir: str = Field(min_length=1)
    """Where the public evaluator finds tvm-ffi's headers and library. Recorded only: FIBServe builds every
    candidate with the tvm-ffi of its own environment, the one its sandbox mounts."""
    max_check_runs: int = Field(default=2, ge=0)
    """compute-sanitizer memcheck runs before the evaluation (``sanitizer_runs``); 0 turns the gate off."""
    queue_timeout_sec: int = Field(default=240, gt=0)
    """Time limit of the evaluation in seconds (``timeout_s``)."""
    sanitizer_timeout_sec: int = Field(default=120, gt=0)
    """Time limit of one sanitizer task in seconds (``sanitizer_timeout_s``)."""
    target_speedup: float = Field(default=1.0, gt=0)
    """The minimum speedup every workload must reach."""

    @model_validator(mode="after")
    def _hardware_fits_gencode(self) -> PublicTaskFile:
        expected = GENCODE_HARDWARE[self.nvcc_gencode]
        if list(self.target_hardware) != expected:
            raise ValueError(
                f"target_hardware {self.target_hardware} does not fit nvcc_gencode {self.nvcc_gencode!r}: "
                f"use {expected}"
            )
        return self

    def to_task_config(self) -> TaskConfig:
        """The same task as a :class:`TaskConfig`: CUDA, the gencode's arch, a memcheck gate of
        ``max_check_runs`` runs (off at 0), the two time limits, the workloads and target as given."""
        return TaskConfig(
            task_id=self.task_id,
            definition=self.definition,
            workloads=list(self.workload_uuids),
            language="cuda",
            arch=GENCODE_ARCH[self.nvcc_gencode],
            target_speedup=self.target_speedup,
            sanitizer=self.max_check_runs > 0,
            sanitizer_types=["memcheck"],
            sanitizer_runs=max(self.max_check_runs, 1),
            sanitizer_timeout_s=float(self.sanitizer_timeout_sec),
            timeout_s=float(self.queue_timeout_sec),
        )


_SHAPES: dict[str, type[BaseModel]] = {"PTXBench public": PublicTaskFile, "PTXBench agent": TaskConfig}
_PUBLIC_ONLY = set(PublicTaskFile.model_fields) - set(TaskConfig.model_fields)


def shape_of(data: dict[str, Any]) -> str:
    """``"PTXBench public"`` when ``data`` has a field only the public shape has, else ``"PTXBench agent"``."""
    return "PTXBench public" if _PUBLIC_ONLY & set(data) else "PTXBench agent"


def _unknown_fields(data: dict[str, Any], shape: str) -> str | None:
    """Why ``data`` has fields ``shape`` does not know (None when it has none)."""
    fields = set(_SHAPES[shape].model_fields)
    unknown = sorted(set(data) - fields)
    if not unknown:
        return None
    other = next(name for name in _SHAPES if name != shape)
    borrowed = [name for name in unknown if name in _SHAPES[other].model_fields]
    text = (
        f"unknown field(s) {', '.join(unknown)} for the {shape} shape (it takes {', '.join(sorted(fields))})"
    )
    if borrowed:
        text += f"; {', '.join(borrowed)} belong(s) to the {other} shape: do not mix the two shapes"
    return text


def task_config_from(data: Any) -> TaskConfig:
    """Read a parsed task file of either shape.

    Raises:
        TaskConfigError: not a JSON object, an unknown field (named), or a field that does not validate.
    """
    if not isinstance(data, dict):
        raise TaskConfigError(f"a task config is a JSON object, not {type(data).__name__}")
    shape = shape_of(data)
    if (unknown := _unknown_fields(data, shape)) is not None:
        raise TaskConfigError(unknown)
    try:
        if shape == "PTXBench public":
            return PublicTaskFile.model_validate(data).to_task_config()
        return TaskConfig.model_validate(data)
    except ValidationError as exc:
        raise TaskConfigError(f"{shape} shape: {validation_problems(exc)}") from None


def load_task_config(path: Path) -> TaskConfig:
    """Read and validate a task file of either shape.

    Raises:
        TaskConfigError: the file is missing, not JSON, or invalid (the message names the field to fix).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskConfigError(f"cannot read task config {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskConfigError(f"task config {path} is not JSON: {exc.msg} at line {exc.lineno}") from None
    try:
        return task_config_from(data)
    except TaskConfigError as exc:
        raise TaskConfigError(f"task config {path} is invalid: {exc}") from None


def resolve_task_config(path: Path | None = None) -> Path:
    """The task file to read: ``path``, else ``$PTXBENCH_TASK_CONFIG``, else ``/opt/ptxbench/task.json``.

    Raises:
        TaskConfigError: none given and no file at the default place (the message lists all three).
    """
    if path is not None:
        return Path(path)
    named = os.environ.get(TASK_CONFIG_ENV)
    if named:
        return Path(named)
    if DEFAULT_TASK_CONFIG.is_file():
        return DEFAULT_TASK_CONFIG
    raise TaskConfigError(
        f"no task config: pass --task-config FILE, set ${TASK_CONFIG_ENV}, or provide {DEFAULT_TASK_CONFIG}"
    )
