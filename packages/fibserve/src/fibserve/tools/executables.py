"""Where the server's tool executables are: found once at startup, never chosen by a client."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pydantic import BaseModel

CUDA_BIN_DIRS = (Path("/usr/local/cuda/bin"),)
"""Searched after ``PATH``, where the CUDA toolkit installs its tools by default."""


def find_tool(name: str) -> Path | None:
    """Absolute path of executable ``name`` on ``PATH``, ``$CUDA_HOME/bin`` or ``/usr/local/cuda/bin``; else None."""
    found = shutil.which(name)
    if found:
        return Path(found).resolve()
    dirs = list(CUDA_BIN_DIRS)
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if cuda_home:
        dirs.insert(0, Path(cuda_home) / "bin")
    for directory in dirs:
        candidate = directory / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate.resolve()
    return None


class ToolPaths(BaseModel):
    """The executables a server uses; None when absent (the matching tasks then fail with a clear error)."""

    compute_sanitizer: Path | None = None
    """``compute-sanitizer`` (CUDA toolkit)."""
    ncu: Path | None = None
    """Nsight Compute command line (``ncu``)."""
    nvcc: Path | None = None
    """``nvcc``, for CUDA builds."""

    @classmethod
    def discover(cls) -> ToolPaths:
        """Look every tool up once (at server start)."""
        return cls(
            compute_sanitizer=find_tool("compute-sanitizer"), ncu=find_tool("ncu"), nvcc=find_tool("nvcc")
        )

    def as_dict(self) -> dict[str, str | None]:
        """Tool name to path string (or None), as ``/health`` reports them."""
        return {
            "compute-sanitizer": str(self.compute_sanitizer) if self.compute_sanitizer else None,
            "ncu": str(self.ncu) if self.ncu else None,
            "nvcc": str(self.nvcc) if self.nvcc else None,
        }
