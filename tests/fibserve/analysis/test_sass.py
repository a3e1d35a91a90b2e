"""SASS parsing of cuobjdump output and the server-side cuobjdump lookup."""

from fibserve.analysis.sass import find_cuobjdump, parse_sass

SASS = """
Fatbin elf code:
================
arch = sm_90a
code version = [1,8]

\tcode for sm_90a
\t\tFunction : _Z6kernelv
\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                     /* 0x00000a00ff017b82 */
                                                                              /* 0x000fe20000000800 */
        /*0010*/                   SYNCS.EXCH.64 URZ, [UR4], UR6 ;            /* 0x00000004ff0075b2 */
        /*0020*/               @P0 UTMALDG.2D [UR8], [UR10] ;                 /* 0x00000008000075b4 */
        /*0030*/              @!P1 SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR4], R3 ;
        /*0040*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT ;
        /*0050*/                   UTCHMMA gdesc[UR4], gdesc[UR6], tmem[UR8], tmem[UR10], idesc[UR12], UPT ;
        /*0060*/                   EXIT ;
        /*0070*/                   BRA 0x70;
\t\t..........

\t\tFunction : _Z5otherv
        /*0000*/                   NOP;
"""


def test_opcodes_are_counted_per_kernel() -> None:
    kernels = parse_sass(SASS)
    assert [k.name for k in kernels] == ["_Z6kernelv", "_Z5otherv"]
    first = kernels[0]
    assert first.arch == "sm_90a"
    assert first.instructions == 8
    assert first.opcodes["SYNCS"] == 2 and first.opcodes["UTMALDG"] == 1 and first.opcodes["HGMMA"] == 1
    assert first.variants["HGMMA.64x128x16.F32.BF16"] == 1
    assert first.variants["UTCHMMA"] == 1
    assert "LDC" not in first.variants  # only notable opcodes keep their modifiers
    assert kernels[1].opcodes == {"NOP": 1}


def test_cuobjdump_is_found_on_path_or_in_the_triton_wheel() -> None:
    tool = find_cuobjdump()
    assert tool is None or tool.endswith("cuobjdump")
