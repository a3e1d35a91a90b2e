"""benchmarks/attention_baselines.py without a GPU: its table, its H100 lookup, and its refusal to run."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def script(load_benchmark):
    return load_benchmark("attention_baselines.py")


def test_h100_latencies_are_keyed_by_workload_uuid(script) -> None:
    found = script.h100_latencies(None)
    if not found:
        pytest.skip("h100_reference_latency.csv not found next to the checkout")
    assert len(found) == 132
    assert found["bc38b351-d595-451b-9153-8e225702e53b"] == pytest.approx(2.70, abs=0.01)  # d128, 4096


def test_the_table_has_one_line_per_row_and_keeps_errors(script) -> None:
    good = {
        "definition": "mha_with_lse_d128",
        "seq_len": 4096,
        "kernel": "cudnn",
        "ms": {"median": 2.6, "p10": 2.55, "p90": 2.7},
        "flash_ms": 4.1,
        "tflops": 634.0,
        "roofline_fraction": 0.64,
        "h100_ms": 2.7,
        "ratio_to_h100": 2.6 / 2.7,
        "check": {"passed": True, "max_abs_error": 2e-4, "max_rel_error": 0.5, "matched_ratio": 1.0},
    }
    bad = {"definition": "mha_bwd_d96", "seq_len": 512, "error": "RuntimeError('no kernel')"}
    lines = script.markdown([good, bad], "header")
    assert lines[0] == "header" and len(lines) == 6
    assert (
        "| mha_with_lse_d128 | 4096 | cudnn | 2.6000 (2.5500-2.7000) | 4.1000 | 634 | 64% | 2.7000 | 0.963 |"
        in lines[4]
    )
    assert "PASS 0.0002 / 0.5, 1.0000" in lines[4]
    assert "error: RuntimeError('no kernel')" in lines[5]


def test_the_chosen_kernel_is_named_from_the_baseline_module(script) -> None:
    def _cudnn():
        pass

    def _flash():
        pass

    assert script.chosen_kernel({"_BACKEND": [_cudnn]}) == "cudnn"
    assert script.chosen_kernel({"_CHOSEN": {(1,): (_flash, None)}}) == "flash"
    assert script.chosen_kernel({"_BACKEND": []}) == "?"


def test_refuses_without_a_gpu(script, tmp_path: Path, capsys) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    assert script.main(["--quick", "--out", str(tmp_path)]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err


def test_render_fills_in_the_h100_ratio_of_a_saved_run(script, tmp_path: Path) -> None:
    import json

    csv_file = tmp_path / "h100.csv"
    csv_file.write_text(
        "suite,definition_name,seq_len,latency_ms,tflops,workload_uuid\nmha,d,4096,2.0,600,u1\n"
    )
    row = {"definition": "d", "seq_len": 4096, "uuid": "u1", "kernel": "cudnn", "flash_ms": None}
    row["ms"], row["h100_ms"], row["ratio_to_h100"] = {"median": 2.2, "p10": 2.1, "p90": 2.3}, None, None
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps({"header": "H200 run", "rows": [row], "skipped": []}))
    out = tmp_path / "out"
    assert script.main(["--render", str(saved), "--h100-csv", str(csv_file), "--out", str(out)]) == 0
    table = (out / "attention_baselines.md").read_text()
    assert table.startswith("H200 run") and "| 2.0000 | 1.100 |" in table
