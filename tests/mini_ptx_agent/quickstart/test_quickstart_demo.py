"""The bundled demo trajectory: assembled at run time, one copy of each kernel, and every kernel correct."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mini_ptx_agent.demo import (
    DEMO_DEFINITION,
    demo_trajectory,
    kernel_sources,
    reference_kernel_dir,
    write_demo_trajectory,
)
from mini_ptx_agent.extraction import extract_kernel
from mini_ptx_agent.models.replay import ReplayModel

DEMO_DIR = Path(__file__).resolve().parents[3] / "packages/mini-ptx-agent/src/mini_ptx_agent/demo"


@pytest.mark.parametrize("language", ["cuda", "triton"])
def test_replaying_the_demo_gives_the_three_kernels_in_order(tmp_path, language):
    path = write_demo_trajectory(language, tmp_path / "demo.json")
    model = ReplayModel(path=path, model_name="ptxbench-demo-replay", fallback=True)
    assert model.config.n_messages == 3
    sources = kernel_sources(language)
    for expected in sources:
        reply = model.query([])["content"]
        assert extract_kernel(reply, language).source.rstrip() == expected.rstrip()
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["trajectory_format"] == "mini-swe-agent-1.1"
    assert "not by a model" in data["info"]["ptxbench_demo"]["note"]


def test_the_last_turn_is_fibserve_reference_kernel_not_a_copy():
    reference = reference_kernel_dir()
    assert kernel_sources("cuda")[2] == (reference / "kernel.cu").read_text(encoding="utf-8")
    assert kernel_sources("triton")[2] == (reference / "kernel.py").read_text(encoding="utf-8")
    copies = [p for p in DEMO_DIR.rglob("*") if p.is_file() and p.name in ("kernel.cu", "kernel.py")]
    assert copies == [], "the reference kernels must be read from fibserve, not copied into the demo"
    assert "wgmma.mma_async" in kernel_sources("cuda")[2]


def test_demo_kernels_follow_the_abi_and_the_source_policy():
    for source in kernel_sources("cuda"):
        assert "TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run)" in source
        assert "TVMFFIEnvGetStream" in source
        assert "cublas" not in source.lower()
    for source in kernel_sources("triton"):
        assert "\ndef run(A, B, C" in source
        assert "import torch" not in source


FEEDBACK_WORDS = re.compile(
    r"\b(correct|incorrect|passed|failed|wrong|slow|slower|faster|memory-bound|speedup|executed|verified)\b",
    re.IGNORECASE,
)
"""Words of the evaluation's verdicts: a replayed reply that used one would assert a result the feedback
of that run may contradict (NOT_EXECUTED without a GPU, a failure, a speedup)."""


@pytest.mark.parametrize("language", ["cuda", "triton"])
def test_replayed_prose_asserts_nothing_the_feedback_may_contradict(language):
    replies = [m["content"] for m in demo_trajectory(language)["messages"] if m["role"] == "assistant"]
    for turn, reply in enumerate(replies, start=1):
        prose = reply.split("```", 1)[0]
        assert not FEEDBACK_WORDS.search(prose), f"turn {turn}: {prose!r}"


def test_the_demo_file_is_flagged_for_the_data_pipelines(tmp_path):
    data = demo_trajectory("cuda")
    assert data["info"]["ptxbench"]["demo"] is True
    assert ReplayModel(path=write_demo_trajectory("cuda", tmp_path / "d.json")).config.demo is True


def test_unknown_language_is_rejected():
    with pytest.raises(ValueError, match="no demo trajectory"):
        demo_trajectory("fortran")


_CHECK = textwrap.dedent(
    """
    import importlib.util, sys, torch
    spec = importlib.util.spec_from_file_location("demo_kernel", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    # M values: partial tiles, a single row, an empty batch; N and K not multiples of the tiles either.
    for m, n, k in [(70, 200, 160), (1, 130, 96), (0, 128, 64), (129, 256, 72)]:
        A, B = torch.randn(m, k), torch.randn(n, k)
        C = torch.full((m, n), float("nan"))
        module.run(A, B, C)
        assert torch.allclose(C, A @ B.T, atol=1e-3, rtol=1e-3), (m, n, k)
    print("ok")
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["turn1_dot.py", "turn2_tiled.py"])
def test_triton_demo_kernels_are_correct_for_any_m_under_the_interpreter(tmp_path, name):
    """float32 under TRITON_INTERPRET=1 (the interpreter gets bf16 tl.dot wrong): the masking and tiling logic."""
    pytest.importorskip("triton")
    script = tmp_path / "check.py"
    script.write_text(_CHECK, encoding="utf-8")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, str(script), str(DEMO_DIR / "triton" / name)],
        capture_output=True, text=True, env=env, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


def test_demo_definition_is_the_quickstart_gemm():
    assert DEMO_DEFINITION == "gemm_n7168_k5120"
