"""ptxas -v log parsing."""

from fibserve.analysis.resources import CubinUsage, checked_resources, parse_cubin_usage, parse_ptxas_log

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


USAGE = """\

Resource usage:
 Common:
  GLOBAL:0
 Function _Z6helperv$1:
  REG:0 STACK:0 SHARED:0 LOCAL:0 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function _Z4gemmv:
  REG:168 STACK:24 SHARED:34816 LOCAL:0 CONSTANT[0]:400 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function _Z3addPf:
  REG:12 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:384 TEXTURE:0 SURFACE:0 SAMPLER:0

\tcode for sm_90
\t\tFunction : _Z4gemmv
"""


def test_cuobjdumps_resource_usage_is_read_per_function() -> None:
    helper, gemm, add = parse_cubin_usage(USAGE)
    assert (helper.name, helper.registers, helper.constant_bytes) == ("_Z6helperv$1", 0, 0)
    assert (gemm.name, gemm.registers, gemm.stack_bytes, gemm.shared_bytes, gemm.constant_bytes) == (
        "_Z4gemmv",
        168,
        24,
        34816,
        400,
    )
    assert (add.name, add.registers) == ("_Z3addPf", 12)


def test_a_report_the_cubins_confirm_is_kept_as_ptxas_wrote_it() -> None:
    assert checked_resources(LOG, parse_cubin_usage(USAGE)) == parse_ptxas_log(LOG)
    # a kernel two translation units define is reported twice, and is confirmed by both cubins
    twice = [
        *parse_cubin_usage(USAGE),
        CubinUsage(name="_Z3addPf", registers=12, stack_bytes=0, shared_bytes=0),
    ]
    add_again = LOG[LOG.index("ptxas info    : Compiling entry function '_Z3addPf'") :]
    assert not any(kernel.from_cubin for kernel in checked_resources(LOG + add_again, twice))


def test_lines_imitating_ptxas_are_held_to_the_cubin() -> None:
    """What nvcc's front end prints for `#pragma message("\\nptxas info ...")` before ptxas runs, and the host
    compiler after: a kernel no cubin defines, and a second report of a real one."""
    message = (
        "ptxas info    : Compiling entry function '_Z1xv' for 'sm_90a'\n"
        "ptxas info    : Used 7 registers, used 0 barriers\n"
        "ptxas info    : Compiling entry function '_Z4gemmv' for 'sm_90a'\n"
        "ptxas info    : Function properties for _Z4gemmv\n"
        "    24 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 168 registers, used 9 barriers, 0 bytes smem, 400 bytes cmem[0]\n"
    )
    front_end = f'kernel.cu(3): remark #20200-D: #pragma message: "planted\n{message}"\n'
    host = f"kernel.cu:3:9: note: '#pragma message: planted\n{message}'\n"
    gemm, add = checked_resources(front_end + LOG + host, parse_cubin_usage(USAGE))
    assert [gemm.name, add.name] == ["_Z4gemmv", "_Z3addPf"]
    assert gemm.from_cubin and (gemm.registers, gemm.stack_bytes, gemm.shared_bytes) == (168, 24, 34816)
    assert (gemm.barriers, gemm.spill_store_bytes, gemm.spill_load_bytes, gemm.advisories) == (
        None,
        None,
        None,
        [],
    )
    assert not add.from_cubin and add.registers == 12
    # unchecked, the log's last words win: the planted kernel and its 9 barriers with no spills
    assert [k.name for k in parse_ptxas_log(front_end + LOG + host)] == ["_Z1xv", "_Z4gemmv", "_Z3addPf"]


def test_one_line_that_contradicts_the_cubin_is_enough() -> None:
    planted = LOG + "ptxas info    : Used 100 registers, used 0 barriers\n"  # after add's report: add's now
    _, add = checked_resources(planted, parse_cubin_usage(USAGE))
    assert add.from_cubin and add.registers == 12
    wrong = LOG.replace("Used 12 registers", "Used 13 registers")  # one report, but not the cubin's
    _, add = checked_resources(wrong, parse_cubin_usage(USAGE))
    assert add.from_cubin and add.registers == 12


def test_one_static_kernel_in_two_translation_units_is_two_definitions() -> None:
    """Two reports of `_ZL1kPf` (48 and 8 registers, in the build's order) against two cubins (in theirs): the
    last report's numbers against one cubin's read as a contradiction, and an honest kernel was flagged."""
    report = (
        "ptxas info    : Compiling entry function '_ZL1kPf' for 'sm_90a'\n"
        "ptxas info    : Function properties for _ZL1kPf\n"
        "    {stack} bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used {registers} registers, used 0 barriers\n"
    )
    log = report.format(stack=16, registers=48) + report.format(stack=0, registers=8)
    usage = [
        CubinUsage(name="_ZL1kPf", registers=8, stack_bytes=0, shared_bytes=0),
        CubinUsage(name="_ZL1kPf", registers=48, stack_bytes=16, shared_bytes=0),
    ]
    (kernel,) = checked_resources(log, usage)
    assert not kernel.from_cubin and kernel.spill_store_bytes == 0
    (swapped,) = checked_resources(log, [usage[0], usage[0]])  # one definition's numbers reported twice over
    assert swapped.from_cubin and swapped.arch is None
