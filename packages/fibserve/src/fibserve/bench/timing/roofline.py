"""Roofline plausibility: flag a latency faster than physics allows on the device.

For a call with ``flops`` floating-point operations and ``bytes`` of compulsory memory traffic, no kernel can
beat ``floor_ms = max(flops / peak_flops, bytes / peak_bandwidth) * 1e3``. A measured latency below the floor
means the timing was fooled (work skipped, cached or done outside the timed region) and is flagged.

Device peaks (dense, no sparsity), from NVIDIA's public datasheets:

* H200 SXM: BF16/FP16 Tensor Core 989 TFLOP/s, FP8 1979 TFLOP/s, TF32 494 TFLOP/s, HBM3e 4.8 TB/s
  (NVIDIA H200 Tensor Core GPU datasheet, 2024; the datasheet's "with sparsity" figures are twice these).
* H100 SXM: BF16/FP16 989 TFLOP/s, FP8 1979 TFLOP/s, TF32 494 TFLOP/s, HBM3 3.35 TB/s (NVIDIA H100 datasheet).
* H100 PCIe: BF16/FP16 756 TFLOP/s, FP8 1513 TFLOP/s, TF32 378 TFLOP/s, HBM2e 2.0 TB/s (same datasheet).
* B200: BF16/FP16 2250 TFLOP/s, FP8 4500 TFLOP/s, TF32 1100 TFLOP/s, HBM3e 8.0 TB/s (NVIDIA HGX B200 spec).

Unknown devices are never flagged. FLOPs: GEMM ``2*M*N*K`` (axes M, N, K); dense multi-head attention
(op types ``mha``, ``fp8_mha``: forward; ``mha_bwd``: backward) the usual counts, ``4*B*H*Sq*Skv*D`` for
the forward (QK^T and PV), 2.5 times that for the backward (five products instead of two), half of either
for a definition tagged ``causal`` (the convention of PTXBench's h100_reference_latency.csv, whose TFLOP/s
they reproduce); paged and ragged attention (GQA, MLA), gated delta nets and FP8 GEMMs with block scales as
:mod:`fibserve.bench.timing.inference_costs` counts them (from every sequence's length); other dense
attention a floor of ``2 * heads * head_dim * Sq * Skv`` per batch from the shapes of ``q`` and ``k`` (axes
``batch_size``, ``num_heads``, ``head_dim``). Bytes: all input and output tensors (read once, written once),
of a paged KV cache only the tokens the batch uses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from fibserve.bench.timing.inference_costs import inference_cost, nbytes
from fibserve.trace import Definition, Plausibility

TFLOP = 1e12
TB = 1e12


@dataclass(frozen=True)
class DevicePeak:
    """Peak dense throughputs of one device model."""

    name: str
    flops: dict[str, float]
    """Input dtype family (``bf16``, ``fp8``, ``fp32``) to FLOP/s."""
    bandwidth: float
    """DRAM bytes per second."""
    source: str
    """Where the numbers come from."""


_HOPPER_SXM = "NVIDIA {} Tensor Core GPU datasheet (SXM, dense: half the 'with sparsity' figures)"
PEAKS = [
    DevicePeak(
        "H200",
        {"bf16": 989 * TFLOP, "fp8": 1979 * TFLOP, "fp32": 494 * TFLOP},
        4.8 * TB,
        _HOPPER_SXM.format("H200"),
    ),
    DevicePeak(
        "H100 PCIe",
        {"bf16": 756 * TFLOP, "fp8": 1513 * TFLOP, "fp32": 378 * TFLOP},
        2.0 * TB,
        "NVIDIA H100 Tensor Core GPU datasheet (PCIe, dense)",
    ),
    DevicePeak(
        "H100",
        {"bf16": 989 * TFLOP, "fp8": 1979 * TFLOP, "fp32": 494 * TFLOP},
        3.35 * TB,
        _HOPPER_SXM.format("H100"),
    ),
    DevicePeak(
        "B200",
        {"bf16": 2250 * TFLOP, "fp8": 4500 * TFLOP, "fp32": 1100 * TFLOP},
        8.0 * TB,
        "NVIDIA HGX B200 specification (dense)",
    ),
]
"""Checked in order; the first whose name is contained in the device name wins (``H100 PCIe`` before ``H100``)."""


def device_peak(device_name: str | None) -> DevicePeak | None:
    """The peak table entry for a device name such as ``NVIDIA H200``; None when unknown."""
    if not device_name:
        return None
    upper = device_name.upper()
    for peak in PEAKS:
        if all(part in upper for part in peak.name.upper().split()):
            return peak
    return None


def _family(dtype: torch.dtype) -> str:
    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return "fp8"
    if dtype in (torch.float16, torch.bfloat16):
        return "bf16"
    return "fp32"


def workload_cost(
    definition: Definition, axes: Mapping[str, int], inputs: Mapping[str, Any], outputs: Mapping[str, Any]
) -> tuple[float, float, str] | None:
    """``(flops, bytes, dtype family)`` for GEMM, attention, GDN and FP8 GEMM definitions (module docstring);
    None for other op types."""
    op = definition.op_type.lower()
    tensors = [v for v in inputs.values() if isinstance(v, torch.Tensor)]
    family = _family(max(tensors, key=lambda t: t.numel()).dtype) if tensors else "fp32"
    out_bytes = sum(nbytes(v) for v in outputs.values())
    if op == "gemm" and all(k in axes for k in ("M", "N", "K")):
        flops = 2.0 * axes["M"] * axes["N"] * axes["K"]
        return flops, float(sum(nbytes(v) for v in inputs.values()) + out_bytes), family
    if op in DENSE_MHA and all(k in axes for k in ("batch_size", "num_heads", "head_dim")):
        return _mha_cost(definition, axes, inputs, family, out_bytes)
    cost = inference_cost(definition, axes, inputs, outputs)
    if cost is not None:
        return cost
    if op in ("gqa", "mha", "mla", "attention") or "attention" in op:
        heads = next((axes[k] for k in ("num_qo_heads", "num_heads", "num_q_heads") if k in axes), None)
        dims = [v for k, v in axes.items() if "head_dim" in k and "vo" not in k]
        if heads is None or not dims:
            return None
        return _dense_attention(axes, inputs, heads, max(dims), family, out_bytes)
    return None


DENSE_MHA = {"mha": 1.0, "fp8_mha": 1.0, "mha_bwd": 2.5}
"""Dense multi-head attention op types -> FLOPs relative to the forward's ``4*B*H*Sq*Skv*D``."""


