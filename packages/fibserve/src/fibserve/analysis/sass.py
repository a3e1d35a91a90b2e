"""SASS opcode counts per kernel from ``cuobjdump --dump-sass``, and the resources each cubin records
(``--dump-resource-usage``, a call of its own: it starts no disassembler, so it answers where the SASS cannot).

The cuobjdump executable is fixed on the server: ``cuobjdump`` on ``PATH``, else the copy shipped inside the
installed Triton wheel (``triton/backends/nvidia/bin/cuobjdump``). A client never chooses it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from fibserve.build.toolchain import version_line

from .resources import CubinUsage, parse_cubin_usage

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_ARCH = re.compile(r"^\s*code for (sm_\w+)")
# "/*0090*/   @!P0 EXIT ;" -> opcode EXIT; predicates may be P0..P6, PT, UP0.., and negated.
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T\d]+\s+)?([A-Z][A-Za-z0-9_.]*)")


class SassKernel(BaseModel):
    """Opcode counts of one function in the SASS."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str
    """Mangled function name, as printed by cuobjdump."""
    arch: str | None = None
    """SASS architecture of the cubin it came from (``sm_90a`` prints as ``sm_90``)."""
    instructions: int = 0
    """Number of SASS instructions (including NOP padding)."""
    opcodes: dict[str, int] = Field(default_factory=dict)
    """Base opcode (text before the first ``.``, e.g. ``HGMMA``, ``SYNCS``) -> count."""
    variants: dict[str, int] = Field(default_factory=dict)
    """Full opcode with modifiers -> count, for the notable opcodes only (``SYNCS.ARRIVE.TRANS64.A1T0``)."""


class SassReport(BaseModel):
    """SASS opcode counts for every kernel in a set of cubins."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    tool: str | None = None
    """Path of the cuobjdump that disassembled the cubins, or None if none was found."""
    tool_version: str | None = None
    """Its ``--version`` release line (``Cuda compilation tools, release 12.8, V12.8.55``), or None."""
    kernels: list[SassKernel] = Field(default_factory=list)
    """Functions in dump order."""
    error: str | None = None
    """Why the SASS could not be read (no cuobjdump, or it failed); None on success."""

    @property
    def opcodes(self) -> dict[str, int]:
        """Base opcode totals over all kernels."""
        total: Counter[str] = Counter()
        for kernel in self.kernels:
            total.update(kernel.opcodes)
        return dict(total)


def _is_notable(base: str) -> bool:
    from .families import SASS_NOTABLE

    return base in SASS_NOTABLE or base.startswith("UTC")


def parse_sass(text: str) -> list[SassKernel]:
    """Parse ``cuobjdump --dump-sass`` output into per-function opcode counts."""
    kernels: list[SassKernel] = []
    arch: str | None = None
    current: SassKernel | None = None
    opcodes: Counter[str] = Counter()
    variants: Counter[str] = Counter()

    def close() -> None:
        if current is not None:
            current.opcodes = dict(opcodes)
            current.variants = dict(variants)
            kernels.append(current)

    for line in text.splitlines():
        if match := _INSTRUCTION.match(line):
            if current is None:
                continue
            opcode = match.group(1)
            base = opcode.split(".", 1)[0]
            current.instructions += 1
            opcodes[base] += 1
            if _is_notable(base):
                variants[opcode] += 1
        elif match := _FUNCTION.match(line):
            close()
            current = SassKernel(name=match.group(1), arch=arch)
            opcodes, variants = Counter(), Counter()
        elif match := _ARCH.match(line):
            arch = match.group(1)
    close()
    return kernels


@lru_cache(maxsize=1)
def find_cuobjdump() -> str | None:
    """Path of the server's cuobjdump: ``PATH`` first, then the Triton wheel's copy; None if neither exists."""
    on_path = shutil.which("cuobjdump")
    if on_path:
        return on_path
    try:
        import importlib.util

        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "backends" / "nvidia" / "bin" / "cuobjdump"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


@lru_cache(maxsize=4)
def _tool_version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown version"
    return version_line(out)


def sass_tool() -> tuple[str | None, str | None]:
    """The server's cuobjdump and its release line (see :func:`find_cuobjdump`); ``(None, None)`` without one."""
    tool = find_cuobjdump()
    return (tool, _tool_version(tool)) if tool is not None else (None, None)


def dump_sass(binaries: list[Path], *, timeout_s: float = 60.0) -> SassReport:
    """Run cuobjdump on each cubin (or shared library) and parse the SASS.

    Errors (no cuobjdump, a failing dump) are reported in :attr:`SassReport.error`, never raised: the SASS
    is evidence, and its absence must be visible rather than fatal.
    """
    tool, version = sass_tool()
    if tool is None:
        return SassReport(error="cuobjdump not found (not on PATH and no Triton wheel); SASS not analysed")
    report = SassReport(tool=tool, tool_version=version)
    for binary in binaries:
        try:
            result = subprocess.run(
                [tool, "--dump-sass", str(binary)], capture_output=True, text=True, timeout=timeout_s
            )
        except (OSError, subprocess.SubprocessError) as error:
            report.error = f"cuobjdump failed on {binary.name}: {error}"
            continue
        if result.returncode != 0:
            report.error = f"cuobjdump failed on {binary.name}: {result.stderr.strip()[:500]}"
            continue
        report.kernels += parse_sass(result.stdout)
    return report


class UnreadableBinary(RuntimeError):
    """cuobjdump failed on a cubin or a build's library, so the functions it holds are unknown."""


def resource_usage(binary: Path, *, timeout_s: float = 60.0) -> list[CubinUsage] | None:
    """The resources every cubin inside ``binary`` (a cubin, or a shared library: what the GPU can load from
    it, whichever cubins the build kept beside it) records for each of its functions, in order.

    ``cuobjdump --dump-resource-usage`` starts no disassembler (milliseconds). None when there is no
    cuobjdump (as for the SASS, the notes say so).

    Raises:
        UnreadableBinary: cuobjdump failed on it (a library whose ``.nv_fatbin`` section the candidate filled
            with bytes of its own): what it embeds is unknown.
    """
    tool = find_cuobjdump()
    if tool is None:
        return None
    try:
        result = subprocess.run(
            [tool, "--dump-resource-usage", str(binary)], capture_output=True, text=True, timeout=timeout_s
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise UnreadableBinary(f"cuobjdump could not read what {binary.name} embeds: {error}") from error
    if result.returncode != 0:
        raise UnreadableBinary(
            f"cuobjdump could not read what {binary.name} embeds: {result.stderr.strip()[:500]}"
        )
    return parse_cubin_usage(result.stdout)
