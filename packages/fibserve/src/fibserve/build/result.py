"""The outcome of one build: status, log, and where the build products are."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, computed_field


class BuildStatus(StrEnum):
    """How a build ended. Only ``COMPILE_ERROR`` and ``TIMEOUT`` are the candidate's fault."""

    OK = "OK"
    COMPILE_ERROR = "COMPILE_ERROR"
    """The compiler rejected the sources, or the entry symbol is not exported."""
    TIMEOUT = "TIMEOUT"
    """The compiler ran past the build's time limit (or its CPU limit)."""
    INFRA_ERROR = "INFRA_ERROR"
    """The toolchain is missing or broken; never reported as the candidate's COMPILE_ERROR."""


class BuildResult(BaseModel):
    """Build products and diagnostics of one solution for one target.

    Artifact names are stored relative to ``build_dir`` so a cached build can be read back wherever the
    directory lives; the ``*_path`` fields are the absolute paths.
    """

    model_config = ConfigDict(use_attribute_docstrings=True)

    status: BuildStatus
    """OK, COMPILE_ERROR, TIMEOUT or INFRA_ERROR."""
    language: str
    """Solution language: cuda, cpp, triton or python."""
    entry_file: str
    """File part of the entry point."""
    entry_symbol: str
    """Symbol part of the entry point (``run``)."""
    arch: str | None = None
    """Target architecture for compiled languages (``sm_90a``); None for Python/Triton."""
    key: str
    """Build cache key (SHA-256 hex) over everything that changes the binary."""
    build_dir: str
    """Absolute build directory."""
    library: str | None = None
    """Shared library, relative to ``build_dir`` (CUDA/C++)."""
    ptx: list[str] = Field(default_factory=list)
    """PTX files, one per ``.cu`` translation unit, relative to ``build_dir``."""
    cubins: list[str] = Field(default_factory=list)
    """cubins, one per ``.cu`` translation unit, relative to ``build_dir``."""
    package: str | None = None
    """Importable package name of a Python/Triton build (see :func:`fibserve.build.load_python_entry`)."""
    package_root: str | None = None
    """Directory to import ``package`` from, relative to ``build_dir``."""
    log: str = ""
    """Compiler output: trimmed to the errors on failure, the full ptxas ``-v`` report on success."""
    command: list[str] = Field(default_factory=list)
    """The compiler command line that ran."""
    sandbox: str = "none"
    """``bwrap`` when the compiler ran under bubblewrap, ``unsafe-none`` under ``--unsafe-no-sandbox``."""
    toolchain: dict[str, str] = Field(default_factory=dict)
    """Versions that went into the key (nvcc, tvm-ffi)."""
    cached: bool = False
    """True when this result was read from the build cache."""
    transient: bool = False
    """True when the failure may not repeat (the compiler was killed by a signal); such results are not cached."""
    timings_ms: dict[str, float] = Field(default_factory=dict)
    """Milliseconds: ``compile`` (the compiler), ``total`` (including cache and file work)."""
    _lease: Any = PrivateAttr(default=None)

    def hold(self, lease: Any) -> None:
        """Keep the build cache's lease on this build (:class:`fibserve.build.cache.BuildLease`) for as long as
        this result lives or until :meth:`release`: the build is not evicted meanwhile."""
        self._lease = lease

    def release(self) -> None:
        """Let the build cache evict this build again (idempotent; dropping the result does the same)."""
        if self._lease is not None:
            self._lease.release()
            self._lease = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """Whether the build succeeded."""
        return self.status == BuildStatus.OK

    def _absolute(self, relative: str | None) -> Path | None:
        return None if relative is None else Path(self.build_dir) / relative

    @property
    def library_path(self) -> Path | None:
        """Absolute path of the shared library, or None."""
        return self._absolute(self.library)

    @property
    def ptx_paths(self) -> list[Path]:
        """Absolute paths of the PTX files."""
        return [Path(self.build_dir) / p for p in self.ptx]

    @property
    def cubin_paths(self) -> list[Path]:
        """Absolute paths of the cubins."""
        return [Path(self.build_dir) / p for p in self.cubins]

    @property
    def ptx_path(self) -> Path | None:
        """PTX of the entry file's translation unit if it has one, else the first PTX, else None."""
        return _pick(self.ptx_paths, self.entry_file)

    @property
    def cubin_path(self) -> Path | None:
        """cubin of the entry file's translation unit if it has one, else the first cubin, else None."""
        return _pick(self.cubin_paths, self.entry_file)


def _pick(paths: list[Path], entry_file: str) -> Path | None:
    stem = Path(entry_file).stem
    for path in paths:
        if path.stem == stem:
            return path
    return paths[0] if paths else None
