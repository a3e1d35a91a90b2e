"""What FIBServe reads out of tool output: ncu's raw CSV (``digest``) and compute-sanitizer's findings.

The texts are written in the tools' formats (ncu ``--csv --page raw --print-metric-instances details``;
compute-sanitizer's ``=========`` reports); the GPU tests in tests/fibserve/serve/test_serve_evidence_gpu.py run
the real tools.
"""

from __future__ import annotations

from pathlib import Path

from fibserve.tools.ncu import kernel_names, ncu_argv
from fibserve.tools.ncu_digest import DIGEST_METRICS, csv_rows, executed_opcodes, instances, summary
from fibserve.tools.sanitizer import MAX_FINDINGS, findings

HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum",'
    '"sass__inst_executed_per_opcode","sm__maximum_warps_per_active_cycle_pct",'
    '"sm__throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active",'
    '"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",'
    '"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",'
    '"smsp__average_warps_issue_stalled_selected_per_issue_active.ratio",'
    '"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"'
)
UNITS = '"","","","","","","","","","","","%","ns","inst","%","%","%","ratio","ratio","ratio","ratio"'
GEMM_ROW = (
    '"0","4242","python3","localhost","gemm_kernel(CUtensorMap, CUtensorMap, __nv_bfloat16 *, int)","1","7",'
    '"(384, 1, 1)","(132, 1, 1)","0","9.0","41.52","1,234,567",'
    '"4,241,000 (HGMMA.64x256x16.F32.BF16: 40,960; UTMALDG.2D: 2,560; SYNCS.ARRIVE.TRANS64.A1T0: 1,560; '
    'IMAD: 4,195,920)","18.75","71.30","18.62","0.81","2.12","1","0.40"'
)
EPILOGUE_ROW = (
    '"1","4242","python3","localhost","epilogue(float *)","1","7","(256, 1, 1)","(8, 1, 1)","0","9.0","3.1","5,000",'
    '"900 (IMAD: 800; STG.E: 100)","100","1.2","40.0","0","0.3","1","0.1"'
)
NCU_OUTPUT = "\n".join([
    "==PROF== Connected to process 4242 (/usr/bin/python3)",
    'FIBSERVE_RUNNER {"ok": true}',
    "==PROF== Disconnected from process 4242",
    HEADER, UNITS, GEMM_ROW, EPILOGUE_ROW,
])  # fmt: skip


def test_instanced_cells_give_one_count_per_opcode() -> None:
    assert instances("30 (HGMMA: 10; IMAD: 20)") == {"HGMMA": 10, "IMAD": 20}
    assert instances("1,024 (UTMALDG.2D: 1,024)") == {"UTMALDG.2D": 1024}
    assert instances("HGMMA: 10; IMAD: 20") == {"HGMMA": 10, "IMAD": 20}
    assert instances("n/a") == {} and instances("") == {} and instances("1,234") == {}


def test_executed_opcodes_are_summed_by_base_opcode_over_the_kernels() -> None:
    rows = csv_rows(NCU_OUTPUT)
    assert [row["Kernel Name"].split("(")[0] for row in rows] == [
        "gemm_kernel",
        "epilogue",
    ]  # the units row dropped
    assert executed_opcodes(rows) == {
        "HGMMA": 40_960,
        "IMAD": 4_196_720,
        "STG": 100,
        "SYNCS": 1_560,
        "UTMALDG": 2_560,
    }
    assert kernel_names(NCU_OUTPUT) == [row["Kernel Name"] for row in rows]


def test_a_table_the_candidate_prints_while_it_runs_is_not_read() -> None:
    forged = GEMM_ROW.replace("HGMMA.64x256x16.F32.BF16: 40,960", "HGMMA.64x256x16.F32.BF16: 999,999")
    honest_simt = EPILOGUE_ROW
    output = "\n".join([
        "==PROF== Connected to process 4242 (/usr/bin/python3)",
        HEADER, UNITS, forged,  # printed by the candidate to the same stdout, before its process ended
        'FIBSERVE_RUNNER {"ok": true}',
        "==PROF== Disconnected from process 4242",
        HEADER, UNITS, honest_simt,
    ])  # fmt: skip
    assert executed_opcodes(csv_rows(output)) == {"IMAD": 800, "STG": 100}


