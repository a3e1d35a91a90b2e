"""GPU: the exported Harbor task of the quickstart GEMM, graded, verified on cuda:0 with its oracle (the bundled
TMA + wgmma reference kernel): correct, timed against the torch.matmul baseline, wgmma and TMA in its SASS.

Run on the GPU machine: ``pytest -m gpu -n 0 tests/mini_ptx_agent/harbor/test_harbor_gpu.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mini_ptx_agent.environment.embedded import EmbeddedService

pytestmark = [pytest.mark.gpu, pytest.mark.slow, pytest.mark.timeout(1800)]


def test_the_gemm_oracle_earns_the_graded_reward(tmp_path: Path) -> None:
    # the GPU machine runs the packages from source, without console scripts: test.sh's `ptxbench` is a shim
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ptxbench").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m mini_ptx_agent "$@"\n')
    (bin_dir / "ptxbench").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("SERVICE_URL", "FIBSERVE_TOKEN")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    with EmbeddedService(devices=["cuda:0"]) as service:
        done = subprocess.run(
            [str(bin_dir / "ptxbench"), "harbor", "export", str(tmp_path / "tasks"), "--definition",
             "gemm_n7168_k5120", "--reward", "graded", "--sanitizer-runs", "0", "--service-url", str(service.url)],
            capture_output=True, text=True, timeout=600, env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        folder = tmp_path / "tasks" / "gemm_n7168_k5120-cuda"
        kernel, logs = tmp_path / "kernel.cu", tmp_path / "logs"
        run = env | {
            "PTXBENCH_KERNEL": str(kernel),
            "PTXBENCH_VERIFIER_LOGS": str(logs),
            "SERVICE_URL": str(service.url),
        }
        assert subprocess.run(["bash", str(folder / "solution" / "solve.sh")], env=run).returncode == 0
        verified = subprocess.run(
            ["bash", str(folder / "tests" / "test.sh")], capture_output=True, text=True, timeout=1500, env=run
        )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    rewards = json.loads((logs / "reward.json").read_text())
    assert rewards["correctness"] == 1.0 and rewards["architecture"] == 1.0
    assert rewards["speedup"] > 0.8 and rewards["reward"] > 0.9, rewards  # 0.986x through FIBServe (README)
    assert json.loads((logs / "verifier.json").read_text())["speedup_basis"] == "baseline"
