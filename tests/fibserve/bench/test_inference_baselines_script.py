"""benchmarks/inference_baselines.py without a GPU: its table, the path it names, and its refusal to run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def script(load_benchmark):
    return load_benchmark("inference_baselines.py")


ROW = {
    "definition": "gqa_paged_decode_h32_kv8_d128_ps1",
    "workload": "batch_size=64 num_kv_indices=58966",
    "path": "flash_varlen",
    "ms": {"median": 0.05, "p10": 0.049, "p90": 0.052},
    "ref_ms": 12.5,
    "tflops": 9.4,
    "tb_s": 2.51,
    "roofline_fraction": 0.52,
    "bound": "memory",
    "check": {
        "passed": True,
        "max_abs_error": 4e-4,
        "max_rel_error": 0.3,
        "matched_ratio": 1.0,
        "rtol_needed": {"output": 0.004, "lse": 0.0},
    },
}


def test_the_table_names_the_path_and_keeps_errors(script, tmp_path: Path) -> None:
    broken = {
        "definition": "mla_paged_decode_h16_ckv512_kpe64_ps1",
        "workload": "batch_size=64",
        "error": "RuntimeError('x')",
    }
    lines = script.markdown([ROW, broken], "header")
    assert len(lines) == 6
    assert (
        "| flash_varlen | 0.0500 (0.0490-0.0520) | 12.500 | 9.4 | 2.51 | 52% memory | PASS 0.0004 / 0.3, 1.0000"
        in lines[4]
    )
    assert "error: RuntimeError('x')" in lines[5]
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps({"header": "h", "rows": [ROW]}))
    assert script.main(["--render", str(saved), "--out", str(tmp_path / "out")]) == 0
    assert "flash_varlen" in (tmp_path / "out" / "inference_baselines.md").read_text()


def test_paths_and_workload_labels(script) -> None:
    def fast():
        pass

    assert script.chosen_path({"_CHOSEN": [fast]}) == "fast"
    assert script.chosen_path({}) == "reference"  # GDN's baseline is the reference, no choice
    label = script.workload_label(
        {"batch_size": 64, "len_indptr": 65, "num_kv_indices": 58966, "num_pages": 68237}
    )
    assert label == "batch_size=64 num_kv_indices=58966"


def test_without_a_gpu_it_refuses(script) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    assert script.main(["--out", "/nonexistent-not-written"]) == 2
