"""Baseline Solutions of the bundled trace set: what each definition's speed is measured against.

A definition names its baseline with the tag ``baseline:<solution name>``; the Solution lives in the trace
set like any other (trusted: trace-set solutions are operator code) and is timed in a worker twin of the
candidate's, interleaved with it (:mod:`fibserve.bench.timing.comparators`). The definition's reference stays the
correctness oracle. Per family:

* GEMM: ``torch.matmul`` (cuBLAS), exactly what the reference calls.
* ``mha_with_lse_*``: PyTorch's cuDNN SDPA with LSE (``aten._scaled_dot_product_cudnn_attention``; its LSE is
  natural-log, shaped [B, H, S, 1], reshaped to [B, H, S]); where cuDNN refuses the shape at the first call,
  PyTorch's FlashAttention-2 kernel (``aten._scaled_dot_product_flash_attention``, natural-log LSE [B, H, S]).
  cuDNN first: on Hopper its SDPA is the faster of the two (the H100 reference latencies of PTXBench, about
  600 TFLOP/s at head_dim 128, are out of reach of FlashAttention-2).
* ``mha_bwd_*``: the matching backward kernels (``aten._scaled_dot_product_cudnn_attention_backward``, else
  ``..._flash_attention_backward``), fed the definition's o and lse; the forward runs once per shape (first
  call, untimed warmup) only for the auxiliary tensors (philox state) the backward kernels take.
* ``fp8_mha_with_lse_*``: no FP8 attention kernel is reachable from PyTorch, and ``torch._scaled_mm`` per
  (batch, head) would materialise the S x S scores; so the baseline dequantizes q, k, v to bf16 (one fused
  multiply each) and runs the bf16 baseline. It is an honest bf16-speed baseline, not an FP8-class one: the
  Solution's description says so, and so does every result timed against it.
* The float32 CI definitions: the torch op the reference uses (``torch.add``, ``torch.softmax``,
  ``torch.nn.functional.rms_norm``), so the baseline mechanism runs without a GPU too.
"""

from __future__ import annotations

from fibserve.trace import Definition, Solution
from fibserve.trace.definition import BASELINE_TAG

GEMM_BASELINE = '''import torch


def run(A, B):
    """cuBLAS through torch.matmul: C = A @ B.T."""
    return torch.matmul(A, B.t())
'''

SDPA_FORWARD = '''import torch

aten = torch.ops.aten
CAUSAL = {causal}
_BACKEND = []
"""The kernel chosen at the first call: cuDNN, or FlashAttention-2 where cuDNN refuses the shape."""


def _cudnn(q, k, v):
    out = aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, CAUSAL, False)
    return out[0], out[1].reshape(q.shape[0], q.shape[1], q.shape[2])


def _flash(q, k, v):
    out = aten._scaled_dot_product_flash_attention(q, k, v, 0.0, CAUSAL, False)
    return out[0], out[1]


def attention(q, k, v):
    """o [B, H, S, D] bf16 and the natural-log LSE [B, H, S] fp32 of bf16 q, k, v [B, H, S, D]."""
    if not _BACKEND:
        try:
            result = _cudnn(q, k, v)
        except RuntimeError:
            _BACKEND.append(_flash)
        else:
            _BACKEND.append(_cudnn)
            return result
    return _BACKEND[0](q, k, v)
'''

MHA_BASELINE = (
    SDPA_FORWARD
    + """

def run(q, k, v):
    return attention(q, k, v)
"""
)

FP8_BASELINE = (
    SDPA_FORWARD
    + '''

def _dequantize(x, scale):
    """bf16 x * scale[b, h]: one read of the e4m3 tensor, the product rounded once (computed in fp32)."""
    wide = x.to(torch.bfloat16)
    return torch.mul(wide, scale[:, :, None, None], out=wide)


def run(q, k, v, q_scale, k_scale, v_scale):
    return attention(_dequantize(q, q_scale), _dequantize(k, k_scale), _dequantize(v, v_scale))
'''
)