def test_the_summary_is_of_the_longest_kernel_with_its_top_stalls() -> None:
    digest = summary(csv_rows(NCU_OUTPUT))
    assert digest == {
        "kernel": "gemm_kernel(CUtensorMap, CUtensorMap, __nv_bfloat16 *, int)",
        "kernels_profiled": 2,
        "duration_ms": 1.234567,
        "sol_compute_pct": 71.3,
        "sol_memory_pct": 41.52,
        "achieved_occupancy_pct": 18.62,
        "theoretical_occupancy_pct": 18.75,
        "top_stalls": [["long_scoreboard", 2.12], ["barrier", 0.81], ["wait", 0.4]],
    }  # fmt: skip  ("selected" is issuing, not a stall)
    assert summary([]) is None and csv_rows("no csv here") == []


def test_a_digest_run_asks_ncu_for_raw_csv_and_the_digest_metrics() -> None:
    argv = ncu_argv(
        Path("/opt/ncu"),
        Path("/tmp/r.json"),
        ncu_set=None,
        sections=[],
        metrics=["a.sum"],
        page="details",
        digest=True,
    )
    joined = " ".join(argv)
    assert (
        "--csv --page raw --print-units base --print-metric-instances details" in joined
        and "details --page" not in joined
    )
    assert "--metrics " + ",".join(["a.sum", *DIGEST_METRICS]) in joined
    plain = " ".join(
        ncu_argv(Path("/opt/ncu"), Path("/tmp/r.json"), ncu_set=None, sections=[], metrics=[], page="details")
    )
    assert "--csv" not in plain and "--page details" in plain and "--metrics" not in plain


MEMCHECK = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at vector_add_kernel(const float *, const float *, float *, long)+0x1b0 in /tmp/fibserve-build/x/kernel.cu:10
=========     by thread (0,0,0) in block (4,0,0)
=========     Address 0x7f2a4e201000 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f2a4e200000 of size 4096 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f0a1] in libcuda.so.1
=========
========= Invalid __global__ write of size 4 bytes
=========     at vector_add_kernel(const float *, const float *, float *, long)+0x1b0 in /tmp/fibserve-build/x/kernel.cu:10
=========     by thread (1,0,0) in block (4,0,0)
=========     Address 0x7f2a4e201004 is out of bounds
=========
========= Error: Race reported between Write access at reduce(float *)+0x110 in /tmp/b/kernel.cu:3
=========     and Read access at reduce(float *)+0x160 in /tmp/b/helpers.cuh:2 [1024 hazards]
=========
========= ERROR SUMMARY: 3 errors
"""
SOURCES = {
    "kernel.cu": "#define OVERRUN 64\n\n__shared__ float s[32];\n"
    + "\n" * 6
    + "  if (i < n + OVERRUN) z[i] = x[i % n];\n",
    "helpers.cuh": "// helpers\nfloat t = s[threadIdx.x + 1];\n",
}


def test_memcheck_findings_name_the_source_line() -> None:
    write, race = findings(MEMCHECK, SOURCES)
    assert write.message == "Invalid __global__ write of size 4 bytes" and write.count == 2
    (where,) = write.locations
    assert (where.file, where.line, where.source) == (
        "kernel.cu",
        10,
        "if (i < n + OVERRUN) z[i] = x[i % n];",
    )
    assert where.function == "vector_add_kernel(const float *, const float *, float *, long)"
    assert write.thread == "thread (0,0,0) in block (4,0,0)"
    assert write.details == [
        "Address 0x7f2a4e201000 is out of bounds",
        "and is 1 bytes after the nearest allocation at 0x7f2a4e200000 of size 4096 bytes",
    ]  # the host backtrace is left out
    assert [(p.file, p.line, p.source) for p in race.locations] == [
        ("kernel.cu", 3, "__shared__ float s[32];"), ("helpers.cuh", 2, "float t = s[threadIdx.x + 1];")
    ]  # fmt: skip


def test_a_file_that_is_not_the_solutions_is_named_as_printed_and_findings_are_bounded() -> None:
    text = "\n".join(
        f"========= Invalid __shared__ read of size 4 bytes\n=========     at f+0x10 in /usr/include/x{i}.h:{i + 1}"
        for i in range(MAX_FINDINGS + 5)
    )
    found = findings(text, SOURCES)
    assert len(found) == MAX_FINDINGS
    assert (found[0].locations[0].file, found[0].locations[0].source) == ("/usr/include/x0.h", None)
    assert findings("no sanitizer output", SOURCES) == []
