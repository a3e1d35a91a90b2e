"""Candidate builds: source policy, nvcc builds with the tvm-ffi binding, Triton/Python packages, build cache.

Public API::

    build_solution(solution, *, arch=None, cache_dir=None, timeout_s=300) -> BuildResult
    check_policy(solution, config=None) -> list[PolicyViolation]
    load_python_entry(result) / load_tvm_ffi_entry(result)   # in the sandbox worker only

Attributes are imported lazily: the data models (:mod:`.result`, :mod:`.policy_config`) are part of the wire
contract (:mod:`fibserve.api`), whose importers need none of the builders.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "build_solution": "builder",
    "check_policy": "policy",
    "PolicyConfig": "policy_config",
    "PolicyViolation": "policy_config",
    "load_python_entry": "python_build",
    "load_tvm_ffi_entry": "python_build",
    "BuildResult": "result",
    "BuildStatus": "result",
    "DEFAULT_ARCH": "toolchain",
    "resolve_arch": "toolchain",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fibserve.build' has no attribute {name!r}")
    return getattr(importlib.import_module(f"fibserve.build.{module}"), name)
