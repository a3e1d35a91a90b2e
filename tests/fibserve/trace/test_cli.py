"""`fibserve validate` and `fibserve schema` as a user runs them: real subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from trace_helpers import GEMM_DEFINITION, make_root, shared, workload_line


def fibserve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fibserve", *args], capture_output=True, text=True, timeout=120
    )


def test_validate_example_prints_counts_and_exits_0() -> None:
    result = fibserve("validate", str(shared("flashinfer-bench-example")))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "workloads" in result.stdout and "43" in result.stdout
    assert "valid" in result.stdout


def test_validate_legacy_snapshot_json() -> None:
    result = fibserve("validate", "--legacy", "--json", str(shared("flashinfer-trace-2025")))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert report["counts"] == {
        "definitions": 10,
        "solutions": 0,
        "workloads": 223,
        "traces": 301,
        "errors": 0,
        "warnings": 6,
    }
    assert len(report["migrations"]) == 6
    assert report["suggestion"] is None


def test_validate_snapshot_without_legacy_fails_with_files_and_lines() -> None:
    result = fibserve("validate", "--json", str(shared("flashinfer-trace-2025")))
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["counts"]["errors"] > 0
    assert any(p["line"] == 1 and p["path"].endswith("gemm_n_4096_k_4096.jsonl") for p in report["problems"])
    assert "validate it with --legacy" in report["suggestion"]  # the 2025 layout is recognised


def test_validate_broken_root_exits_1_naming_file_and_line(tmp_path: Path) -> None:
    root = make_root(
        tmp_path / "broken",
        definitions={
            "g.json": GEMM_DEFINITION,
            "bad.json": {**GEMM_DEFINITION, "name": "bad", "reference": "x = 1\n"},
        },
        workloads={"g.jsonl": workload_line("w1", 1) + "\n{oops\n" + workload_line("w2", 2) + "\n"},
    )
    result = fibserve("validate", str(root))
    assert result.returncode == 1
    out = " ".join(result.stdout.split())  # rich may wrap long paths
    assert "bad.json" in out and "does not define a module-level function `run`" in out
    assert "g.jsonl:2" in out and "malformed JSON" in out
    assert "invalid: 2 error(s)" in out
    report = json.loads(fibserve("validate", "--json", str(root)).stdout)
    assert report["counts"]["definitions"] == 1 and report["counts"]["workloads"] == 2


def test_validate_bundled_default_set() -> None:
    from fibserve.datasets import default_root

    result = fibserve("validate", "--json", str(default_root()))
    assert result.returncode == 0
    assert json.loads(result.stdout)["counts"]["definitions"] == 86


def test_schema_prints_json_schema_per_kind() -> None:
    everything = json.loads(fibserve("schema").stdout)
    assert set(everything) == {"definition", "workload", "solution", "trace"}
    for schema in everything.values():
        assert schema["type"] == "object" and schema["additionalProperties"] is False
    one = fibserve("schema", "--kind", "workload")
    assert one.returncode == 0 and json.loads(one.stdout) == everything["workload"]
    bad = fibserve("schema", "--kind", "nope")
    assert bad.returncode == 2 and "unknown kind" in bad.stderr


def test_validate_without_roots_uses_dataset_roots(tmp_path: Path) -> None:
    import os

    root = make_root(tmp_path / "r", definitions={"g.json": GEMM_DEFINITION}, workloads={"g.jsonl": "{bad\n"})
    env = {**os.environ, "DATASET_ROOTS": str(root)}
    result = subprocess.run(
        [sys.executable, "-m", "fibserve", "validate", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["roots"] == [str(root)] and report["problems"][0]["line"] == 1


def test_validate_prints_paths_with_brackets_as_written(tmp_path: Path) -> None:
    root = make_root(
        tmp_path / "set[red]x", definitions={"g.json": GEMM_DEFINITION}, workloads={"g.jsonl": "{bad\n"}
    )
    result = fibserve("validate", str(root))
    assert result.returncode == 1
    out = "".join(result.stdout.split())  # rich may wrap long paths
    assert "set[red]x/workloads/g.jsonl:1" in out


def test_validate_a_folder_that_is_not_a_trace_set_fails(tmp_path: Path) -> None:
    (tmp_path / "kernels").mkdir()  # a folder, but none of definitions/, workloads/, solutions/, traces/
    result = fibserve("validate", "--json", str(tmp_path))
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["counts"]["errors"] == 1
    (problem,) = report["problems"]
    assert problem["path"] == str(tmp_path)
    assert problem["message"] == (
        "has none of definitions/, workloads/, solutions/, traces/: is this a trace-set root?"
    )
    human = fibserve("validate", str(tmp_path))
    assert human.returncode == 1 and "invalid: 1 error(s)" in human.stdout


def test_validate_a_root_with_only_definitions_is_a_trace_set(tmp_path: Path) -> None:
    root = make_root(tmp_path / "r", definitions={"g.json": GEMM_DEFINITION})
    result = fibserve("validate", "--json", str(root))
    assert result.returncode == 0, result.stdout
    assert json.loads(result.stdout)["counts"]["definitions"] == 1


def test_definitions_lists_names_and_the_run_signature() -> None:
    from fibserve.datasets import default_root

    result = fibserve("definitions", "--json", str(default_root()))
    assert result.returncode == 0, result.stderr
    listed = {entry["name"]: entry for entry in json.loads(result.stdout)}
    assert len(listed) == 86
    assert listed["mha_bwd_d64_causal"]["baseline"] == "mha_bwd_d64_causal_baseline_cudnn_sdpa_backward"
    assert "Not an FP8 kernel" in listed["fp8_mha_with_lse_d128"]["baseline_description"]
    rmsnorm = listed["rmsnorm_f32"]
    assert rmsnorm["op_type"] == "rmsnorm" and rmsnorm["workloads"] == 3
    assert rmsnorm["signature"] == (
        "run(x: float32[M, H], weight: float32[H], eps: float32 scalar, y: float32[M, H] (output))"
    )
    assert [(a["name"], a["role"], a["shape"]) for a in rmsnorm["arguments"]] == [
        ("x", "input", ["M", "H"]),
        ("weight", "input", ["H"]),
        ("eps", "input", None),
        ("y", "output", ["M", "H"]),
    ]
    human = fibserve("definitions", str(default_root()))
    assert human.returncode == 0
    assert "rmsnorm_f32  rmsnorm, 3 workload(s)" in human.stdout
    assert "eps: float32 scalar" in " ".join(human.stdout.split())
    assert "baseline gemm_n7168_k5120_baseline_torch_matmul: cuBLAS through torch.matmul." in " ".join(
        human.stdout.split()
    )


def test_definitions_without_a_baseline_say_speedups_are_against_the_reference(tmp_path: Path) -> None:
    root = make_root(tmp_path / "r", definitions={"g.json": GEMM_DEFINITION})
    human = fibserve("definitions", str(root))
    assert "baseline none (speedups are against the reference)" in human.stdout
    assert json.loads(fibserve("definitions", "--json", str(root)).stdout)[0]["baseline"] is None


def test_definitions_of_a_folder_that_is_not_a_trace_set_exits_1(tmp_path: Path) -> None:
    result = fibserve("definitions", str(tmp_path))
    assert result.returncode == 1 and result.stdout == ""
    assert "is this a trace-set root?" in result.stderr