def _mha_cost(
    definition: Definition, axes: Mapping[str, int], inputs: Mapping[str, Any], family: str, out_bytes: int
) -> tuple[float, float, str] | None:
    """FLOPs of the PTXBench MHA families (module docstring) and the bytes of all inputs and outputs; the
    sequence lengths come from ``q`` [B, H, Sq, D] and ``k`` [B, H, Skv, D]."""
    q, k = inputs.get("q"), inputs.get("k")
    if not (isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and q.dim() == 4 and k.dim() == 4):
        return None
    forward = 4.0 * axes["batch_size"] * axes["num_heads"] * q.shape[2] * k.shape[2] * axes["head_dim"]
    flops = forward * DENSE_MHA[definition.op_type.lower()] * (0.5 if "causal" in definition.tags else 1.0)
    total = sum(nbytes(v) for v in inputs.values()) + out_bytes
    return flops, float(total), family


def _dense_attention(
    axes: Mapping[str, int], inputs: Mapping[str, Any], heads: int, head_dim: int, family: str, out_bytes: int
) -> tuple[float, float, str] | None:
    """Dense (unpaged) attention with tensors ``q`` and ``k``: per batch and head ``Sq * Skv * D``
    multiply-adds for QK^T (the floor: PV doubles it, a causal mask halves it)."""
    q, k = inputs.get("q"), inputs.get("k")
    if not (isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor)):
        return None
    batch = axes.get("batch_size", 1)
    kv_heads = axes.get("num_kv_heads", heads)
    seq_q = q.numel() // max(batch * heads * head_dim, 1)
    seq_kv = k.numel() // max(batch * kv_heads * head_dim, 1)
    flops = 2.0 * batch * heads * head_dim * seq_q * seq_kv
    total = sum(nbytes(v) for v in inputs.values()) + out_bytes
    return flops, float(total), family


def check_plausibility(
    device_name: str | None,
    latency_ms: float,
    definition: Definition,
    axes: Mapping[str, int],
    inputs: Mapping[str, Any],
    outputs: Mapping[str, Any],
) -> Plausibility | None:
    """The roofline verdict for one measured latency, or None when the device or op type is unknown.

    ``flagged`` is True when ``latency_ms < floor_ms``; ``roofline_fraction`` is ``floor_ms / latency_ms`` (1.0
    at the roofline); ``bound`` says which peak sets the floor (``compute`` or ``memory``). The verdict is
    written to ``correctness.extra.plausibility`` and, as :meth:`~fibserve.trace.Plausibility.roofline`, to
    ``performance.extra.roofline``.
    """
    peak = device_peak(device_name)
    cost = workload_cost(definition, axes, inputs, outputs)
    if peak is None or cost is None or not (latency_ms > 0) or math.isnan(latency_ms):
        return None
    flops, nbytes, family = cost
    floor_s = max(flops / peak.flops[family], nbytes / peak.bandwidth)
    seconds = latency_ms / 1e3
    return Plausibility(
        device_model=peak.name,
        dtype_family=family,
        flops=flops,
        bytes=nbytes,
        floor_ms=floor_s * 1e3,
        latency_ms=latency_ms,
        achieved_tflops=flops / seconds / TFLOP,
        achieved_tb_s=nbytes / seconds / TB,
        flagged=seconds < floor_s,
        roofline_fraction=floor_s / seconds,
        bound="compute" if flops / peak.flops[family] >= nbytes / peak.bandwidth else "memory",
        peak_tflops=peak.flops[family] / TFLOP,
        peak_tb_s=peak.bandwidth / TB,
        peak_source=peak.source,
    )
