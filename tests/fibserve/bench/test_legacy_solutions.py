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


def _o3_style(tmp_path: Path, build_commands: list[str]) -> Path:
    """A 2025 Triton solution shaped like the public o3 GEMM: capitalised language, ``build_commands`` in its spec."""
    solution = {
        "name": "add_o3_style",
        "definition": "vector_add_f32",
        "author": "fibserve tests",
        "spec": {"language": "Triton", "target_hardware": ["B200"], "entry_point": "main.py::run",
                 "build_commands": build_commands},
        "sources": [{"path": "main.py", "content": (KERNELS / "legacy_add_dict.py").read_text()}],
    }  # fmt: skip
    path = tmp_path / "solution.json"
    path.write_text(json.dumps(solution))
    return path


def test_an_empty_build_commands_is_accepted_and_a_real_one_refused_in_one_sentence(tmp_path: Path):
    """Before: `fibserve check --legacy` refused the public o3 Triton GEMM with pydantic's raw dump
    ("Extra inputs are not permitted") for its `"build_commands": []`."""
    accepted = _invoke("check", str(_o3_style(tmp_path, [])), "--definition", "vector_add_f32", "--legacy")
    assert accepted.exit_code == 0, accepted.output
    assert "fibserve: legacy migration: empty spec.build_commands dropped" in accepted.output
    assert "LegacyMigrationWarning" not in accepted.output and "warnings.warn" not in accepted.output
    refused = _invoke(
        "check", str(_o3_style(tmp_path, ["make"])), "--definition", "vector_add_f32", "--legacy"
    )
    assert refused.exit_code == 2
    assert "spec.build_commands ['make'] cannot be honoured" in refused.output
    assert "validation error" not in refused.output and "https://errors.pydantic.dev" not in refused.output


def test_an_invalid_solution_json_gets_one_line_per_problem_and_the_legacy_hint(tmp_path: Path):
    refused = _invoke("check", str(_o3_style(tmp_path, [])), "--definition", "vector_add_f32")
    assert refused.exit_code == 2
    assert "spec.build_commands: Extra inputs are not permitted" in refused.output
    assert "pass --legacy" in refused.output and "https://errors.pydantic.dev" not in refused.output


def test_a_legacy_root_read_without_legacy_names_the_flag():
    """Before: `fibserve evaluate` on the 2025 snapshot without --legacy said "unknown definition ... (0
    definitions)" with no hint (only `fibserve validate` gave one)."""
    if not LEGACY_ROOT.is_dir():
        pytest.skip("the public 2025 snapshot is not at ../shared/data on this machine")
    kernel = str(KERNELS / "legacy_gemm_dict.py")
    evaluated = _invoke("evaluate", kernel, "--definition", "gemm_n_4096_k_4096", "--local", str(LEGACY_ROOT),
                        "--device", "cpu")  # fmt: skip
    assert evaluated.exit_code == 2
    assert (
        "looks like the 2025 FlashInfer Trace format" in evaluated.output and "--legacy" in evaluated.output
    )
    listed = _invoke("definitions", str(LEGACY_ROOT))
    assert "hint:" in listed.output and "--legacy" in listed.output
