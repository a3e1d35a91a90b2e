"""Trace sets shipped with fibserve.

``default_root()`` is the bundled default trace set (package data, written by the PTXBench authors): the
PTXBench GEMM problems (``gemm_n7168_k5120`` and the other shapes of the PTXBench GEMM problem list, with the
public workload uuids), ``mha_with_lse_d128`` (+ ``_causal``), and small float32 definitions that the Triton
CPU interpreter can evaluate in CI. ``generate_default`` rewrites it from the PTXBench problem CSVs.
"""

from __future__ import annotations

from pathlib import Path

_DEFAULT = Path(__file__).resolve().parent / "default"


def default_root() -> Path:
    """Path of the bundled default trace set (a folder with ``definitions/`` and ``workloads/``).

    Raises:
        FileNotFoundError: the package data is missing (a broken install).
    """
    if not (_DEFAULT / "definitions").is_dir():
        raise FileNotFoundError(f"bundled default trace set missing at {_DEFAULT}; reinstall fibserve")
    return _DEFAULT
