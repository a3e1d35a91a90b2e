"""Inputs that depend on other inputs (trusted side): FP8 tensors with their scales, and inputs a
definition's reference derives from the others.

Random normals are wrong for both:

* **FP8 with a scale.** An ``float8_e4m3fn``/``float8_e5m2`` input ``X`` next to a floating input ``X_scale``
  is quantized from bf16 standard normals: ``scale = amax / fp8_max`` over every element that shares one scale
  (the scale's shape is a prefix of X's: ``[]`` per tensor, ``[B, H]`` per (batch, head)), ``X = (x / scale)``
  rounded to the format and ``X_scale = scale``, so ``X * X_scale`` is close to ``x`` and uses the format's
  whole range. Clamped normals instead would leave e4m3's range mostly empty and the scale meaningless.
* **A reference's ``derive_inputs``.** When a definition's reference source also defines
  ``derive_inputs(<some input names>)``, the harness calls it with those inputs (generated as usual) and
  replaces the inputs it returns (a dict name -> tensor of the definition's shape and dtype). The attention
  backward uses it: its ``o`` and ``lse`` are the forward of ``q``, ``k``, ``v``, never random, and a fully
  masked row's ``lse`` is then ``-inf`` exactly as the forward gives it. Inputs a workload gives as scalars or
  safetensors are kept as given.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import torch

from fibserve.trace import Definition, Workload

from fibserve.bench.data.reference import ReferenceError, reference_namespace

SCALE_SUFFIX = "_scale"

FP8_BLOCK = 128
"""Elements along a blocked dimension that share one FP8 scale (1x128 and 128x128 blocks, DeepSeek-V3)."""


class DerivedInputError(ValueError):
    """An input cannot be derived (a bad definition or reference: a task-level problem)."""


def scale_partner(definition: Definition, name: str) -> str | None:
    """``name + "_scale"`` when the definition has such a floating input (X's dequantization scale), else None."""
    partner = name + SCALE_SUFFIX
    spec = definition.inputs.get(partner)
    return partner if spec is not None and spec.dtype.is_floating_point else None


def quantize_fp8(
    values: torch.Tensor, dtype: torch.dtype, scale_shape: tuple[int, ...]
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q, scale)`` with ``q * scale ~= values``, ``scale = amax / finfo(dtype).max`` over the elements that
    share a scale (1 where they are all zero), in fp32. Two layouts of ``scale_shape``:

    * a prefix of ``values.shape`` (``()`` for one scale): one scale per leading index, e.g. ``[B, H]`` per
      (batch, head) of ``[B, H, S, D]``;
    * the same rank as ``values``: blocks, ``ceil(dim / scale_dim)`` elements along each dimension, the last
      block of a dimension possibly shorter; e.g. ``[M, K / 128]`` for 1x128 activation blocks of ``[M, K]``
      and ``[N / 128, K / 128]`` for 128x128 weight blocks of ``[N, K]`` (the DeepSeek-V3 convention).

    Args:
        values: the high-precision tensor (e.g. bf16 normals), any float dtype.
        dtype: ``torch.float8_e4m3fn`` or ``torch.float8_e5m2``.
        scale_shape: the scale's shape.

    Raises:
        DerivedInputError: ``scale_shape`` is neither a prefix of ``values.shape`` nor a block grid of it.
    """
    if len(scale_shape) == values.dim() and tuple(scale_shape) != tuple(values.shape):
        return _quantize_blocks(values, dtype, tuple(scale_shape))
    if tuple(values.shape[: len(scale_shape)]) != tuple(scale_shape):
        raise DerivedInputError(
            f"a scale of shape {tuple(scale_shape)} must be a prefix of its tensor's shape {tuple(values.shape)} "
            "or a grid of blocks of it (same rank)"
        )
    wide = values.float()
    reduce_dims = tuple(range(len(scale_shape), wide.dim()))
    amax = wide.abs().amax(dim=reduce_dims) if reduce_dims else wide.abs()
    scale = _scale_of(amax, dtype)
    expand = scale.reshape(*scale.shape, *([1] * len(reduce_dims)))
    return (wide / expand).to(dtype), scale.reshape(scale_shape)


def block_sizes(shape: tuple[int, ...], scale_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Elements per block along each dimension when ``scale_shape`` is a block grid of ``shape``: 1 where
    the scale has the tensor's extent (one scale per row), else :data:`FP8_BLOCK` (``ceil(dim / 128)``
    scales, the last block of the dimension possibly shorter).

    Raises:
        DerivedInputError: a scale dimension is neither the tensor's extent nor ``ceil(dim / 128)``.
    """
    sizes = []
    for dim, blocks in zip(shape, scale_shape, strict=True):
        if blocks == dim:
            sizes.append(1)
        elif blocks == -(-dim // FP8_BLOCK):
            sizes.append(FP8_BLOCK)
        else:
            raise DerivedInputError(
                f"a scale of shape {scale_shape} does not block a tensor of shape {shape}: each scale dimension "
                f"must be the tensor's extent or ceil(extent / {FP8_BLOCK})"
            )
    return tuple(sizes)


def _quantize_blocks(
    values: torch.Tensor, dtype: torch.dtype, scale_shape: tuple[int, ...]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Block quantization (see :func:`quantize_fp8`): pad to whole blocks, one amax per block, unpad."""
    sizes = block_sizes(tuple(values.shape), scale_shape)
    wide = values.float()
    pad = [(0, s * n - d) for d, s, n in zip(wide.shape, sizes, scale_shape, strict=True)]
    padded = torch.nn.functional.pad(wide, [p for pair in reversed(pad) for p in pair])
    split_shape = [x for n, s in zip(scale_shape, sizes, strict=True) for x in (n, s)]
    blocks = padded.reshape(split_shape)
    inner = tuple(range(1, 2 * len(sizes), 2))
    scale = _scale_of(blocks.abs().amax(dim=inner), dtype)
    expanded = scale.reshape([x for n in scale_shape for x in (n, 1)])
    quantized = (blocks / expanded).reshape(padded.shape)
    return quantized[tuple(slice(0, d) for d in wide.shape)].to(dtype), scale


def _scale_of(amax: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.where(amax > 0, amax / torch.finfo(dtype).max, torch.ones_like(amax))


def derive_inputs_(definition: Definition, workload: Workload, inputs: dict[str, Any]) -> None:
    """Replace, in place, the random inputs that the reference's ``derive_inputs`` computes (see above).

    Raises:
        DerivedInputError: ``derive_inputs`` asks for an unknown input, raises, or returns a value that is not
            an input of the definition's shape and dtype.
    """
    try:
        derive = reference_namespace(definition).get("derive_inputs")
    except ReferenceError as exc:
        raise DerivedInputError(str(exc)) from None
    if not callable(derive):
        return
    wanted = list(inspect.signature(derive).parameters)
    unknown = [n for n in wanted if n not in inputs]
    if unknown:
        raise DerivedInputError(f"derive_inputs of {definition.name!r} asks for unknown inputs {unknown}")
    try:
        with torch.no_grad():
            derived = derive(**{n: inputs[n] for n in wanted})
    except Exception as exc:
        raise DerivedInputError(f"derive_inputs of {definition.name!r} raised {exc!r}") from exc
    if not isinstance(derived, Mapping):
        raise DerivedInputError(f"derive_inputs of {definition.name!r} returned {type(derived).__name__}")
    for name, value in derived.items():
        _check_derived(definition, inputs, name, value, wanted)
        if workload.inputs[name].type == "random":
            inputs[name] = value


def _check_derived(
    definition: Definition, inputs: dict[str, Any], name: str, value: Any, wanted: list
) -> None:
    if name not in definition.inputs or name in wanted:
        raise DerivedInputError(
            f"derive_inputs of {definition.name!r} returned {name!r}, which is not an input it may derive"
        )
    want = inputs[name]
    same = isinstance(value, torch.Tensor) and isinstance(want, torch.Tensor)
    if not same or value.shape != want.shape or value.dtype != want.dtype:
        got = (
            f"{tuple(value.shape)} {value.dtype}" if isinstance(value, torch.Tensor) else type(value).__name__
        )
        expected = f"{tuple(want.shape)} {want.dtype}" if isinstance(want, torch.Tensor) else "a tensor"
        raise DerivedInputError(
            f"derive_inputs of {definition.name!r} returned {name!r} as {got}; the definition wants {expected}"
        )
    if value.device != want.device:
        raise DerivedInputError(f"derive_inputs of {definition.name!r} returned {name!r} on {value.device}")
