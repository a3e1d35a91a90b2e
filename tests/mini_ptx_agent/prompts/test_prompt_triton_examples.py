"""The Triton examples of the prompts are correct and compile to what their pattern says.

Correctness: each example's `run` under the Triton interpreter (`TRITON_INTERPRET=1`, CPU) in float32, the dtype
the interpreter computes correctly, against torch (GEMMs) or the bundled definition's reference (attention). The
interpreter needs the variable before triton is imported, so one subprocess runs every example and prints JSON.

Compilation: the `@triton.jit` kernels each example launches, with the arguments its `run` passes for bf16
inputs, compiled by triton for sm_90a and sm_100a without a GPU; the PTX must use the tensor cores of the
target (wgmma / tcgen05) and TMA where the example reads through tensor descriptors.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fibserve.datasets import default_root
from mini_ptx_agent.prompts.registry import PROMPTS_DIR

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")

EXAMPLES = PROMPTS_DIR / "examples"
MHA_DEFINITION = default_root() / "definitions" / "mha" / "mha_with_lse_d128.json"

_INTERPRETER_SCRIPT = r"""
import importlib.util, json, sys
import torch

def load(path):
    spec = importlib.util.spec_from_file_location(path.rsplit("/", 1)[-1][:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

examples, definition = sys.argv[1], json.loads(open(sys.argv[2]).read())
torch.manual_seed(0)
errors = {}
x, y = torch.arange(3000, dtype=torch.float32), torch.ones(3000)
out = torch.full((3000,), float("nan"))
load(examples + "/scaled_add_triton.py").run(x, y, 0.5, out)
errors["scaled_add_triton"] = (out - (x + 0.5 * y)).abs().max().item()
a, b = torch.randn(200, 72), torch.randn(136, 72)  # ragged against the 128 x 128 x 64 tiles
for name in ("triton_gemm_grouped", "triton_gemm_persistent"):
    c = torch.full((200, 136), float("nan"))
    load(examples + "/" + name + ".py").run(a, b, c)
    errors[name] = (c - a @ b.T).abs().max().item()
reference = {}
exec(definition["reference"], reference)
q, k, v = (torch.randn(1, 2, 160, 128) for _ in range(3))  # 160: masked keys and clipped rows
o, lse = torch.full_like(q, float("nan")), torch.full((1, 2, 160), float("nan"))
load(examples + "/triton_attention.py").run(q, k, v, o, lse)
o_ref, lse_ref = reference["run"](q, k, v)
errors["triton_attention"] = max((o - o_ref).abs().max().item(), (lse - lse_ref).abs().max().item())
print(json.dumps(errors))
"""


@pytest.fixture(scope="module")
def interpreter_errors(tmp_path_factory: pytest.TempPathFactory) -> dict[str, float]:
    """Max absolute error of each example's output under the interpreter (one subprocess for all)."""
    script = tmp_path_factory.mktemp("triton_examples") / "run_examples.py"
    script.write_text(_INTERPRETER_SCRIPT)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    result = subprocess.run(
        [sys.executable, str(script), str(EXAMPLES), str(MHA_DEFINITION)],
        env=env, capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "example", ["scaled_add_triton", "triton_gemm_grouped", "triton_gemm_persistent", "triton_attention"]
)
def test_example_is_correct_in_the_interpreter(interpreter_errors: dict[str, float], example: str) -> None:
    assert interpreter_errors[example] < 1e-4, interpreter_errors


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"prompt_example_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _launches(path: Path, args: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, dict]]:
    """(kernel, {param: value, ...options}) for every kernel launch the example's run(*args) makes, not launched."""
    from triton.runtime.jit import JITFunction

    launches: list[tuple[Any, dict]] = []

    def capture(self: Any, *call_args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        launches.append((self, {**dict(zip(self.arg_names, call_args, strict=False)), **kwargs}))

    monkeypatch.setattr(JITFunction, "run", capture)
    _load(path).run(*args)
    return launches


def _compile_ptx(kernel: Any, values: dict[str, Any], capability: int) -> str:
    """PTX of `kernel` specialised on `values` for sm_<capability> (no GPU needed)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import mangle_type

    signature, constants = {}, {}
    for param in kernel.params:
        if param.is_constexpr:
            signature[param.name], constants[param.name] = "constexpr", values[param.name]
        else:
            signature[param.name] = mangle_type(values[param.name])
    options = {key: value for key, value in values.items() if key not in kernel.arg_names}
    source = ASTSource(fn=kernel, signature=signature, constexprs=constants)
    return triton.compile(source, target=GPUTarget("cuda", capability, 32), options=options).asm["ptx"]


def _bf16_args(example: str) -> tuple[Any, ...]:
    import torch

    if example == "triton_attention":
        q = torch.empty(1, 2, 256, 128, dtype=torch.bfloat16)
        return q, q.clone(), q.clone(), q.clone(), torch.empty(1, 2, 256)
    a = torch.empty(256, 128, dtype=torch.bfloat16)
    return a, a.clone(), torch.empty(256, 256, dtype=torch.bfloat16)


TENSOR_CORES = {90: "wgmma.mma_async", 100: "tcgen05.mma"}


@pytest.fixture(scope="module")
def triton_cache(tmp_path_factory: pytest.TempPathFactory):
    """Triton's compile cache in a temporary folder, not the user's ~/.triton."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRITON_CACHE_DIR", str(tmp_path_factory.mktemp("triton_cache")))
        yield


@pytest.mark.slow
@pytest.mark.parametrize("capability", sorted(TENSOR_CORES))
@pytest.mark.parametrize(
    ("example", "uses_tma"),
    [("triton_gemm_grouped", False), ("triton_gemm_persistent", True), ("triton_attention", True)],
)
def test_example_compiles_to_tensor_cores_and_tma(
    example: str, uses_tma: bool, capability: int, monkeypatch: pytest.MonkeyPatch, triton_cache: None
) -> None:
    launches = _launches(EXAMPLES / f"{example}.py", _bf16_args(example), monkeypatch)
    assert len(launches) == 1, launches
    ptx = _compile_ptx(*launches[0], capability)
    assert TENSOR_CORES[capability] in ptx
    assert (
        "cp.async.bulk.tensor" in ptx
    ) == uses_tma  # block pointers are not TMA in Triton 3.x (see the doc)
