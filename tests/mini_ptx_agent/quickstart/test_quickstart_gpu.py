"""`ptxbench quickstart --run` with the demo on a GPU (the H200 validation of issue 7).

Every turn must be evaluated on the GPU, every demo kernel must be correct, and the speedups must be reported,
the reference kernel (turn 3) the fastest; `--report` must reprint the same verdicts.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from test_quickstart_e2e import quickstart

pytestmark = [pytest.mark.gpu, pytest.mark.slow, pytest.mark.timeout(1800)]


def _has_gpu() -> bool:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
    return done.returncode == 0 and "GPU" in done.stdout


@pytest.mark.parametrize("language", ["cuda", "triton"])
def test_demo_runs_on_the_gpu(tmp_path, language):
    if not _has_gpu():
        pytest.skip("no NVIDIA GPU on this machine")
    done = quickstart("--run", "--language", language, "--output-root", str(tmp_path), timeout=1700)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (run,) = tmp_path.glob(f"quickstart-*-{language}-gemm")
    result = json.loads((run / "quickstart-result.json").read_text(encoding="utf-8"))
    assert result["service"]["gpu"] is True and result["runner_completed"] is True
    turns = result["turns"]
    assert [t["status"] for t in turns] == ["PASSED"] * 3, turns
    assert all(t["executed_on_gpu"] and t["min_speedup"] for t in turns)
    speedups = [t["min_speedup"] for t in turns]
    # The reference kernel is about 0.99x cuBLAS on the H200; the SIMT kernels are far slower.
    assert speedups[2] == max(speedups) and speedups[2] > 0.5, speedups
    assert result["kernel_counts"]["correct"] == 3 and result["best_turn"] == 3
    assert len(list(run.glob("success/exp_000/kernel_v*"))) == 3
    if language == "cuda":
        assert {"HGMMA", "UTMALDG"} <= set(turns[2]["sass_families"])
    again = quickstart("--report", str(run), timeout=300)
    assert again.returncode == 0
    for label in ("Runner completed:", "A kernel was correct:  yes: 3 of 3", "Target achieved:"):
        assert label in again.stdout
    _assert_ptxbench_report(run, tmp_path / "report", speedups, language)


def _assert_ptxbench_report(run, out, speedups: list[float], language: str) -> None:
    """`ptxbench report` of the same GPU run: GPU-timed numbers, the GPU named, no CPU-only warning."""
    from mini_ptx_agent.reports.report import build_report

    result = build_report([run], out, turn_limits=[1, 3], include_demo=True)
    at1, at3 = result.metrics
    assert (at3.correct.value, at3.correct.n, at3.unknown) == (1.0, 1, 0)
    assert at1.speedup_median.value == speedups[0] and at3.speedup_median.value == max(speedups)
    if language == "cuda":
        assert at3.verified.value == 1.0
    assert not any("CPU-only" in w for w in result.provenance.warnings)
    assert any("H200" in gpu or "H100" in gpu for gpu in result.provenance.gpus), result.provenance.gpus
    assert result.provenance.baselines, "the bundled GEMM baseline should be named"
