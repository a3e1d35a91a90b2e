"""`fibserve evaluate` as a user runs it: a real subprocess, the bundled trace set, JSON out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parent / "kernels"
FIBSERVE = str(Path(sys.executable).parent / "fibserve")


def _run(*args: str, timeout: float = 240, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [FIBSERVE, "evaluate", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.mark.slow
def test_evaluate_triton_kernel_on_cpu_prints_the_report_as_json():
    result = _run(
        str(KERNELS / "add_correct.py"),
        "--definition",
        "vector_add_f32",
        "--workload",
        "1e6b0d78",
        "--device",
        "cpu",
        "--json",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["executed"] is True and report["task_error"] is None
    assert [t["evaluation"]["status"] for t in report["traces"]] == ["PASSED"]
    assert report["traces"][0]["workload"]["uuid"].startswith("1e6b0d78")
    performance = report["traces"][0]["evaluation"]["performance"]
    assert performance["latency_ms"] is None and performance["speedup_factor"] is None  # not measured


def test_unknown_definition_is_a_usage_error_naming_it():
    result = _run(str(KERNELS / "add_correct.py"), "--definition", "no_such_definition", timeout=120)
    assert result.returncode == 2
    assert (
        "unknown definition 'no_such_definition' (86 definitions; list them with `fibserve definitions`)"
        in (result.stderr)
    )


def test_misspelled_definition_suggests_the_close_name():
    result = _run(str(KERNELS / "add_correct.py"), "--definition", "rmsnorm_f3", timeout=120)
    assert result.returncode == 2
    assert "unknown definition 'rmsnorm_f3'; did you mean 'rmsnorm_f32'?" in result.stderr
    assert "Traceback" not in result.stderr


def test_cuda_device_without_a_gpu_is_one_line_and_exit_2():
    # CUDA_VISIBLE_DEVICES="" hides every GPU, so this is "a machine without a GPU" on GPU hosts too.
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    result = _run(
        str(KERNELS / "add_correct.py"), "--definition", "vector_add_f32", "--device", "cuda:0", env=env
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "fibserve evaluate: no CUDA device is visible here; use --device cpu (Triton float32 runs under the "
        "interpreter, CUDA candidates get static analysis only)"
    ]


def test_malformed_device_is_a_usage_error():
    result = _run(str(KERNELS / "add_correct.py"), "--definition", "vector_add_f32", "--device", "gpu0")
    assert result.returncode == 2 and "unknown device 'gpu0': use cpu or cuda:N" in result.stderr


@pytest.mark.slow
def test_failure_lines_render_markup_and_escape_the_candidates_text(tmp_path: Path):
    kernel = tmp_path / "add[bold]x.py"
    kernel.write_text('def run(x, y, z):\n    raise RuntimeError("[red]boom[/red] from the candidate")\n')
    result = _run(
        str(kernel),
        *("--definition", "vector_add_f32", "--workload", "all", "--device", "cpu"),
        *("--language", "python"),
        env={**os.environ, "COLUMNS": "200", "TERM": "dumb"},
    )
    assert result.returncode == 1, result.stderr[-3000:]
    out = result.stdout
    # Our markup is rendered (no literal tags); the candidate's own brackets are printed as written.
    assert "fea76944 RUNTIME_ERROR: " in out and "[bold]fea76944" not in out
    assert "RuntimeError: [red]boom[/red] from the candidate" in out
    # The same traceback on every workload is printed once, then the other workloads are named.
    assert out.count("RuntimeError: [red]boom[/red] from the candidate") == 1, out
    assert "same error on 2 more workloads: 55c949d1 RUNTIME_ERROR, 1e6b0d78 RUNTIME_ERROR" in out
    assert "add[bold]x on vector_add_f32" in out
    assert "PydanticSerializationUnexpectedValue" not in result.stderr


def test_unknown_workload_is_a_usage_error():
    result = _run(
        str(KERNELS / "add_correct.py"), "--definition", "vector_add_f32", "--workload", "zzzz", timeout=120
    )
    assert result.returncode == 2 and "zzzz" in result.stderr


def test_kernel_and_solution_are_exclusive():
    result = _run("--definition", "vector_add_f32", timeout=120)
    assert result.returncode == 2 and "KERNEL or --solution" in result.stderr


@pytest.mark.slow
def test_a_narrow_terminal_folds_the_table_instead_of_cutting_values():
    result = _run(
        str(KERNELS / "add_wrong.py"),
        *("--definition", "vector_add_f32", "--workload", "all", "--device", "cpu"),
        env={**os.environ, "COLUMNS": "60", "TERM": "dumb"},
    )
    assert result.returncode == 1, result.stderr[-3000:]
    table = result.stdout.split("\n\n")[0]
    assert "INCORRECT_NUMERICAL" in result.stdout  # the failure line below the table names it whole
    assert "…" not in table, table
    for uuid, axes in (("fea76944", "N=1024"), ("55c949d1", "N=65536"), ("1e6b0d78", "N=1000")):
        assert uuid in table and axes in table, table  # a row's identity is never folded


@pytest.mark.nvcc
def test_cuda_on_cpu_prints_the_static_analysis_as_check_does():
    from fibserve.cli.offline import find_definition
    from fibserve.cli.tables import print_analysis
    from fibserve.datasets import load_trace_set
    from fibserve.static_analysis import check, solution_from_path
    from rich.console import Console

    kernel = KERNELS / "gemm_naive.cu"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TERM": "dumb"}
    env.pop("COLUMNS", None)  # piped: evaluate prints 160 columns wide
    result = _run(str(kernel), "--definition", "gemm_n7168_k5120", "--device", "cpu", env=env)
    assert result.returncode == 3, result.stdout + result.stderr[-3000:]
    assert "NOT EXECUTED" in result.stdout

    definition = find_definition(load_trace_set(strict=False), "gemm_n7168_k5120")
    analysis = check(solution_from_path(kernel, definition.name), definition=definition)
    console = Console(record=True, width=160)
    print_analysis(analysis, console)
    expected = [line for line in console.export_text().splitlines() if not line.startswith("timings:")]
    assert any("PTX families" in line for line in expected) and any("SASS from" in line for line in expected)
    printed = result.stdout.splitlines()
    missing = [line for line in expected if line not in printed]
    assert not missing, result.stdout
