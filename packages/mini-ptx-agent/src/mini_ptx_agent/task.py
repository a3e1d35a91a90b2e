"""TaskConfig: one fixed evaluation task (definition, workloads, language, target, tolerances).

A task config is the contract between the agent, `ptxbench eval` (the command that Harbor tasks and tool-using
agents call) and FIBServe: which definition, on which workloads, in which language, for which architecture, and
what counts as success. It is plain JSON (``task.json``)::

    {"definition": "gemm_n7168_k5120", "workloads": ["<uuid>"], "language": "cuda", "target_speedup": 1.0}

The public PTXBench task files have another shape; :mod:`mini_ptx_agent.task_file` reads both into this model.
The model imports nothing heavy, so commands can load it cheaply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

if TYPE_CHECKING:
    from fibserve.trace import Solution

TaskLanguage = Literal["cuda", "triton"]
"""Languages the agent writes: one CUDA ``.cu`` file (tvm-ffi binding) or one Triton ``.py`` file."""

Arch = Literal["sm_90a", "sm_100a"]
"""Target architecture: Hopper (``sm_90a``) or Blackwell (``sm_100a``)."""

ENTRY_FILES: dict[str, str] = {"cuda": "kernel.cu", "triton": "kernel.py"}
"""The single source file of a candidate, per language (the entry points ``kernel.cu::run`` and ``kernel.py::run``)."""
KERNEL_SUFFIXES: dict[str, tuple[str, ...]] = {"cuda": (".cu", ".cuh", ".cpp", ".cc"), "triton": (".py",)}
"""File suffixes accepted as a kernel file of each language (by ``ptxbench eval``)."""


class TaskConfigError(ValueError):
    """A task config file is missing, not JSON, or does not validate; the message says what to fix."""


class TaskConfig(BaseModel):
    """One evaluation task: what to evaluate a candidate kernel on, and what counts as success."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    schema_version: Literal[1] = 1
    """Version of this file format."""
    definition: str = Field(min_length=1)
    """Name of the FlashInfer Trace definition, e.g. ``gemm_n7168_k5120``."""
    workloads: list[str] | Literal["all"] = "all"
    """Workload UUIDs to evaluate on, or ``"all"`` for every workload the service knows for the definition."""
    language: TaskLanguage = "cuda"
    """Candidate language: ``cuda`` (``kernel.cu::run``, tvm-ffi) or ``triton`` (``kernel.py::run``)."""
    target_speedup: float = Field(default=1.0, gt=0)
    """Success threshold: the minimum speedup across workloads (x, measured on a GPU) against the definition's
    baseline Solution (against its reference where it names none)."""
    arch: Arch = "sm_90a"
    """Target architecture; decides the nvcc ``-gencode`` and the prompt's architecture knowledge."""
    sanitizer: bool = False
    """Run compute-sanitizer before evaluating; a sanitizer finding rejects the kernel without timing it."""
    sanitizer_types: list[str] = Field(default_factory=lambda: ["memcheck"])
    """compute-sanitizer tools to run when ``sanitizer`` is on (memcheck, racecheck, initcheck, synccheck)."""
    sanitizer_runs: int = Field(default=1, ge=1)
    """How many times the sanitizer gate runs before the evaluation (each run: every tool on every workload;
    the first finding stops the gate). Races and uninitialised reads show only in some runs, so the public
    PTXBench tasks ask for 2 (their ``max_check_runs``)."""
    sanitizer_timeout_s: float | None = Field(default=None, gt=0)
    """Time limit in seconds of one sanitizer task; None: ``timeout_s``."""
    task_id: str | None = None
    """The task's id, copied into every result (the public task files' ``task_id``; a Harbor task's name)."""
    atol: float | None = Field(default=None, ge=0)
    """Absolute tolerance override; null keeps the service's precedence (defaults < op_type < definition)."""
    rtol: float | None = Field(default=None, ge=0)
    """Relative tolerance override; null keeps the service's precedence."""
    timeout_s: float = Field(default=300.0, gt=0)
    """Time limit in seconds for one evaluation request (build, correctness and timing of all workloads)."""

    @property
    def entry_file(self) -> str:
        """The candidate's file name: ``kernel.cu`` or ``kernel.py``."""
        return ENTRY_FILES[self.language]

    @property
    def workload_uuids(self) -> list[str] | None:
        """The explicit workload UUIDs, or ``None`` for all workloads."""
        return None if self.workloads == "all" else list(self.workloads)

    def solution(self, source: str, *, name: str, author: str = "mini-ptx-agent") -> Solution:
        """Wrap one kernel source as a FlashInfer Trace Solution for this task (the ABI of the README's "Writing a kernel").

        CUDA: ``kernel.cu::run``, binding ``tvm-ffi``; Triton: ``kernel.py::run``, no binding. Both use
        destination passing (outputs preallocated by the harness).
        """
        # the data model only once a solution is made: the task (and the prompt registry, which names its
        # languages) stay cheap to import for commands that only print
        from fibserve.trace import BuildSpec, Language, Solution, SourceFile

        language = Language.CUDA if self.language == "cuda" else Language.TRITON
        spec = BuildSpec(
            language=language,
            target_hardware=[self.arch],
            entry_point=f"{self.entry_file}::run",
            destination_passing_style=True,
            binding="tvm-ffi" if self.language == "cuda" else None,
        )
        return Solution(
            name=name,
            definition=self.definition,
            author=author,
            spec=spec,
            sources=[SourceFile(path=self.entry_file, content=source)],
        )


def validation_problems(exc: ValidationError) -> str:
    """A pydantic error as one line: ``field: message; field: message``."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
    )
