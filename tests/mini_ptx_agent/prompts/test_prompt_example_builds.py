"""CI compiles what the model reads: every CUDA example of the prompts and the helper headers, for its target, and
the PTX and SASS show the instructions the pattern is about (not just that nvcc accepted it).

One build per example and target, through FIBServe's build cache; the expectations name PTX families
(fibserve.analysis.ptx), SASS opcodes as cuobjdump prints them (base, or full with modifiers), and PTX text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from mini_ptx_agent.prompts.registry import PROMPTS_DIR
from prompt_builds import DATA, build_example

pytestmark = [pytest.mark.nvcc, pytest.mark.slow]

EXAMPLES = PROMPTS_DIR / "examples"
REGISTER_A_WGMMA = r"wgmma\.mma_async[^;]*\}\s*,\s*\{"
"""A wgmma whose accumulator list is followed by a list of A registers (P or dS fed from registers)."""


@dataclass(frozen=True)
class Expect:
    """What one build must show."""

    path: Path
    arch: str
    ptx_families: frozenset[str] = frozenset()
    sass: frozenset[str] = frozenset()
    sass_absent: frozenset[str] = frozenset()
    ptx_text: tuple[str, ...] = field(default=())
    """Regular expressions the PTX must match."""
    extra_units: tuple[Path, ...] = field(default=())
    """Device-only smoke kernels compiled into the same library (see data/)."""


def expect(
    name: str, arch: str, families: str = "", sass: str = "", absent: str = "", text=(), smoke=()
) -> Expect:
    return Expect(EXAMPLES / name, arch, frozenset(families.split()), frozenset(sass.split()), frozenset(absent.split()),
                  tuple(text), tuple(DATA / s for s in smoke))  # fmt: skip


CUDA_BUILDS = [
    # scaled_add carries the smoke kernels of the helpers no example calls, as second translation units
    expect("scaled_add.cu", "sm_90a", "mapa barrier.cluster", smoke=["sm90_helpers_smoke.cu"]),
    expect("scaled_add.cu", "sm_100a", "tcgen05 setmaxnreg mapa",
           "UTCHMMA.2CTA UTCBAR.2CTA.MULTICAST UTMALDG.2D.MULTICAST UTMASTG.3D USETMAXREG",
           smoke=["sm100_helpers_smoke.cu"]),
    expect("tma_store_transpose.cu", "sm_90a", "cp.async.bulk.tensor mbarrier fence.proxy.async", "UTMALDG.2D UTMASTG.2D"),
    expect("tma_store_transpose.cu", "sm_100a", "cp.async.bulk.tensor mbarrier fence.proxy.async", "UTMALDG.2D UTMASTG.2D"),
    expect("gemm_warp_specialized.cu", "sm_90a", "wgmma.mma_async setmaxnreg elect.sync stmatrix",
           "HGMMA.64x128x16.F32.BF16 UTMALDG.2D UTMASTG.2D USETMAXREG STSM SYNCS"),
    expect("gemm_cluster_multicast.cu", "sm_90a", "wgmma.mma_async barrier.cluster mapa", "HGMMA UTMALDG.2D.MULTICAST"),
    expect("fa3_forward.cu", "sm_90a", "wgmma.mma_async setmaxnreg stmatrix fence.proxy.async",
           "HGMMA.64x128x16.F32.BF16 UTMALDG.3D UTMASTG.3D STSM USETMAXREG", text=[REGISTER_A_WGMMA]),
    expect("fa3_forward_pingpong.cu", "sm_90a", "wgmma.mma_async setmaxnreg stmatrix",
           "HGMMA.64x128x16.F32.BF16 UTMALDG.3D UTMASTG.3D STSM", text=[REGISTER_A_WGMMA, r"\bbar\.arrive\b"]),
    expect("fa3_backward_atomic_dq.cu", "sm_90a", "wgmma.mma_async stmatrix fence.proxy.async",
           "HGMMA.64x64x16.F32.BF16 UTMALDG.3D REDG", text=[REGISTER_A_WGMMA]),
    expect("fa3_backward_dq_kernel.cu", "sm_90a", "wgmma.mma_async", "HGMMA.64x64x16.F32.BF16 UTMALDG.3D",
           absent="REDG RED ATOMG", text=[REGISTER_A_WGMMA]),
    expect("fa4_forward.cu", "sm_100a", "tcgen05 cp.async.bulk.tensor fence.proxy.async",
           "UTCHMMA UTCBAR LDTM.x16 STTM.x16 UTMALDG.3D", absent="HGMMA"),
]  # fmt: skip


@pytest.mark.parametrize("case", CUDA_BUILDS, ids=[f"{c.path.stem}-{c.arch}" for c in CUDA_BUILDS])
def test_example_builds_for_its_target_with_the_pattern_instructions(case: Expect) -> None:
    built = build_example(case.path, case.arch, case.extra_units)
    assert f"-gencode=arch=compute_{case.arch[3:]},code={case.arch}" in " ".join(built.build.command)
    missing = case.ptx_families - set(built.ptx_families)
    assert not missing, f"PTX lacks {sorted(missing)}; has {sorted(built.ptx_families)}"
    found = set(built.sass_opcodes) | set(built.sass_variants)
    assert case.sass <= found, f"SASS lacks {sorted(case.sass - found)}; has {sorted(built.sass_variants)}"
    assert not case.sass_absent & found, f"SASS has {sorted(case.sass_absent & found)}"
    for pattern in case.ptx_text:
        assert re.search(pattern, built.ptx), f"PTX has no match for {pattern!r}"
    assert not re.search(r"[1-9]\d* bytes spill (stores|loads)", built.build.log), built.build.log
