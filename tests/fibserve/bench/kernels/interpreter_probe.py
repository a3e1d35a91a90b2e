"""Probe of the Triton CPU interpreter (run as a script with TRITON_INTERPRET=1): prints one JSON line with
the error of a looped row sum (float32) and of a looped tl.dot in float32 and bfloat16, or the exception."""

import json
import os

os.environ["TRITON_INTERPRET"] = "1"

import numpy
import torch
import triton
import triton.language as tl


@triton.jit
def rowsum(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def dot_loop(a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr):
    r = tl.arange(0, 16)
    acc = tl.zeros((16, 16), dtype=tl.float32)
    for k in range(0, K, BLOCK):
        kk = k + tl.arange(0, BLOCK)
        a = tl.load(a_ptr + r[:, None] * K + kk[None, :])
        b = tl.load(b_ptr + kk[:, None] * 16 + r[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + r[:, None] * 16 + r[None, :], acc)


def main() -> None:
    torch.manual_seed(0)
    result = {"numpy": numpy.__version__, "triton": triton.__version__}
    x = torch.randn(8, 1000)
    out = torch.empty(8)
    try:
        rowsum[(8,)](x, out, 1000, BLOCK=128)
        result["rowsum_f32"] = float((out - x.sum(1)).abs().max())
    except Exception as exc:
        result["rowsum_f32"] = f"{type(exc).__name__}: {exc}"
    for name, dtype in (("dot_f32", torch.float32), ("dot_bf16", torch.bfloat16)):
        a, b, c = torch.randn(16, 64).to(dtype), torch.randn(64, 16).to(dtype), torch.empty(16, 16)
        try:
            dot_loop[(1,)](a, b, c, 64, BLOCK=16)
            result[name] = float((c - a.float() @ b.float()).abs().max())
        except Exception as exc:
            result[name] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(result))


if __name__ == "__main__":
    main()
