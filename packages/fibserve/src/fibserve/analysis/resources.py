"""ptxas resource usage per kernel, parsed from the ``--ptxas-options=-v`` log.

Lines parsed (ptxas 12.x/13.x wording)::

    ptxas info    : Compiling entry function '_Z6kernelPf' for 'sm_90a'
    ptxas info    : Function properties for _Z6kernelPf
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 168 registers, used 1 barriers, 1024 bytes smem, 400 bytes cmem[0]

plus any other ``ptxas warning``/``ptxas info`` line carrying a ``(Cnnnn)`` advisory code (for example the
wgmma-serialization and ``setmaxnreg`` notes), kept verbatim as advisories of the kernel being compiled.

The log is not ptxas's alone: nvcc's front end and the host compiler print the candidate's diagnostics into it,
and a ``#pragma message("\\nptxas info    : Used 8 registers")`` starts a line with the candidate's text. So
:func:`checked_resources` keeps ptxas's report of a kernel only where the cubins confirm it (the kernel exists,
each of its lines appears once per definition, registers and stack frame equal the cubin's, as
``cuobjdump --dump-resource-usage`` reads them); otherwise the kernel's numbers are the cubin's.
"""

from __future__ import annotations

import re
from collections import Counter

from pydantic import BaseModel, ConfigDict, Field

# Anchored at the start of a (stripped) line, as ptxas writes them: the same log holds the host compiler's
# diagnostics, which quote the candidate's own text (`#warning ptxas info : Used 9...9 registers`). Numbers are
# bounded: int() refuses more than 4,300 digits with a ValueError, which once ended the analysis, and with it the
# binary policy, so that a candidate calling cuBLAS was built and loaded. A `#pragma message` with a newline in
# it still starts a line with the candidate's text, which is why checked_resources holds each kernel to its cubin.
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
# cuobjdump --dump-resource-usage: " Function _Z3addPf:" then "  REG:12 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:536 ..."
_USAGE_FUNCTION = re.compile(r"^\s*Function\s+(\S+):$")
_USAGE = re.compile(
    rf"^\s*REG:{_NUMBER}\s+STACK:{_NUMBER}\s+SHARED:{_NUMBER}\s+LOCAL:{_NUMBER}(?:\s+CONSTANT\[0\]:{_NUMBER})?"
)
_REPORT_LINES = ("compiling", "properties", "frame", "used")
"""The lines ptxas prints exactly once for each kernel it compiles."""


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
    spill_store_bytes: int | None = 0
    """Bytes spilled to local memory (stores); None when unknown (``from_cubin``)."""
    spill_load_bytes: int | None = 0
    """Bytes reloaded from spills; None when unknown (``from_cubin``)."""
    advisories: list[str] = Field(default_factory=list)
    """ptxas warnings and ``(Cnnnn)`` advisories for this kernel, verbatim."""
    from_cubin: bool = False
    """True when ptxas's report of this kernel in the build log was repeated or contradicted the cubin (text
    imitating ptxas's, printed by the candidate's own diagnostics): registers, stack, shared and constant memory
    are then the cubin's (its shared memory includes the 1 KiB that sm_90 and later reserve for the system), and
    barriers, spills and advisories are unknown."""


