"""Candidate builds: source policy, nvcc builds with the tvm-ffi binding, Triton/Python packages, build cache.

Public API::

    build_solution(solution, *, arch=None, cache_dir=None, timeout_s=300) -> BuildResult
    check_policy(solution, config=None) -> list[PolicyViolation]
    load_python_entry(result) / load_tvm_ffi_entry(result)   # in the sandbox worker only
"""

from .builder import build_solution
from .policy import check_policy
from .policy_config import PolicyConfig, PolicyViolation
from .python_build import load_python_entry, load_tvm_ffi_entry
from .result import BuildResult, BuildStatus
from .toolchain import DEFAULT_ARCH, resolve_arch

__all__ = [
    "DEFAULT_ARCH",
    "BuildResult",
    "BuildStatus",
    "PolicyConfig",
    "PolicyViolation",
    "build_solution",
    "check_policy",
    "load_python_entry",
    "load_tvm_ffi_entry",
    "resolve_arch",
]
