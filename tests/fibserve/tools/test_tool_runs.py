"""compute-sanitizer and ncu runs: the candidate runner (for real, on CPU), commands, verdicts, time limits.

The tools themselves need a GPU; the tests marked ``gpu`` run them on the H200. Everything around them (the
runner that loads and calls the candidate, the process-group kill, parsing, refusals) runs here for real.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fibserve.datasets import default_root
from fibserve.tools.jobs import CandidateJob
from fibserve.tools.ncu import ProfilerUnavailable, clean_report, kernel_names, ncu_argv, run_profile
from fibserve.tools.process import (
    load_paths,
    prepare_candidate,
    run_tool,
    runner_argv,
    tool_install_dirs,
    write_request,
)
from fibserve.tools.runner import runner_request
from fibserve.tools.sanitizer import (
    ERROR_EXIT_CODE,
    SanitizerUnavailable,
    clean_output,
    error_count,
    run_sanitizer,
    sanitizer_argv,
    verdict,
)
from fibserve.trace import Solution
from fibserve.trace.trace_set import TraceSet
from sandbox_probes import processes_with, wait_until_gone

TRITON_ADD = """import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(z_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def run(x, y, z):
    _add[(triton.cdiv(x.numel(), 256),)](x, y, z, x.numel(), BLOCK=256)
"""


@pytest.fixture(scope="module")
def trace_set() -> TraceSet:
    return TraceSet.load(default_root())


def _solution(body: str, language: str = "triton") -> Solution:
    return Solution.model_validate(
        {
            "name": "tool test",
            "definition": "vector_add_f32",
            "author": "tests",
            "spec": {"language": language, "target_hardware": ["cpu"], "entry_point": "kernel.py::run"},
            "sources": [{"path": "kernel.py", "content": body}],
        }
    )


def _run_candidate(trace_set: TraceSet, tmp_path: Path, body: str, calls: int = 2) -> tuple:
    definition = trace_set.definition("vector_add_f32")
    workload = trace_set.workloads_for("vector_add_f32")[0]
    prepared = prepare_candidate(definition, _solution(body), device="cpu", timeout_s=120)
    assert prepared.load is not None, (prepared.not_built, prepared.infrastructure_error)
    request = runner_request(
        definition, workload, prepared.load, device="cpu", calls=calls, roots=[default_root()]
    )
    path = write_request(tmp_path, "run", request)
    readable = [path, *load_paths(prepared.load), default_root()]
    return run_tool(runner_argv(path), readable=readable, device="cpu", timeout_s=240)


def test_the_runner_loads_and_calls_a_triton_candidate(trace_set: TraceSet, tmp_path: Path) -> None:
    result = _run_candidate(trace_set, tmp_path, TRITON_ADD)
    assert result.exit_code == 0, result.output
    assert result.runner == {"ok": True, "calls": 2, "device": "cpu", "workload": result.runner["workload"]}
    assert not result.timed_out


def test_a_failing_candidate_makes_the_runner_exit_3_with_its_error(
    trace_set: TraceSet, tmp_path: Path
) -> None:
    body = TRITON_ADD + "\n\ndef run(x, y, z):\n    raise ValueError('planted failure')\n"
    result = _run_candidate(trace_set, tmp_path, body, calls=1)
    assert result.exit_code == 3
    assert (
        result.runner is not None and not result.runner["ok"] and "planted failure" in result.runner["error"]
    )
    assert "Traceback" in result.output


def test_a_run_past_its_limit_is_killed_with_everything_it_started() -> None:
    import sys
    import threading

    marker = f"fibserve-tool-orphan-{time.monotonic_ns()}"
    # a grandchild in a session of its own (setsid) escapes a process-group kill, not the PID namespace
    script = f"setsid {sys.executable} -c 'import time; time.sleep(60)' {marker} & sleep 60"
    results = []
    thread = threading.Thread(
        target=lambda: results.append(run_tool(["/bin/sh", "-c", script], device="cpu", timeout_s=4.0))
    )
    thread.start()
    deadline = time.monotonic() + 4.0
    while not processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    seen = processes_with(marker)
    thread.join(60)
    assert seen, "the orphan never started, so the test proves nothing"
    assert results[0].timed_out and results[0].exit_code is None
    assert wait_until_gone(marker) == []


def test_a_result_line_nested_too_deep_to_parse_is_no_runner_result() -> None:
    """The candidate shares the runner's stdout, so it can print the result line itself: nested deeper than
    the JSON parser recurses, it raised RecursionError (not ValueError) out of the trusted process's reading."""
    import sys

    from fibserve.tools.runner import RESULT_PREFIX

    script = f"print({RESULT_PREFIX!r} + '[' * 200_000 + ']' * 200_000)"
    result = run_tool([sys.executable, "-c", script], device="cpu", timeout_s=60)
    assert result.exit_code == 0 and result.output.startswith(RESULT_PREFIX + "[[[")
    assert result.runner is None


def test_sanitizer_command_makes_the_verdict_the_tools(tmp_path: Path) -> None:
    argv = sanitizer_argv(Path("/opt/cuda/bin/compute-sanitizer"), "racecheck", tmp_path / "r.json")
    assert argv[:3] == ["/opt/cuda/bin/compute-sanitizer", "--tool", "racecheck"]
    assert argv[argv.index("--error-exitcode") + 1] == str(ERROR_EXIT_CODE)
    assert argv[-3:] == ["-m", "fibserve.tools.runner", str(tmp_path / "r.json")]
    assert verdict(0, False) == "clean"
    assert verdict(ERROR_EXIT_CODE, False) == "errors"
    assert verdict(3, False) == "crashed"
    assert verdict(None, True) == "timeout"


def test_sanitizer_output_is_trimmed_and_counted() -> None:
    text = "\n".join(
        [
            "========= COMPUTE-SANITIZER",
            "========= Invalid __global__ write of size 4 bytes",
            "=========     at add_kernel(const float *, const float *, float *, long)+0x90 in kernel.cu:12",
            "=========",
            "=========",
            "========= ERROR SUMMARY: 3 errors",
            'FIBSERVE_RUNNER {"ok": true}',
        ]
    )
    cleaned = clean_output(text)
    assert "COMPUTE-SANITIZER" not in cleaned and "FIBSERVE_RUNNER" not in cleaned
    assert "kernel.cu:12" in cleaned and cleaned.count("=========\n") <= 1
    assert error_count(text) == 3 and error_count("no summary") is None
    # the candidate shares the tool's output: a summary of 4,400 digits made int() raise (no count, no error)
    assert error_count(f"========= ERROR SUMMARY: {'9' * 4400} errors\n") is None


def test_ncu_command_profiles_only_the_measured_call(tmp_path: Path) -> None:
    argv = ncu_argv(
        Path("/usr/local/cuda/bin/ncu"),
        tmp_path / "p.json",
        ncu_set="full",
        sections=["SpeedOfLight", "MemoryWorkloadAnalysis"],
        metrics=["sm__inst_executed.sum", "dram__bytes_read.sum"],
        page="raw",
    )
    joined = " ".join(argv)
    assert "--clock-control none" in joined
    assert "--nvtx --nvtx-include fibserve_measured/" in joined
    assert "--set full" in joined and "--page raw" in joined
    assert "--section SpeedOfLight --section MemoryWorkloadAnalysis" in joined
    assert "--metrics sm__inst_executed.sum,dram__bytes_read.sum" in joined


def test_ncu_report_names_the_kernels() -> None:
    text = "\n".join(
        [
            "==PROF== Connected to process 4242 (/usr/bin/python3.11)",
            '==PROF== Profiling "add_kernel": 0%....50%....100% - 8 passes',
            "==PROF== Disconnected from process 4242",
            "[4242] python3.11@127.0.0.1",
            "  add_kernel(const float *, const float *, float *, long) (4, 1, 1)x(256, 1, 1), Context 1, Stream 7, Device 0, CC 9.0",
            "    Section: GPU Speed Of Light Throughput",
        ]
    )
    assert kernel_names(text) == ["add_kernel(const float *, const float *, float *, long)"]
    assert kernel_names('==PROF== Profiling "my_kernel": 0%..100% - 1 pass') == ["my_kernel"]
    report = clean_report(text)
    assert "Connected" not in report and "passes" not in report and "Speed Of Light" in report


def test_tools_refuse_clearly_when_absent_or_without_a_gpu(trace_set: TraceSet, tmp_path: Path) -> None:
    common = {
        "solution": _solution(TRITON_ADD),
        "definition": trace_set.definition("vector_add_f32"),
        "workloads": trace_set.workloads_for("vector_add_f32")[:1],
        "catalog": None,
        "timeout_s": 10,
        "scratch": tmp_path,
    }
    on_gpu = CandidateJob(device="cuda:0", **common)
    with pytest.raises(SanitizerUnavailable, match="compute-sanitizer not available on this server"):
        run_sanitizer(on_gpu, tool_path=None, tools=["memcheck"])
    with pytest.raises(SanitizerUnavailable, match="needs a CUDA GPU"):
        run_sanitizer(CandidateJob(device="cpu", **common), tool_path=Path("/bin/true"), tools=["memcheck"])
    with pytest.raises(ProfilerUnavailable, match=r"ncu .* not available on this server"):
        run_profile(on_gpu, tool_path=None, ncu_set=None, sections=[], metrics=[], page="details")


FAKE_TOOL = """#!{python}
# Stand-in for compute-sanitizer / ncu on a machine without a GPU: runs the candidate runner it was given
# (everything from the interpreter on) and prints what the real tool prints around it.
import os, subprocess, sys

args = sys.argv[1:]
start = args.index("-m") - 1
print({before!r}, flush=True)
print("torch caching allocator off:", os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING"), flush=True)
code = subprocess.call(args[start:])
print({after!r}, flush=True)
if code == 0 and {finding!r} and "--error-exitcode" in args:
    sys.exit(int(args[args.index("--error-exitcode") + 1]))
sys.exit(code)
"""


class _Roots:
    roots = (default_root(),)


PYTHON_ADD = "def run(x, y, z):\n    z.copy_(x + y)\n"
"""A Python candidate: the stand-in tool tests check the plumbing, so skip the Triton interpreter's cost."""


def _fake_tool(directory: Path, before: str, after: str, finding: bool = False) -> Path:
    import sys

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "fake-tool"
    path.write_text(FAKE_TOOL.format(python=sys.executable, before=before, after=after, finding=finding))
    path.chmod(0o755)
    return path


def _cpu_job(trace_set: TraceSet, scratch: Path) -> CandidateJob:
    """The Python vector-add candidate on the first vector_add_f32 workload, on the CPU."""
    return CandidateJob(
        solution=_solution(PYTHON_ADD, "python"),
        definition=trace_set.definition("vector_add_f32"),
        workloads=trace_set.workloads_for("vector_add_f32")[:1],
        catalog=_Roots(),
        device="cpu",
        timeout_s=240,
        scratch=scratch,
    )


def test_sanitize_flow_end_to_end_with_a_stand_in_tool(trace_set: TraceSet, tmp_path: Path) -> None:
    """prepare -> request -> tool process -> runner -> verdict, with a stand-in for compute-sanitizer."""
    from fibserve.tools.sanitizer import sanitize_candidate

    scratch = tmp_path / "scratch"  # the tool must live where the sandbox can see it
    job = _cpu_job(trace_set, scratch)
    clean_tool = _fake_tool(
        tmp_path / "tools", "========= COMPUTE-SANITIZER", "========= ERROR SUMMARY: 0 errors"
    )
    (clean,) = sanitize_candidate(job, executable=clean_tool, tools=["memcheck"])
    assert clean.verdict == "clean" and clean.passed and clean.error_count == 0, clean.output
    assert "COMPUTE-SANITIZER" not in clean.output
    assert "torch caching allocator off: 1" in clean.output  # so memcheck sees each tensor's own bounds
    bad_tool = _fake_tool(
        tmp_path / "tools2",
        "========= Invalid __global__ write of size 4 bytes",
        "========= ERROR SUMMARY: 1 error",
        True,
    )
    (bad,) = sanitize_candidate(job, executable=bad_tool, tools=["memcheck"])
    assert bad.verdict == "errors" and not bad.passed and bad.exit_code == ERROR_EXIT_CODE
    assert bad.error_count == 1 and "Invalid __global__ write" in bad.output
    assert not scratch.exists()  # a task's run directory is removed afterwards


def test_profile_flow_end_to_end_with_a_stand_in_tool(trace_set: TraceSet, tmp_path: Path) -> None:
    from fibserve.tools.ncu import profile_candidate

    # as ncu does: the report once the profiled process has gone
    header = (
        "==PROF== Disconnected from process 1\n"
        "  _add (1, 1, 1)x(1024, 1, 1), Context 1, Stream 7, Device 0, CC 9.0\n    Section: GPU Speed Of Light Throughput"
    )
    tool = _fake_tool(tmp_path / "tools", "==PROF== Connected to process 1", header)
    job = _cpu_job(trace_set, tmp_path / "scratch")
    (run,) = profile_candidate(
        job, executable=tool, ncu_set=None, sections=["SpeedOfLight"], metrics=[], page="details"
    )
    assert run.ok and run.exit_code == 0, (run.note, run.report)
    assert run.kernels == ["_add"] and "Speed Of Light" in run.report and "Connected" not in run.report


def test_a_report_header_the_candidate_printed_names_no_kernel() -> None:
    """The candidate's output comes before ncu's last `Disconnected` line; a header it printed made a run in
    which ncu profiled nothing read as a profile of `my_fast_wgmma_kernel`."""
    forged = "  my_fast_wgmma_kernel (1, 1, 1)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 9.0"
    progress = '==PROF== Profiling "my_fast_wgmma_kernel": 0%..100% - 1 pass'
    assert kernel_names(f"{forged}\n{progress}\n==PROF== Disconnected from process 4242\n") == []
    table = (
        '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n"0","my_fast_wgmma_kernel","a","","1"'
    )
    assert kernel_names(f"{table}\n==PROF== Disconnected from process 4242\n") == []  # nothing after it
    # ncu killed before it finished: its progress lines are all there is
    assert kernel_names(f"==PROF== Connected to process 4242\n{progress}\n") == ["my_fast_wgmma_kernel"]


def test_lines_the_candidate_printed_are_parsed_in_linear_time() -> None:
    """One 120 KB line each held the trusted process 20 to 38 s (about a second per 20 KB, quadratic)."""
    import time

    from fibserve.tools.sanitizer import findings

    cases = [
        (clean_report, '==PROF== Profiling "' + "1" * 120_000),
        (kernel_names, "a" + " " * 120_000 + "x"),
        (lambda text: findings(text, {}), "========= X " + "at " * 40_000),
    ]
    for parse, line in cases:
        start = time.perf_counter()
        parse(line + "\n")
        assert time.perf_counter() - start < 5.0, parse


def test_ncu_launcher_sees_the_nsight_compute_install(tmp_path: Path) -> None:
    """The ``ncu`` launcher of a CUDA toolkit looks for ``<toolkit>/nsight-compute*``: a sandboxed run must
    see that folder too (on the H200 the profile tests failed with "nsight-compute directory is not found")."""
    toolkit = tmp_path / "cuda-13.0"
    (toolkit / "bin").mkdir(parents=True)
    (toolkit / "nsight-compute-2025.3.0").mkdir()
    (toolkit / "extras").mkdir()
    ncu = toolkit / "bin" / "ncu"
    ncu.write_text("#!/bin/sh\n")
    dirs = tool_install_dirs(ncu)
    assert toolkit / "bin" in dirs and toolkit / "nsight-compute-2025.3.0" in dirs
    assert toolkit / "extras" not in dirs