class CubinUsage(BaseModel):
    """Resources a cubin records for one function (``cuobjdump --dump-resource-usage``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str
    """Mangled function name."""
    registers: int
    """Registers per thread (``REG``)."""
    stack_bytes: int
    """Stack frame in bytes per thread (``STACK``)."""
    shared_bytes: int
    """Static shared memory in bytes (``SHARED``; includes sm_90's 1 KiB system reserve where it applies)."""
    constant_bytes: int = 0
    """Bank-0 constant memory in bytes (``CONSTANT[0]``)."""


def parse_cubin_usage(text: str) -> list[CubinUsage]:
    """Parse the ``Resource usage`` blocks of cuobjdump's output (any other lines are skipped), in order.

    The text comes from the server's cuobjdump reading a cubin nvcc wrote; numbers are bounded all the same.
    """
    usage: list[CubinUsage] = []
    name: str | None = None
    for line in text.splitlines():
        if match := _USAGE_FUNCTION.match(line):
            name = match.group(1)
        elif name is not None and (match := _USAGE.match(line)):
            registers, stack, shared, _local, constant = match.groups()
            usage.append(
                CubinUsage(
                    name=name,
                    registers=int(registers),
                    stack_bytes=int(stack),
                    shared_bytes=int(shared),
                    constant_bytes=int(constant or 0),
                )
            )
            name = None
    return usage


def parse_ptxas_log(log: str) -> list[KernelResources]:
    """Parse a ptxas ``-v`` log (nvcc's stderr) into per-kernel resources, in log order, unchecked (see
    :func:`checked_resources` for a log the candidate's diagnostics share).

    Properties of device functions (``Function properties for`` a name that is never compiled as an entry)
    are ignored; warnings before the first entry are attached to the first kernel.
    """
    return _parse(log)[0]


def checked_resources(log: str, usage: list[CubinUsage]) -> list[KernelResources]:
    """Per-kernel resources from a build's ptxas log, each kernel checked against its cubins' ``usage``.

    A kernel no cubin defines is dropped (text that imitates ptxas's). A kernel whose report is not exactly
    ptxas's (one ``Compiling entry function``, ``Function properties``, stack-frame and ``Used`` line per
    definition, the registers and stack frames reported being the cubins', see :func:`_confirmed`) gets its
    first cubin's numbers, no arch (the log's may be planted), and ``from_cubin``.

    Args:
        log: nvcc's output with ``--ptxas-options=-v``.
        usage: :func:`parse_cubin_usage` over every cubin of the build.
    """
    reported, lines = _parse(log)
    definitions: dict[str, list[CubinUsage]] = {}
    for function in usage:
        definitions.setdefault(function.name, []).append(function)
    checked: list[KernelResources] = []
    for kernel in reported:
        cubins = definitions.get(kernel.name)
        if cubins is None:
            continue
        if _confirmed(lines[kernel.name], cubins):
            checked.append(kernel)
            continue
        truth = cubins[0]
        checked.append(
            KernelResources(
                name=kernel.name,
                registers=truth.registers,
                shared_bytes=truth.shared_bytes,
                constant_bytes=truth.constant_bytes,
                stack_bytes=truth.stack_bytes,
                spill_store_bytes=None,
                spill_load_bytes=None,
                from_cubin=True,
            )
        )
    return checked


def _confirmed(seen: Counter[object], cubins: list[CubinUsage]) -> bool:
    """Whether a kernel's report lines (``seen``, from :func:`_parse`) are one report per definition in
    ``cubins``, whose registers and stack frames are the cubins' (as multisets: a ``static`` kernel of one name
    in two translation units is two definitions, reported in the build's order, not the cubins')."""
    if any(seen[line] != len(cubins) for line in _REPORT_LINES):
        return False
    expected: Counter[object] = Counter()
    for cubin in cubins:
        expected[("registers", cubin.registers)] += 1
        expected[("stack_bytes", cubin.stack_bytes)] += 1
    return all(seen[key] == count for key, count in expected.items())


def _parse(log: str) -> tuple[list[KernelResources], dict[str, Counter[object]]]:
    """The kernels of a ptxas log, and per kernel how often each of its report lines (``_REPORT_LINES``)
    appeared and each register count and stack frame was reported (``("registers", 168)``)."""
    lines: dict[str, Counter[object]] = {}
    kernels: dict[str, KernelResources] = {}
    current: KernelResources | None = None
    properties_for: str | None = None
    orphans: list[str] = []
    for raw in log.splitlines():
        line = raw.strip()
        if match := _COMPILING.search(line):
            name = match.group(1)
            current = kernels.setdefault(name, KernelResources(name=name, arch=match.group(2)))
            lines.setdefault(name, Counter())["compiling"] += 1
            properties_for = None
        elif match := _PROPERTIES.search(line):
            properties_for = match.group(1)
            lines.setdefault(properties_for, Counter())["properties"] += 1
        elif match := _FRAME.search(line):
            target = kernels.get(properties_for or "")
            if target is not None:
                lines[target.name]["frame"] += 1
                lines[target.name][("stack_bytes", int(match.group(1)))] += 1
                target.stack_bytes, target.spill_store_bytes, target.spill_load_bytes = (
                    int(match.group(1)),
                    int(match.group(2)),
                    int(match.group(3)),
                )
        elif match := _USED.search(line):
            if current is not None:
                lines[current.name]["used"] += 1
                lines[current.name][("registers", int(match.group(1)))] += 1
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
    return result, lines
