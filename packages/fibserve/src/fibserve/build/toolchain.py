"""The server's build toolchain: nvcc, the installed apache-tvm-ffi, and the target architecture.

Every path comes from the environment or the installed packages, never from a fixed location:
nvcc from ``PATH`` (or ``$CUDA_HOME/bin``), tvm-ffi include and library directories from the installed
package's own ``tvm_ffi.libinfo``. ``import tvm_ffi`` costs seconds (it loads its native core and probes
for torch), so ``libinfo.py`` is loaded on its own, without executing the package.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DEFAULT_ARCH = "sm_90a"
"""Default target: Hopper with the architecture-specific (``a``) features wgmma/setmaxnreg need."""

_ARCH_FORMS = re.compile(r"^(?:sm_|compute_)?(\d+)\.?(\d)([af]?)$")
_RELEASE = re.compile(r"\brelease (\d+\.\d+)")


class ToolchainError(RuntimeError):
    """The build toolchain is missing or broken (an infrastructure problem, not the candidate's)."""


def normalize_arch(arch: str) -> str:
    """Turn ``sm_90a``, ``compute_90a``, ``90a`` or ``9.0a`` into ``sm_90a``.

    Raises:
        ValueError: ``arch`` is not a recognizable CUDA architecture.
    """
    match = _ARCH_FORMS.match(arch.strip())
    if not match:
        raise ValueError(f"unrecognized CUDA architecture {arch!r}; use a form like 'sm_90a' or 'sm_100a'")
    major, minor, suffix = match.groups()
    return f"sm_{major}{minor}{suffix}"


def resolve_arch(arch: str | None = None) -> str:
    """The build target: ``arch`` if given, else the first entry of ``TVM_FFI_CUDA_ARCH_LIST``, else sm_90a.

    ``TVM_FFI_CUDA_ARCH_LIST`` uses tvm-ffi's own form (``"9.0a"`` or ``"10.0a 9.0a"``); only the first
    entry is used, because the analysis verdict is per target.
    """
    if arch:
        return normalize_arch(arch)
    env = os.environ.get("TVM_FFI_CUDA_ARCH_LIST", "").replace(";", " ").split()
    return normalize_arch(env[0]) if env else DEFAULT_ARCH


def gencode_flag(arch: str) -> str:
    """``-gencode=arch=compute_90a,code=sm_90a`` for ``sm_90a``: SASS for the target plus its PTX."""
    number = normalize_arch(arch).removeprefix("sm_")
    return f"-gencode=arch=compute_{number},code=sm_{number}"


@lru_cache(maxsize=1)
def find_nvcc() -> str:
    """Path of nvcc: ``PATH`` first, then ``$CUDA_HOME/bin`` or ``$CUDA_PATH/bin``.

    Raises:
        ToolchainError: no nvcc is installed.
    """
    found = shutil.which("nvcc")
    if found:
        return found
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(variable)
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return str(Path(home) / "bin" / "nvcc")
    raise ToolchainError("nvcc not found: install the CUDA toolkit and put nvcc on PATH (or set CUDA_HOME)")


@lru_cache(maxsize=4)
def nvcc_version(nvcc: str) -> str:
    """The ``Cuda compilation tools, release X, VX.Y.Z`` line of ``nvcc --version`` (about 5 ms).

    Raises:
        ToolchainError: nvcc does not run.
    """
    try:
        out = subprocess.run(
            [nvcc, "--version"], capture_output=True, text=True, timeout=60, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError) as error:
        raise ToolchainError(f"`{nvcc} --version` failed: {error}") from error
    return version_line(out)


def version_line(output: str) -> str:
    """The ``Cuda compilation tools, release X, VX.Y.Z`` line of a CUDA tool's ``--version`` output (nvcc,
    cuobjdump, nvdisasm all print one); the last non-empty line when there is none, ``unknown version`` for
    empty output."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    release = [line for line in lines if "release" in line]
    return (release or lines or ["unknown version"])[-1]


def cuda_release(version: str | None) -> str | None:
    """The CUDA release (``13.0``) named in a :func:`version_line`, or None when it names none."""
    match = _RELEASE.search(version or "")
    return match.group(1) if match else None


def tvm_ffi_version() -> str:
    """Installed apache-tvm-ffi version from package metadata (no import).

    Raises:
        ToolchainError: apache-tvm-ffi is not installed.
    """
    try:
        return importlib.metadata.version("apache-tvm-ffi")
    except importlib.metadata.PackageNotFoundError as error:
        raise ToolchainError("apache-tvm-ffi is not installed; `pip install apache-tvm-ffi`") from error


@dataclass(frozen=True)
class TvmFfiPaths:
    """Where the installed tvm-ffi keeps its headers and its shared library."""

    include_dirs: tuple[str, ...]
    library: str

    @property
    def library_dir(self) -> str:
        """Directory holding ``libtvm_ffi.so`` (for ``-L`` and the rpath)."""
        return str(Path(self.library).parent)


@lru_cache(maxsize=1)
def tvm_ffi_paths() -> TvmFfiPaths:
    """Include directories and ``libtvm_ffi.so`` from the installed package's ``tvm_ffi.libinfo``.

    Raises:
        ToolchainError: the package or its headers/library are missing.
    """
    spec = importlib.util.find_spec("tvm_ffi")
    if spec is None or not spec.submodule_search_locations:
        raise ToolchainError("apache-tvm-ffi is not installed; `pip install apache-tvm-ffi`")
    libinfo_file = Path(next(iter(spec.submodule_search_locations))) / "libinfo.py"
    libinfo_spec = importlib.util.spec_from_file_location("_fibserve_tvm_ffi_libinfo", libinfo_file)
    if libinfo_spec is None or libinfo_spec.loader is None:
        raise ToolchainError(f"cannot load {libinfo_file}")
    libinfo = importlib.util.module_from_spec(libinfo_spec)
    libinfo_spec.loader.exec_module(libinfo)
    try:
        return TvmFfiPaths(include_dirs=tuple(libinfo.include_paths()), library=libinfo.find_libtvm_ffi())
    except RuntimeError as error:
        raise ToolchainError(f"apache-tvm-ffi is incomplete: {error}") from error
