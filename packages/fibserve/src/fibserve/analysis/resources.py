"""ptxas resource usage per kernel, parsed from the ``--ptxas-options=-v`` log.

Lines parsed (ptxas 12.x/13.x wording)::

    ptxas info    : Compiling entry function '_Z6kernelPf' for 'sm_90a'
    ptxas info    : Function properties for _Z6kernelPf
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 168 registers, used 1 barriers, 1024 bytes smem, 400 bytes cmem[0]

plus any other ``ptxas warning``/``ptxas info`` line carrying a ``(Cnnnn)`` advisory code (for example the
wgmma-serialization and ``setmaxnreg`` notes), kept verbatim as advisories of the kernel being compiled.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

# Anchored at the start of a (stripped) line, as ptxas writes them: the same log holds the host compiler's
# diagnostics, which quote the candidate's own text (`#warning ptxas info : Used 9...9 registers`). Numbers are
# bounded: int() refuses more than 4,300 digits with a ValueError, which once ended the analysis, and with it the
# binary policy, so that a candidate calling cuBLAS was built and loaded. A `#pragma message` with a newline in
# it still starts a line with the candidate's text: what is read here is a report, and no policy reads it.
_INFO = r"^ptxas\s+info\s*:\s*"
_NUMBER = r"(\d{1,12})"
_COMPILING = re.compile(_INFO + r"Compiling entry function '([^']+)' for '(\w+)'$")
_PROPERTIES = re.compile(_INFO + r"Function properties for (\S+)$")
_FRAME = re.compile(
    rf"^{_NUMBER} bytes stack frame, {_NUMBER} bytes spill stores, {_NUMBER} bytes spill loads$"
)
_USED = re.compile(_INFO + rf"Used {_NUMBER} registers")
_BARRIERS = re.compile(rf"used {_NUMBER} barriers")
_SMEM = re.compile(rf"{_NUMBER} bytes smem")
_CMEM = re.compile(rf"{_NUMBER} bytes cmem\[0\]")
_ADVISORY = re.compile(r"^ptxas\s+(?:warning|info)\s*:.*\(C\d{4}\)|^ptxas\s+warning\s*:")


class KernelResources(BaseModel):
    """Resources ptxas assigned to one kernel."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str
    """Mangled kernel name."""
    arch: str | None = None
    """Target ptxas compiled it for (``sm_90a``)."""
    registers: int | None = None
    """Registers per thread."""
    barriers: int | None = None
    """Named barriers used."""
    shared_bytes: int = 0
    """Static shared memory in bytes (dynamic shared memory is set at launch and not known here)."""
    constant_bytes: int = 0
    """Bank-0 constant memory (kernel parameters) in bytes."""
    stack_bytes: int = 0
    """Stack frame in bytes per thread."""
    spill_store_bytes: int = 0
    """Bytes spilled to local memory (stores)."""
    spill_load_bytes: int = 0
    """Bytes reloaded from spills."""
    advisories: list[str] = Field(default_factory=list)
    """ptxas warnings and ``(Cnnnn)`` advisories for this kernel, verbatim."""


def parse_ptxas_log(log: str) -> list[KernelResources]:
    """Parse a ptxas ``-v`` log (nvcc's stderr) into per-kernel resources, in log order.

    Properties of device functions (``Function properties for`` a name that is never compiled as an entry)
    are ignored; warnings before the first entry are attached to the first kernel.
    """
    kernels: dict[str, KernelResources] = {}
    current: KernelResources | None = None
    properties_for: str | None = None
    orphans: list[str] = []
    for raw in log.splitlines():
        line = raw.strip()
        if match := _COMPILING.search(line):
            name = match.group(1)
            current = kernels.setdefault(name, KernelResources(name=name, arch=match.group(2)))
            properties_for = None
        elif match := _PROPERTIES.search(line):
            properties_for = match.group(1)
        elif match := _FRAME.search(line):
            target = kernels.get(properties_for or "")
            if target is not None:
                target.stack_bytes, target.spill_store_bytes, target.spill_load_bytes = (
                    int(match.group(1)),
                    int(match.group(2)),
                    int(match.group(3)),
                )
        elif match := _USED.search(line):
            if current is not None:
                current.registers = int(match.group(1))
                if barriers := _BARRIERS.search(line):
                    current.barriers = int(barriers.group(1))
                if smem := _SMEM.search(line):
                    current.shared_bytes = int(smem.group(1))
                if cmem := _CMEM.search(line):
                    current.constant_bytes = int(cmem.group(1))
        elif _ADVISORY.search(line):
            named = next((k for k in kernels.values() if f"'{k.name}'" in line), None)
            if named is not None:
                named.advisories.append(line)
            elif current is not None:
                current.advisories.append(line)
            else:
                orphans.append(line)
    result = list(kernels.values())
    if orphans and result:
        result[0].advisories[:0] = orphans
    return result
