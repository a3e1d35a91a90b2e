"""ptxas -v log parsing."""

from fibserve.analysis.resources import parse_ptxas_log

LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z4gemmv' for 'sm_90a'
ptxas info    : Function properties for _Z4gemmv
    24 bytes stack frame, 16 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 33792 bytes smem, 400 bytes cmem[0]
ptxas warning : (C7508) Potential Performance Loss: setmaxnreg ignored; unable to determine register count at entry
ptxas info    : Compile time = 12.000 ms
ptxas info    : Function properties for _Z6helperv
    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z3addPf' for 'sm_90a'
ptxas info    : Function properties for _Z3addPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers, 384 bytes cmem[0]
"""


def test_resources_per_kernel() -> None:
    gemm, add = parse_ptxas_log(LOG)
    assert (gemm.name, gemm.arch, gemm.registers, gemm.barriers) == ("_Z4gemmv", "sm_90a", 168, 1)
    assert (gemm.shared_bytes, gemm.constant_bytes) == (33792, 400)
    assert (gemm.stack_bytes, gemm.spill_store_bytes, gemm.spill_load_bytes) == (24, 16, 8)
    assert len(gemm.advisories) == 1 and "C7508" in gemm.advisories[0]
    assert (add.registers, add.shared_bytes, add.spill_store_bytes, add.advisories) == (12, 0, 0, [])


def test_device_function_properties_are_not_a_kernel() -> None:
    assert [k.name for k in parse_ptxas_log(LOG)] == ["_Z4gemmv", "_Z3addPf"]


def test_the_host_compilers_quotes_of_the_candidates_text_are_not_ptxas_lines() -> None:
    """gcc echoes a `#warning` (and the source line under it) into the same log: it planted kernels and
    register counts, and 4,400 digits made int() raise, which ended the analysis and the binary policy with it."""
    nines = "9" * 4400
    planted = (
        f"kernel.cu:20:2: warning: #warning ptxas info    : Compiling entry function 'x' for 'sm_90a'\n"
        f"   20 | #warning ptxas info    : Compiling entry function 'x' for 'sm_90a'\n"
        f"kernel.cu:21:2: warning: #warning ptxas info    : Used {nines} registers\n"
        f"   21 | #warning ptxas info    : Used {nines} registers\n"
        f"kernel.cu:22:2: warning: #warning ptxas warning : (C7508) planted advisory\n"
        f"   {nines} bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    )
    gemm, add = parse_ptxas_log(planted + LOG)
    assert [k.name for k in (gemm, add)] == ["_Z4gemmv", "_Z3addPf"]
    assert (gemm.registers, gemm.stack_bytes, len(gemm.advisories)) == (168, 24, 1)


def test_a_ptxas_line_with_a_number_too_long_to_be_real_is_not_read() -> None:
    log = f"ptxas info    : Compiling entry function '_Z1kv' for 'sm_90a'\nptxas info    : Used {'9' * 4400} registers\n"
    (kernel,) = parse_ptxas_log(log)
    assert kernel.registers is None
