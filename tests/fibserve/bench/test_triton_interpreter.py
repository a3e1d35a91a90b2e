"""Why CPU mode accepts only float32 Triton candidates, and why numpy is pinned below 2.4.

Measured here with Triton 3.6: under TRITON_INTERPRET=1, looped float32 kernels are right with numpy 2.3
(numpy 2.4.6 makes every loop fail with "only 0-dimensional arrays can be converted to Python scalars"),
and a looped bfloat16 tl.dot is wrong by ~1e10. If a Triton release fixes bfloat16, the second test fails:
then CPU mode may accept bfloat16 (fibserve.bench.evaluator) and this test should change with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
PROBE = Path(__file__).resolve().parent / "kernels" / "interpreter_probe.py"


@pytest.fixture(scope="module")
def probe() -> dict:
    out = subprocess.run(
        [sys.executable, str(PROBE)], capture_output=True, text=True, timeout=240, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_installed_numpy_keeps_interpreter_loops_working(probe):
    major, minor = (int(p) for p in probe["numpy"].split(".")[:2])
    assert (major, minor) < (2, 4), "numpy >= 2.4 breaks loops in the Triton 3.6 interpreter; keep the pin"
    assert isinstance(probe["rowsum_f32"], float) and probe["rowsum_f32"] < 1e-4
    assert isinstance(probe["dot_f32"], float) and probe["dot_f32"] < 1e-3


def test_bfloat16_dot_is_still_wrong_in_the_interpreter(probe):
    assert isinstance(probe["dot_bf16"], str) or probe["dot_bf16"] > 1.0
