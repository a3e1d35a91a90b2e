"""What one quickstart invocation works with: its options and environment resolved once, and its task.

The quickstart's task is fixed: the Hopper GEMM ``gemm_n7168_k5120``, its M = 8192 workload, target 1.0x, three
turns. :class:`QuickstartSettings` resolves the options and the environment (``MODEL_NAME``, ``ACCRL_MODEL_HOST``,
``SERVICE_URL``, ``PTXBENCH_DATA_ROOT``, ``PTXBENCH_ROOT``, ``DATASET_ROOTS``, ``PTXBENCH_TRACESETS_ROOT``) once;
``--check`` (:mod:`~mini_ptx_agent.quickstart.check`) and ``--run`` (:mod:`~mini_ptx_agent.quickstart.run`) both
read it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..demo import DEMO_DEFINITION
from ..runs.directory import default_output_root
from ..task import TaskConfig

QUICKSTART_DEFINITION = DEMO_DEFINITION
QUICKSTART_WORKLOAD = "94920358-01a8-4c5b-9209-3103fd490e94"
"""The M = 8192 workload of ``gemm_n7168_k5120`` (from the PTXBench GEMM problem list)."""
QUICKSTART_TARGET = 1.0
"""Target speedup over the definition's reference (torch.matmul, cuBLAS on a GPU), x."""
QUICKSTART_TURNS = 3


class QuickstartError(RuntimeError):
    """The quickstart cannot start (bad option, model misconfigured); the message says what to fix."""


class QuickstartRefused(QuickstartError):
    """The run is refused before anything is started (no service, no run directory); the message says why."""


TRITON_NEEDS_GPU = (
    "the Triton quickstart needs a GPU: gemm_n7168_k5120 is bfloat16 and the Triton CPU interpreter computes "
    "bfloat16 tl.dot wrongly, so FIBServe refuses to evaluate it in CPU mode"
)
TRITON_ALTERNATIVES = (
    "Run --language cuda (compiled and analysed on CPU), or set SERVICE_URL to a FIBServe with a GPU."
)


class QuickstartSettings(BaseModel):
    """Options and environment of one quickstart invocation, resolved once."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    language: Literal["cuda", "triton"] = "cuda"
    model: str | None = None
    """``--model`` else ``MODEL_NAME``; None = the bundled demo replay."""
    model_host: str | None = None
    """``--model-host`` else ``ACCRL_MODEL_HOST`` (an OpenAI-compatible endpoint, ``host:port``)."""
    service_url: str | None = None
    """``--service-url`` else ``SERVICE_URL``; None = an embedded FIBServe."""
    output_root: Path
    """Parent of the run directory."""
    dataset_roots: list[Path] = Field(default_factory=list)
    """Trace-set roots for an embedded FIBServe (empty: fibserve's bundled set)."""
    require_gpu: bool = False
    """Count a machine without GPU lanes as a FAIL in ``--check`` (for GPU validation)."""

    @classmethod
    def resolve(
        cls,
        *,
        language: str = "cuda",
        model: str | None = None,
        model_host: str | None = None,
        service_url: str | None = None,
        output_root: Path | None = None,
        require_gpu: bool = False,
        environ: dict[str, str] | None = None,
    ) -> QuickstartSettings:
        """Options first, then the environment (``environ``, default ``os.environ``).

        Raises:
            QuickstartError: an unknown language.
        """
        env = os.environ if environ is None else environ
        if language not in ("cuda", "triton"):
            raise QuickstartError(f"--language must be cuda or triton, not {language!r}")
        return cls(
            language=language,  # type: ignore[arg-type]
            model=model or env.get("MODEL_NAME") or None,
            model_host=model_host or env.get("ACCRL_MODEL_HOST") or None,
            service_url=(service_url or env.get("SERVICE_URL") or "").rstrip("/") or None,
            output_root=output_root or default_output_root(env),
            dataset_roots=dataset_roots(env),
            require_gpu=require_gpu,
        )


def dataset_roots(env: dict[str, str] | os._Environ) -> list[Path]:
    """``DATASET_ROOTS`` entries; relative ones are taken under ``PTXBENCH_TRACESETS_ROOT`` when it is set."""
    base = Path(env["PTXBENCH_TRACESETS_ROOT"]) if env.get("PTXBENCH_TRACESETS_ROOT") else None
    roots = []
    for entry in (env.get("DATASET_ROOTS") or "").split(":"):
        if entry.strip():
            path = Path(entry.strip())
            roots.append(base / path if base is not None and not path.is_absolute() else path)
    return roots


def quickstart_task(language: str) -> TaskConfig:
    """The quickstart task: the GEMM, its M = 8192 workload, target 1.0x, Hopper (sm_90a)."""
    return TaskConfig(
        definition=QUICKSTART_DEFINITION,
        workloads=[QUICKSTART_WORKLOAD],
        language=language,  # type: ignore[arg-type]
        target_speedup=QUICKSTART_TARGET,
        arch="sm_90a",
    )
