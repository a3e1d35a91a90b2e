"""PTX instruction families and notable SASS opcodes, by the architecture that introduced them.

Sources: the public PTX ISA (version 8.x/9.0) "Instructions" chapter and its per-instruction target ISA
notes (e.g. ``wgmma`` requires ``sm_90a``, ``tcgen05`` requires ``sm_100a``), and the SASS opcode names
printed by ``cuobjdump --dump-sass`` (``HGMMA`` for warpgroup MMA, ``UTMALDG``/``UTMASTG`` for TMA loads and
stores, ``SYNCS`` for the transaction barriers behind ``mbarrier``, ``UTC*`` for Blackwell tcgen05).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PtxFamily:
    """One PTX instruction family: a name, the architecture that introduced it, and opcode prefixes."""

    name: str
    arch: str
    """``sm_80`` (Ampere), ``sm_90a`` (Hopper) or ``sm_100a`` (Blackwell)."""
    prefixes: tuple[str, ...]
    """Opcode prefixes (dotted components) that belong to this family."""
    excludes: tuple[str, ...] = ()
    """Prefixes that match ``prefixes`` but belong to another family (``cp.async.bulk`` is not Ampere)."""
    description: str = ""


PTX_FAMILIES: tuple[PtxFamily, ...] = (
    PtxFamily(
        "cp.async",
        "sm_80",
        ("cp.async",),
        ("cp.async.bulk",),
        "asynchronous global->shared copies (LDGSTS)",
    ),
    PtxFamily("ldmatrix", "sm_80", ("ldmatrix",), (), "warp-wide shared-memory matrix loads (LDSM)"),
    PtxFamily("mma.sync", "sm_80", ("mma.sync",), (), "warp-level tensor core MMA (HMMA)"),
    PtxFamily("wgmma.mma_async", "sm_90a", ("wgmma.mma_async",), (), "warpgroup tensor core MMA (HGMMA)"),
    PtxFamily(
        "wgmma.sync",
        "sm_90a",
        ("wgmma.fence", "wgmma.commit_group", "wgmma.wait_group"),
        (),
        "wgmma fences and group commit/wait",
    ),
    PtxFamily(
        "cp.async.bulk.tensor",
        "sm_90a",
        ("cp.async.bulk.tensor", "cp.reduce.async.bulk.tensor", "cp.async.bulk.prefetch.tensor"),
        (),
        "TMA tensor copies with a tensor map (UTMALDG/UTMASTG/UTMAREDG)",
    ),
    PtxFamily(
        "cp.async.bulk",
        "sm_90a",
        ("cp.async.bulk", "cp.reduce.async.bulk"),
        ("cp.async.bulk.tensor", "cp.reduce.async.bulk.tensor", "cp.async.bulk.prefetch.tensor"),
        "bulk (non-tensor) async copies and their commit/wait groups",
    ),
    PtxFamily("mbarrier", "sm_90a", ("mbarrier",), (), "shared-memory transaction barriers (SYNCS)"),
    PtxFamily("setmaxnreg", "sm_90a", ("setmaxnreg",), (), "warp-specialized register reallocation"),
    PtxFamily("stmatrix", "sm_90a", ("stmatrix",), (), "warp-wide shared-memory matrix stores (STSM)"),
    PtxFamily("elect.sync", "sm_90a", ("elect.sync",), (), "elect one leader lane"),
    PtxFamily("mapa", "sm_90a", ("mapa",), (), "map a shared address to a peer CTA in the cluster"),
    PtxFamily("barrier.cluster", "sm_90a", ("barrier.cluster",), (), "cluster-wide barrier"),
    PtxFamily("fence.proxy.async", "sm_90a", ("fence.proxy.async",), (), "generic/async proxy fence"),
    PtxFamily(
        "tensormap", "sm_90a", ("tensormap", "fence.proxy.tensormap"), (), "in-kernel tensor map updates"
    ),
    PtxFamily("griddepcontrol", "sm_90a", ("griddepcontrol",), (), "programmatic dependent launch"),
    PtxFamily("tcgen05", "sm_100a", ("tcgen05",), (), "5th-generation tensor cores and tensor memory"),
)

ARCH_ORDER = {"sm_80": 0, "sm_90a": 1, "sm_100a": 2}
"""Architectures in introduction order, for sorting and for "families available on a target"."""


def _prefix_match(opcode: str, prefix: str) -> bool:
    return opcode == prefix or opcode.startswith(prefix + ".")


def classify_ptx_opcode(opcode: str) -> str | None:
    """Family name of a full PTX opcode (``wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16``), or None.

    Matching is by whole dotted components, so ``mapa`` does not match ``mapall`` and ``cp.async`` does not
    match ``cp.async.bulk``.
    """
    for family in PTX_FAMILIES:
        if any(_prefix_match(opcode, p) for p in family.prefixes) and not any(
            _prefix_match(opcode, e) for e in family.excludes
        ):
            return family.name
    return None


SASS_NOTABLE: dict[str, str] = {
    "HMMA": "warp-level tensor core MMA (mma.sync)",
    "LDGSTS": "cp.async global->shared copy",
    "LDSM": "ldmatrix",
    "HGMMA": "Hopper warpgroup MMA (wgmma.mma_async)",
    "UTMALDG": "TMA tensor load (cp.async.bulk.tensor global->shared)",
    "UTMASTG": "TMA tensor store (cp.async.bulk.tensor shared->global)",
    "UTMAREDG": "TMA tensor reduction (cp.reduce.async.bulk.tensor)",
    "UTMAPF": "TMA prefetch",
    "UBLKCP": "bulk copy (cp.async.bulk)",
    "SYNCS": "transaction barrier ops (mbarrier)",
    "USETMAXREG": "register reallocation (setmaxnreg)",
    "STSM": "stmatrix",
    "UTCHMMA": "Blackwell tcgen05.mma (f16/bf16)",
    "UTCQMMA": "Blackwell tcgen05.mma (fp8/fp6/fp4)",
    "UTCIMMA": "Blackwell tcgen05.mma (int8)",
    "UTCOMMA": "Blackwell tcgen05.mma (block-scaled)",
    "UTCBAR": "Blackwell tcgen05.commit",
    "LDTM": "Blackwell tcgen05.ld (tensor memory -> registers)",
    "STTM": "Blackwell tcgen05.st",
}
"""SASS base opcodes worth reporting, with what they prove. Any ``UTC*`` opcode counts as Blackwell tcgen05."""