BACKWARD_BASELINE = '''import torch

aten = torch.ops.aten
CAUSAL = {causal}
_CHOSEN = {{}}
"""Per shape: the backward kernel and the forward's auxiliary outputs it takes (made at the first call)."""


def _cudnn(q, k, v, o, lse, do, aux):
    return aten._scaled_dot_product_cudnn_attention_backward(
        do, q, k, v, o, lse.unsqueeze(-1), aux[6], aux[7], None, aux[2], aux[3], aux[4], aux[5], 0.0, CAUSAL
    )


def _flash(q, k, v, o, lse, do, aux):
    return aten._scaled_dot_product_flash_attention_backward(
        do, q, k, v, o, lse, aux[2], aux[3], aux[4], aux[5], 0.0, CAUSAL, aux[6], aux[7]
    )


def _choose(q, k, v, o, lse, do):
    try:
        aux = aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, CAUSAL, False)
        _cudnn(q, k, v, o, lse, do, aux)
        return _cudnn, aux
    except RuntimeError:
        return _flash, aten._scaled_dot_product_flash_attention(q, k, v, 0.0, CAUSAL, False)


def run(q, k, v, o, lse, do):
    """dq, dk, dv [B, H, S, D] bf16 from the forward's o and natural-log lse [B, H, S] and do."""
    key = tuple(q.shape)
    if key not in _CHOSEN:
        _CHOSEN[key] = _choose(q, k, v, o, lse, do)
    kernel, aux = _CHOSEN[key]
    return tuple(kernel(q, k, v, o, lse, do, aux))
'''

CI_BASELINES = {
    "vector_add_f32": ("torch_add", "import torch\n\n\ndef run(x, y):\n    return torch.add(x, y)\n"),
    "softmax_rows_f32": (
        "torch_softmax",
        "import torch\n\n\ndef run(x):\n    return torch.softmax(x, dim=-1)\n",
    ),
    "rmsnorm_f32": (
        "torch_rms_norm",
        "import torch\n\n\ndef run(x, weight, eps):\n"
        "    return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)\n",
    ),
}
"""CI definition -> (baseline kind, source): the torch op of the reference, as a Solution."""


ATTENTION_BASELINES = {
    "mha": (
        "cudnn_sdpa",
        MHA_BASELINE,
        "PyTorch cuDNN SDPA with LSE (FlashAttention-2 where cuDNN refuses the shape).",
    ),
    "mha_bwd": (
        "cudnn_sdpa_backward",
        BACKWARD_BASELINE,
        "PyTorch cuDNN SDPA backward (FlashAttention-2 backward where cuDNN refuses the shape).",
    ),
    "fp8_mha": (
        "dequantize_cudnn_sdpa",
        FP8_BASELINE,
        "Not an FP8 kernel: q, k, v dequantized to bf16, then PyTorch cuDNN SDPA with LSE (PyTorch has no "
        "FP8 attention); bf16 speed, so a speedup against it is not a speedup against FP8-class attention.",
    ),
}
"""Attention op_type -> (baseline kind, source template with ``{causal}``, description)."""


BASELINE_AUTHOR = "ptxbench-baseline"
"""The author of every bundled baseline Solution: not ``ptxbench``, which marks the reference kernels."""


def baseline_solution(definition: Definition, kind: str, source: str, description: str) -> Solution:
    """A value-returning Python Solution ``baseline.py::run`` named ``<definition>_baseline_<kind>``."""
    return Solution.model_validate(
        {
            "name": f"{definition.name}_baseline_{kind}",
            "definition": definition.name,
            "author": BASELINE_AUTHOR,
            "description": description,
            "spec": {
                "language": "python",
                "target_hardware": ["any"],
                "entry_point": "baseline.py::run",
                "destination_passing_style": False,
            },
            "sources": [{"path": "baseline.py", "content": source}],
        }
    )


def baseline_for(definition: Definition) -> Solution:
    """The bundled baseline Solution of a bundled definition (see the module docstring for each family).

    Raises:
        KeyError: a definition this module has no baseline for.
    """
    if definition.op_type in ATTENTION_BASELINES:
        kind, template, description = ATTENTION_BASELINES[definition.op_type]
        return baseline_solution(
            definition, kind, template.format(causal="causal" in definition.tags), description
        )
    if definition.op_type == "gemm":
        return baseline_solution(definition, "torch_matmul", GEMM_BASELINE, "cuBLAS through torch.matmul.")
    kind, source = CI_BASELINES[definition.name]
    return baseline_solution(definition, kind, source, f"The reference's torch op ({kind}).")


def with_baseline_tag(definition: Definition, solution: Solution) -> Definition:
    """``definition`` with the tag ``baseline:<solution name>`` (replacing any earlier baseline tag)."""
    tags = [t for t in definition.tags if not t.startswith(BASELINE_TAG)]
    return definition.model_copy(update={"tags": [*tags, BASELINE_TAG + solution.name]})
