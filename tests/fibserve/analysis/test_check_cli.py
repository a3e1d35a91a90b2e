"""`fibserve check` as a newcomer runs it on a Triton kernel: real subprocesses, the bundled trace set.

Triton kernels are policy-checked and "built" (imported) without nvcc or a GPU, so these run everywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

FIBSERVE = str(Path(sys.executable).parent / "fibserve")

# rmsnorm_f32 (bundled) calls run(x, weight, eps, y): inputs, then the preallocated output.
# The bodies do nothing: a torch call on a tensor would be a source-policy violation for a Triton kernel.
RIGHT_ARITY = "def run(x, weight, eps, y):\n    pass\n"
WRONG_ARITY = "def run(x, weight, eps):\n    pass\n"


def _check(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FIBSERVE_CACHE_DIR": str(cache), "COLUMNS": "200", "TERM": "dumb"}
    env.pop("DATASET_ROOTS", None)
    return subprocess.run([FIBSERVE, "check", *args], capture_output=True, text=True, timeout=300, env=env)


def test_kernel_names_with_brackets_are_printed_not_read_as_markup(tmp_path: Path, build_cache: Path) -> None:
    kernel = tmp_path / "k[red]x.py"
    kernel.write_text(RIGHT_ARITY)
    result = _check(str(kernel), "--definition", "rmsnorm_f32", cache=build_cache)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "k[red]x (triton): clean" in result.stdout


def test_misspelled_definition_suggests_the_close_name(tmp_path: Path, build_cache: Path) -> None:
    kernel = tmp_path / "kernel.py"
    kernel.write_text(RIGHT_ARITY)
    result = _check(str(kernel), "--definition", "rmsnorm_f3", cache=build_cache)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "fibserve check: unknown definition 'rmsnorm_f3'; did you mean 'rmsnorm_f32'? "
        "(86 definitions; list them with `fibserve definitions`)"
    )


def test_wrong_arity_against_the_definition_is_not_clean(tmp_path: Path, build_cache: Path) -> None:
    kernel = tmp_path / "kernel.py"
    kernel.write_text(WRONG_ARITY)
    result = _check(str(kernel), "--definition", "rmsnorm_f32", "--json", cache=build_cache)
    assert result.returncode == 1, result.stdout + result.stderr
    analysis = json.loads(result.stdout)
    assert analysis["status"] == "abi_mismatch" and analysis["ok"] is False
    assert analysis["abi"] == [
        "run takes 3 parameters but definition 'rmsnorm_f32' calls it with 4 "
        "(x, weight, eps, y; outputs preallocated)"
    ]
    human = _check(str(kernel), "--definition", "rmsnorm_f32", cache=build_cache)
    assert human.returncode == 1 and "kernel (triton): abi_mismatch" in human.stdout


def test_right_arity_is_clean_and_without_a_definition_arity_is_not_checked(
    tmp_path: Path, build_cache: Path
) -> None:
    right, wrong = tmp_path / "right.py", tmp_path / "wrong.py"
    right.write_text(RIGHT_ARITY)
    wrong.write_text(WRONG_ARITY)
    checked = _check(str(right), "--definition", "rmsnorm_f32", "--json", cache=build_cache)
    assert checked.returncode == 0 and json.loads(checked.stdout)["status"] == "clean"
    unchecked = _check(str(wrong), "--json", cache=build_cache)
    assert unchecked.returncode == 0 and json.loads(unchecked.stdout)["abi"] == []
