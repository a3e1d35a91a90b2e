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
    """``(q, scale)`` with ``q * scale ~= values``: one fp32 scale per leading index ``scale_shape`` of
    ``values`` (``()`` for one scale), ``scale = amax / finfo(dtype).max`` (1 where a block is all zero).

    Args:
        values: the high-precision tensor (e.g. bf16 normals), any float dtype.
        dtype: ``torch.float8_e4m3fn`` or ``torch.float8_e5m2``.
        scale_shape: leading dims of ``values`` that each have their own scale.

    Raises:
        DerivedInputError: ``scale_shape`` is not a prefix of ``values.shape``.
    """
    if tuple(values.shape[: len(scale_shape)]) != tuple(scale_shape):
        raise DerivedInputError(
            f"a scale of shape {tuple(scale_shape)} must be a prefix of its tensor's shape {tuple(values.shape)}"
        )
    wide = values.float()
    reduce_dims = tuple(range(len(scale_shape), wide.dim()))
    amax = wide.abs().amax(dim=reduce_dims) if reduce_dims else wide.abs()
    scale = torch.where(amax > 0, amax / torch.finfo(dtype).max, torch.ones_like(amax))
    expand = scale.reshape(*scale.shape, *([1] * len(reduce_dims)))
    return (wide / expand).to(dtype), scale.reshape(scale_shape)


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
