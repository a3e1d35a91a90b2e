"""benchmarks/peer_flashinfer_bench.py without a GPU: each line's verdict from canned results (the figures issue
35 measured), the table, the trace set both tools read, and its refusals (no flashinfer_bench, no GPU)."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "benchmarks" / "peer_flashinfer_bench.py"
KERNELS = ROOT / "tests" / "fibserve" / "bench" / "kernels"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("peer_flashinfer_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def timed(ms: float, reference_ms: float, status: str = "PASSED") -> dict:
    return {
        "status": status,
        "latency_ms": ms,
        "reference_ms": reference_ms,
        "speedup": reference_ms / ms,
        "log": "",
    }


def failed(status: str) -> dict:
    return {"status": status, "latency_ms": None, "reference_ms": None, "speedup": None, "log": "boom"}


def row(
    solution: str, role: str, fibserve: dict, peer: dict, cupti_us: float | None = None, m: int = 128
) -> dict:
    return {"solution": solution, "definition": "gemm", "role": role, "workload": f"M={m}", "uuid": f"u{m}",
            "fibserve": fibserve, "peer": peer, "cupti_us": cupti_us}  # fmt: skip


def issue_35_rows() -> list[dict]:
    """M=128 as issue 35 found it (peer fooled by both cheats, FIBServe's baseline inflated by leftover work),
    with the figures a fixed FIBServe should give beside them."""
    return [
        row("gemm_naive", "honest", timed(0.567, 0.0100), timed(0.58, 0.0247)),
        row("gemm_content_cache", "cheat", timed(0.568, 0.0101), timed(0.029, 0.0247)),
        row("gemm_leaves_work", "cheat", timed(1.217, 0.126), timed(0.020, 0.0247)),
        row("gemm_torch_matmul", "short", timed(0.0085, 0.0086), timed(0.0247, 0.0247), cupti_us=8.0),
        row("gemm_torch_matmul", "short", timed(0.0440, 0.0440), timed(0.0247, 0.0247), cupti_us=8.0, m=1000),
    ]


def test_each_line_is_judged_by_its_role(script) -> None:
    naive, cache, leftover, matmul, slow_matmul = script.verdict.judge(issue_35_rows())
    assert (naive["ahead"], naive["peer_meets"]) == (True, True)
    assert cache["ahead"] and cache["why"] == "not fooled: speedup 1.01x, baseline 1.01x the honest kernel's"
    assert not cache["peer_meets"] and cache["peer_why"].startswith("fooled: speedup 20.")
    # the baseline timed after leftover work: 12.6x the one next to the honest kernel, speedup 5.9x
    assert (
        not leftover["ahead"]
        and leftover["why"] == "fooled: speedup 5.87x, baseline 12.60x the honest kernel's"
    )
    assert not leftover["peer_meets"]
    assert matmul["ahead"] and matmul["why"] == "1.06x CUPTI"
    assert not matmul["peer_meets"] and matmul["peer_why"] == "3.09x CUPTI (outside 15%)"
    assert not slow_matmul["ahead"] and slow_matmul["why"] == "5.50x CUPTI (outside 15%)"


@pytest.mark.parametrize(
    ("fibserve", "ahead", "why"),
    [
        (failed("RUNTIME_ERROR"), True, "not fooled: RUNTIME_ERROR"),  # refused
        (failed("ERROR"), False, "not judged: ERROR"),  # the tool's own failure is no refusal
        (failed("COMPILE_ERROR"), False, "not judged: COMPILE_ERROR"),
        (timed(1.22, 0.0102), True, "not fooled: speedup 0.47x, baseline 1.02x the honest kernel's"),
        (timed(1.22, 0.0115), False, "fooled: speedup 0.53x, baseline 1.15x the honest kernel's"),  # baseline
        (timed(0.55, 0.0100), True, "not fooled: speedup 1.03x, baseline 1.00x the honest kernel's"),
        (timed(0.50, 0.0100), False, "fooled: speedup 1.13x, baseline 1.00x the honest kernel's"),
    ],
)
def test_a_cheating_kernel_is_held_to_the_honest_one(script, fibserve: dict, ahead: bool, why: str) -> None:
    honest = row("gemm_naive", "honest", timed(0.567, 0.0100), timed(0.58, 0.0247))
    cheat = row("gemm_leaves_work", "cheat", fibserve, timed(0.58, 0.0247))
    script.verdict.judge([honest, cheat])
    assert (cheat["ahead"], cheat["why"]) == (ahead, why)


def test_a_cheat_cannot_be_judged_without_a_passing_honest_kernel(script) -> None:
    honest = row("gemm_naive", "honest", failed("COMPILE_ERROR"), timed(0.58, 0.0247))
    cheat = row("gemm_content_cache", "cheat", timed(0.568, 0.0101), timed(0.58, 0.0247))
    refused = row("gemm_leaves_work", "cheat", failed("RUNTIME_ERROR"), timed(0.58, 0.0247))
    script.verdict.judge([honest, cheat, refused])
    assert (honest["ahead"], honest["why"]) == (False, "the honest kernel got COMPILE_ERROR")
    assert (cheat["ahead"], cheat["why"]) == (False, "no PASSED honest kernel to compare with")
    assert (refused["ahead"], refused["why"]) == (False, "no PASSED honest kernel to compare with")
    assert cheat["peer_meets"]


@pytest.mark.parametrize(
    ("fibserve", "peer", "cupti_us", "ahead", "why"),
    [
        (timed(0.0085, 0.0085), timed(0.0084, 0.0084), 8.0, False, "1.06x CUPTI, above the peer's 0.0084 ms"),
        (timed(0.0085, 0.0085), failed("RUNTIME_ERROR"), 8.0, True, "1.06x CUPTI"),  # no peer figure
        (timed(0.0060, 0.0060), timed(0.0247, 0.0247), 8.0, False, "0.75x CUPTI (outside 15%)"),
        (timed(0.0085, 0.0085), timed(0.0247, 0.0247), None, False, "no CUPTI time to compare with"),
        (failed("INCORRECT_NUMERICAL"), timed(0.0247, 0.0247), 8.0, False, "INCORRECT_NUMERICAL"),
    ],
)
def test_a_short_kernel_is_held_to_cupti_and_to_the_peer(
    script, fibserve: dict, peer: dict, cupti_us: float | None, ahead: bool, why: str
) -> None:
    (line,) = script.verdict.judge([row("add_correct", "short", fibserve, peer, cupti_us=cupti_us)])
    assert (line["ahead"], line["why"]) == (ahead, why)


def test_the_table_has_one_line_per_row_and_a_summary(script) -> None:
    rows = script.verdict.judge(issue_35_rows())
    lines = script.verdict.markdown(rows, "header")
    assert lines[0] == "header" and lines[2].startswith("| solution | workload | FIBServe |")
    assert lines[4] == (
        "| gemm_naive | M=128 | PASSED | 0.5670 | 0.0100 | 0.0176 | PASSED | 0.5800 | 0.0247 | 0.0426 | - | "
        "**ahead** | PASSED | yes: PASSED |"
    )
    assert "| 0.0080 | **ahead** | 1.06x CUPTI | no: 3.09x CUPTI (outside 15%) |" in lines[7]
    summary = lines[lines.index("", 2) + 1 :]
    assert summary[0] == "FIBServe ahead on 3 of 5 lines."
    assert (
        "- not ahead: gemm_leaves_work M=128: fooled: speedup 5.87x, baseline 12.60x the honest kernel's"
        in summary
    )
    assert sum(line.startswith("- FlashInfer-Bench misses:") for line in summary) == 4


def test_render_judges_a_saved_run_again(script, tmp_path: Path, capsys) -> None:
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps({"header": "H200 run", "rows": issue_35_rows()[:2]}))
    out = tmp_path / "out"
    assert script.main(["--render", str(saved), "--out", str(out)]) == 0
    result = json.loads((out / "peer_flashinfer_bench.json").read_text())
    assert [r["ahead"] for r in result["rows"]] == [True, True]
    assert result["summary"][0] == "FIBServe ahead on 2 of 2 lines: every line."
    table = (out / "peer_flashinfer_bench.md").read_text()
    assert table.startswith("H200 run") and table in capsys.readouterr().out
    saved.write_text("{not json")
    assert script.main(["--render", str(saved), "--out", str(out)]) == 2
    assert "cannot render" in capsys.readouterr().err


def test_the_trace_set_holds_the_issue_35_shapes_and_the_kernels_unchanged(script, tmp_path: Path) -> None:
    from fibserve.trace.trace_set import TraceSet

    rows = script.write_trace_set(tmp_path, [128, 1000])
    ts = TraceSet.load([tmp_path])
    assert not ts.problems
    gemm = ts.definition(script.GEMM)
    assert gemm.const_axes == {"N": 1024, "K": 1024}
    assert {t.dtype.value for t in [*gemm.inputs.values(), *gemm.outputs.values()]} == {"bfloat16"}
    assert (
        gemm.reference
        == TraceSet.load([script.ROOT / "packages/fibserve/src/fibserve/datasets/default"])
        .definition("gemm_n7168_k5120")
        .reference
    )
    assert ts.baseline_for(script.GEMM).sources[0].content.strip().endswith("torch.matmul(A, B.t())")
    assert ts.baseline_for("vector_add_f32") is not None
    assert sorted(w.axes["M"] for w in ts.workloads_for(script.GEMM)) == [128, 1000]
    assert [w.axes["N"] for w in ts.workloads_for("vector_add_f32")] == [65536]
    assert [(r["solution"], r["role"], r["workload"]) for r in rows] == [
        ("gemm_naive", "honest", "M=128"), ("gemm_naive", "honest", "M=1000"),
        ("gemm_content_cache", "cheat", "M=128"), ("gemm_content_cache", "cheat", "M=1000"),
        ("gemm_leaves_work", "cheat", "M=128"), ("gemm_leaves_work", "cheat", "M=1000"),
        ("gemm_torch_matmul", "short", "M=128"), ("gemm_torch_matmul", "short", "M=1000"),
        ("add_correct", "short", "N=65536"),
    ]  # fmt: skip
    for candidate in script.CANDIDATES:
        assert ts.solution(candidate.name).sources[0].content == (KERNELS / candidate.file).read_text()
    # both tools walk solutions/ in path order: the honest kernel is evaluated first in each
    files = sorted(p.name for p in (tmp_path / "solutions").glob("*.json"))
    assert files[0] == "00_gemm_naive.json" and len(files) == len(script.CANDIDATES)


def test_refuses_without_flashinfer_bench(script, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "flashinfer_bench", None)  # import raises ImportError
    assert script.main(["--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "flashinfer_bench is not importable" in err and "scripts/device_wheels.sh --peer" in err
    assert not list(tmp_path.iterdir())


def test_refuses_without_a_gpu(script, tmp_path: Path, monkeypatch, capsys) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    monkeypatch.setitem(sys.modules, "flashinfer_bench", types.ModuleType("flashinfer_bench"))
    assert script.main(["--out", str(tmp_path)]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err


def test_bad_arguments_are_refused(script, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        script.main(["--m", "128,x"])
    assert exit_info.value.code == 2 and "--m takes comma-separated integers" in capsys.readouterr().err
