"""2025-format solutions (issue 20, item 7): `--legacy` evaluates a value-returning solution that allocates its
outputs and returns a dict of them, instead of rejecting it. In process (typer's CliRunner), on CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fibserve.cli import app
from fibserve.trace.trace_set import TraceSet
from typer.testing import CliRunner

KERNELS = Path(__file__).resolve().parent / "kernels"
LEGACY_ROOT = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "flashinfer-trace-2025"

pytestmark = pytest.mark.slow


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_check_refuses_a_2025_triton_solution_without_legacy_and_accepts_it_with_it():
    kernel = str(KERNELS / "legacy_add_dict.py")
    refused = _invoke("check", kernel, "--definition", "vector_add_f32", "--json")
    assert refused.exit_code == 1
    assert any("run" in line and "3" in line for line in json.loads(refused.stdout)["abi"])
    accepted = _invoke("check", kernel, "--definition", "vector_add_f32", "--legacy", "--json")
    assert accepted.exit_code == 0, accepted.stdout
    assert json.loads(accepted.stdout)["abi"] == []


def test_a_2025_triton_solution_returning_a_dict_passes_with_legacy():
    result = _invoke("evaluate", str(KERNELS / "legacy_add_dict.py"), "--definition", "vector_add_f32",
                     "--workload", "1e6b0d78", "--device", "cpu", "--legacy", "--json")  # fmt: skip
    report = json.loads(result.stdout)
    assert result.exit_code == 0, report
    assert [t["evaluation"]["status"] for t in report["traces"]] == ["PASSED"]


def test_a_2025_python_solution_on_the_public_2025_gemm_passes_with_legacy(tmp_path: Path):
    if not LEGACY_ROOT.is_dir():
        pytest.skip("the public 2025 snapshot is not at ../shared/data on this machine")
    solution = {  # the 2025 layout: no destination_passing_style, a capitalised language
        "name": "gemm_n_4096_k_4096_torch_dict",
        "definition": "gemm_n_4096_k_4096",
        "author": "fibserve tests",
        "spec": {
            "language": "Python",
            "target_hardware": ["B200"],
            "dependencies": ["torch"],
            "entry_point": "main.py::run",
        },
        "sources": [{"path": "main.py", "content": (KERNELS / "legacy_gemm_dict.py").read_text()}],
    }
    path = tmp_path / "solution.json"
    path.write_text(json.dumps(solution))
    with pytest.warns(UserWarning):
        workloads = TraceSet.load(LEGACY_ROOT, migrate_legacy=True).workloads_for("gemm_n_4096_k_4096")
    smallest = min(workloads, key=lambda w: w.axes["M"])
    result = _invoke("evaluate", "--solution", str(path), "--definition", "gemm_n_4096_k_4096",
                     "--local", str(LEGACY_ROOT), "--workload", smallest.uuid, "--device", "cpu", "--legacy",
                     "--json")  # fmt: skip
    report = json.loads(result.stdout)
    assert result.exit_code == 0, report
    (trace,) = report["traces"]
    assert trace["evaluation"]["status"] == "PASSED"
    assert trace["evaluation"]["correctness"]["max_absolute_error"] == 0.0
