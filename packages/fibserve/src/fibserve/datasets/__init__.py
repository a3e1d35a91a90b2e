"""Trace sets shipped with fibserve.

``default_root()`` is the bundled default trace set (package data, written by the PTXBench authors): the
PTXBench GEMM problems (``gemm_n7168_k5120`` and the other shapes of the PTXBench GEMM problem list, with the
public workload uuids), ``mha_with_lse_d128`` (+ ``_causal``), and small float32 definitions that the Triton
CPU interpreter can evaluate in CI. ``generate_default`` rewrites it from the PTXBench problem CSVs.

Where trace sets come from when none are named: ``$DATASET_ROOTS`` (:func:`default_roots`,
:func:`load_trace_set`), else the bundled set; the trace layer below knows no default and reads no environment.
:mod:`fibserve.datasets.catalog` looks names up in the loaded sets for the server, the CLI and the agent.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fibserve.trace.trace_set import TraceSet

DATASET_ROOTS_ENV = "DATASET_ROOTS"
"""Environment variable holding a colon-separated list of trace-set roots."""

_DEFAULT = Path(__file__).resolve().parent / "default"


def default_root() -> Path:
    """Path of the bundled default trace set (a folder with ``definitions/`` and ``workloads/``).

    Raises:
        FileNotFoundError: the package data is missing (a broken install).
    """
    if not (_DEFAULT / "definitions").is_dir():
        raise FileNotFoundError(f"bundled default trace set missing at {_DEFAULT}; reinstall fibserve")
    return _DEFAULT


def default_roots() -> list[str]:
    """The roots ``fibserve`` uses when none are given: ``$DATASET_ROOTS``, else the bundled default set."""
    value = os.environ.get(DATASET_ROOTS_ENV, "").strip()
    if value:
        return [value]
    return [str(default_root())]


def load_trace_set(*, migrate_legacy: bool = False, strict: bool = True) -> TraceSet:
    """Load the roots in ``$DATASET_ROOTS``, or the bundled default trace set when it is unset or empty.

    Raises:
        fibserve.trace.problems.TraceSetError: a root has errors (``strict``; the message lists each file).
    """
    from fibserve.trace.trace_set import TraceSet

    return TraceSet.load(default_roots()[0], migrate_legacy=migrate_legacy, strict=strict)
