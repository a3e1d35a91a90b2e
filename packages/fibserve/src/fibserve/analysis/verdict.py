"""Per-kernel evidence (PTX + SASS + ptxas) and the per-target verdict: does it use the architecture?

The verdict prefers SASS evidence (what the GPU would execute) over PTX (what the source asked for): a
``wgmma`` in the PTX that left no ``HGMMA`` in the SASS means the compiler removed or serialized it, and is
reported as a note rather than as tensor-core use.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter

from pydantic import BaseModel, ConfigDict, Field

from .families import ARCH_ORDER, PTX_FAMILIES, SASS_NOTABLE
from .ptx import PtxReport
from .resources import KernelResources
from .sass import SassReport


class KernelAnalysis(BaseModel):
    """Everything known statically about one kernel (``.entry``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str
    """Mangled name."""
    display_name: str
    """Demangled name when ``c++filt`` is available, else the mangled name."""
    ptx_instructions: int = 0
    """Instruction statements in its PTX body."""
    ptx_families: dict[str, int] = Field(default_factory=dict)
    """PTX family -> count."""
    sass_instructions: int = 0
    """SASS instructions (including padding NOPs)."""
    sass_notable: dict[str, int] = Field(default_factory=dict)
    """Notable SASS base opcodes (HGMMA, UTMALDG, SYNCS, UTC*...) -> count."""
    resources: KernelResources | None = None
    """ptxas resources (registers, shared memory, spills)."""


class Verdict(BaseModel):
    """Does the build use the target architecture's features? One boolean per feature, with its evidence."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    target: str
    """Target architecture the verdict is for (``sm_90a``)."""
    uses_hopper_tensor_cores: bool = False
    """HGMMA in the SASS (wgmma.mma_async)."""
    uses_blackwell_tensor_cores: bool = False
    """A ``UTC*MMA`` opcode in the SASS, or ``tcgen05.mma`` in the PTX when no SASS was read."""
    uses_legacy_tensor_cores: bool = False
    """HMMA in the SASS (mma.sync / wmma: Ampere-style warp MMA)."""
    uses_tma: bool = False
    """UTMALDG/UTMASTG/UTMAREDG/UTMAPF in the SASS; cp.async.bulk.tensor in the PTX only when no SASS was read
    (or for an sm_8x target, where mbarrier has no SYNCS: the four flags below are then the PTX's too)."""
    uses_mbarrier: bool = False
    """SYNCS in the SASS; mbarrier in the PTX only when no SASS was read."""
    uses_setmaxnreg: bool = False
    """USETMAXREG in the SASS; setmaxnreg in the PTX only when no SASS was read."""
    uses_clusters: bool = False
    """barrier.cluster or mapa in the PTX."""
    uses_tcgen05: bool = False
    """A UTC* opcode in the SASS; any tcgen05 instruction in the PTX only when no SASS was read."""
    architecture_specific: bool = False
    """Whether any instruction family introduced with sm_90a or later is used: the families above as they
    say, and the PTX's other sm_90a+ families (stmatrix, elect.sync, fences, ...), which have no SASS check."""
    spills: bool | None = False
    """Whether any kernel spills registers to local memory; None when none is known to and some kernel's
    spills are unknown (its ptxas report did not match its cubin, or the log could not be checked against the
    cubins at all)."""
    summary: str = ""
    """One line for humans and models, e.g. ``sm_90a: HGMMA yes, TMA yes, mbarrier yes, setmaxnreg no``."""
    notes: list[str] = Field(default_factory=list)
    """Mismatches and warnings worth acting on."""


def demangle(names: list[str]) -> dict[str, str]:
    """Mangled -> demangled names through ``c++filt`` (one call); identity when it is not installed."""
    tool = shutil.which("c++filt")
    if not names or tool is None:
        return {name: name for name in names}
    try:
        out = subprocess.run(
            [tool], input="\n".join(names), capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {name: name for name in names}
    lines = out.splitlines()
    if len(lines) != len(names):
        return {name: name for name in names}
    return dict(zip(names, lines, strict=True))


def _notable(opcodes: dict[str, int]) -> dict[str, int]:
    return {op: n for op, n in sorted(opcodes.items()) if op in SASS_NOTABLE or op.startswith("UTC")}


def merge_kernels(
    ptx_reports: list[PtxReport], sass: SassReport | None, resources: list[KernelResources]
) -> list[KernelAnalysis]:
    """Join PTX functions (entries only), SASS kernels and ptxas resources by mangled name."""
    kernels: dict[str, KernelAnalysis] = {}

    def get(name: str) -> KernelAnalysis:
        return kernels.setdefault(name, KernelAnalysis(name=name, display_name=name))

    for report in ptx_reports:
        for function in report.functions:
            if function.kind == "entry":
                kernel = get(function.name)
                kernel.ptx_instructions += function.instructions
                kernel.ptx_families = dict(Counter(kernel.ptx_families) + Counter(function.families))
            # Device functions (.func) that were not inlined are not kernels; the verdict still counts them.
    if sass is not None:
        for sass_kernel in sass.kernels:
            kernel = get(sass_kernel.name)
            kernel.sass_instructions += sass_kernel.instructions
            kernel.sass_notable = dict(Counter(kernel.sass_notable) + Counter(_notable(sass_kernel.opcodes)))
    for resource in resources:
        get(resource.name).resources = resource
    pretty = demangle(list(kernels))
    for name, kernel in kernels.items():
        kernel.display_name = pretty.get(name, name)
    return list(kernels.values())


SASS_PROOF: dict[str, tuple[str, ...]] = {
    "cp.async.bulk.tensor": ("UTMALDG", "UTMASTG", "UTMAREDG", "UTMAPF"),
    "mbarrier": ("SYNCS",),
    "setmaxnreg": ("USETMAXREG",),
    "tcgen05": ("UTC*",),
}
"""PTX family -> the base SASS opcodes that show ptxas compiled it (``*``: any opcode so starting). Every form
of each compiles to one of them on sm_90a/sm_100a (nvcc 13; mbarrier init, arrive, try_wait and inval to
SYNCS.*, a TMA prefetch to UTMAPF, tcgen05 alloc to UTCATOMSWS and mma to UTCHMMA)."""


def _compiled_as(opcode: str, proof: tuple[str, ...]) -> bool:
    return any(opcode.startswith(p[:-1]) if p.endswith("*") else opcode == p for p in proof)


def decide(
    target: str,
    ptx_reports: list[PtxReport],
    sass: SassReport | None,
    resources: list[KernelResources],
    display_names: dict[str, str] | None = None,
    *,
    unchecked_log: str | None = None,
) -> Verdict:
    """The verdict for ``target`` from all PTX, SASS and resource evidence of a build.

    ``display_names`` maps mangled kernel names to the names used in notes (demangled, see ``merge_kernels``).
    ``unchecked_log``: why ``resources`` could not be held to the cubins (cuobjdump read no resource usage
    from one); they are then the build log's as written, which the candidate's own diagnostics can imitate,
    so the verdict's spills are unknown and a note says why.
    """
    names = display_names or {}
    families: Counter[str] = Counter()
    for report in ptx_reports:
        for function in report.functions:
            families.update(function.families)
    opcodes: Counter[str] = Counter(sass.opcodes if sass is not None else {})
    have_sass = sass is not None and bool(sass.kernels)
    utc_mma = sum(n for op, n in opcodes.items() if op.startswith("UTC") and op.endswith("MMA"))
    verdict = Verdict(target=target)
    verdict.uses_hopper_tensor_cores = opcodes["HGMMA"] > 0
    verdict.uses_blackwell_tensor_cores = utc_mma > 0 or (not have_sass and families["tcgen05"] > 0)
    verdict.uses_legacy_tensor_cores = opcodes["HMMA"] > 0
    # where the SASS was read it alone says what ptxas compiled: PTX that ptxas drops (an instruction under a
    # predicate it proves false) proved TMA on a plain add, and the agent's target check believed it; before sm_90
    # mbarrier compiles to plain shared-memory stores and atomics (no SYNCS), so the PTX says it there
    proven = have_sass and not target.startswith("sm_8")
    used = {
        family: any(_compiled_as(op, proof) for op, n in opcodes.items() if n)
        if proven
        else families[family] > 0
        for family, proof in SASS_PROOF.items()
    }
    verdict.uses_tma = used["cp.async.bulk.tensor"]
    verdict.uses_mbarrier = used["mbarrier"]
    verdict.uses_setmaxnreg = used["setmaxnreg"]
    verdict.uses_clusters = families["barrier.cluster"] + families["mapa"] > 0
    verdict.uses_tcgen05 = used["tcgen05"]
    wgmma = verdict.uses_hopper_tensor_cores or (not have_sass and families["wgmma.mma_async"] > 0)
    modern = {f.name for f in PTX_FAMILIES if ARCH_ORDER[f.arch] >= ARCH_ORDER["sm_90a"]}
    unchecked = modern - set(SASS_PROOF) - {"wgmma.mma_async"}  # no SASS check: the PTX says
    verdict.architecture_specific = wgmma or any(used.values()) or any(families[name] for name in unchecked)
    verdict.spills = any(r.spill_store_bytes or r.spill_load_bytes for r in resources) or (
        None if unchecked_log is not None or any(r.from_cubin for r in resources) else False
    )
    if unchecked_log is not None:
        verdict.notes.append(
            f"the build log's ptxas report was not checked against the cubins ({unchecked_log}): its kernels, "
            "registers and memory are as the log says, which lines the candidate prints can imitate; spills unknown"
        )
    if families["wgmma.mma_async"] and have_sass and not opcodes["HGMMA"]:
        verdict.notes.append(
            "wgmma.mma_async is in the PTX but no HGMMA is in the SASS: check the target is sm_90a"
        )
    for name, proof in SASS_PROOF.items():
        if families[name] and proven and not used[name]:
            verdict.notes.append(
                f"{name} is in the PTX but no {'/'.join(proof)} is in the SASS: ptxas compiled it away (or it is "
                "not for this target), so it does not count"
            )
    if target.startswith("sm_100") and families["wgmma.mma_async"]:
        verdict.notes.append(
            "wgmma does not exist on sm_100a; Blackwell tensor cores are reached through tcgen05"
        )
    for resource in resources:
        if resource.from_cubin:
            verdict.notes.append(
                f"{names.get(resource.name, resource.name)}: the build log's ptxas report of this kernel was "
                "repeated or contradicted its cubin (lines imitating ptxas's, as a #pragma message can print): "
                "its registers and memory are the cubin's; spills, barriers and ptxas advisories unknown"
            )
        if resource.spill_store_bytes or resource.spill_load_bytes:
            verdict.notes.append(
                f"{names.get(resource.name, resource.name)}: {resource.spill_store_bytes} bytes spill stores, "
                f"{resource.spill_load_bytes} bytes spill loads (registers: {resource.registers})"
            )
        verdict.notes += [
            f"{names.get(resource.name, resource.name)}: {note}" for note in resource.advisories
        ]
    if sass is not None and sass.error:
        verdict.notes.append(sass.error)
    verdict.summary = _summary(verdict)
    return verdict


def _summary(verdict: Verdict) -> str:
    def yes(flag: bool) -> str:
        return "yes" if flag else "no"

    if verdict.target.startswith("sm_100"):
        parts = [
            f"tcgen05 MMA {yes(verdict.uses_blackwell_tensor_cores)}",
            f"TMA {yes(verdict.uses_tma)}",
            f"mbarrier {yes(verdict.uses_mbarrier)}",
        ]
    else:
        parts = [
            f"HGMMA {yes(verdict.uses_hopper_tensor_cores)}",
            f"TMA {yes(verdict.uses_tma)}",
            f"mbarrier {yes(verdict.uses_mbarrier)}",
            f"setmaxnreg {yes(verdict.uses_setmaxnreg)}",
            f"clusters {yes(verdict.uses_clusters)}",
        ]
    parts.append("spills unknown" if verdict.spills is None else f"spills {yes(verdict.spills)}")
    return f"{verdict.target}: " + ", ".join(parts)
