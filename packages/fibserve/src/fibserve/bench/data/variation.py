"""Fresh input content for every timed call (trusted side), so that no answer can be cached by content.

A kernel that hashes a few values of its inputs and, on a hit, copies a stored result instead of computing
passed every check while the timed calls repeated a handful of input sets: its cache was always right. So
every timed call (warm-up included) gets inputs never seen before in the evaluation: each *variable* input of
the slot's input set is rolled by a random number of elements (over the flattened tensor) and scaled by a
random factor, written into the worker's buffer outside the timed region. Both change every element's value
(a roll moves every value, the factor changes it) while keeping what the workload means: the values stay
draws of the same distribution at the same shapes.

Which inputs are variable (:func:`variable_inputs`): floating tensors (fp32, fp16, bf16) that the workload
draws at random and that nothing else depends on. Kept as they are: index-like inputs (page tables, indptr,
lengths: their values are structure), FP8 tensors and their scales (quantized together), a gated delta net's
unit-norm ``q`` and ``k`` (a roll over the flattened tensor splices two rows, whose norm is then up to
sqrt(2): the delta rule's ``I - beta k k^T`` stops being a contraction, :mod:`fibserve.bench.data.gdn`), scalars, inputs
from safetensors or given as scalars, and both the inputs a reference's ``derive_inputs`` reads and those it
returns (the attention backward's ``o`` and ``lse`` are the forward of ``q``, ``k``, ``v``; its ``do`` is
still varied). A kernel can then cache on a kept input alone only by returning outputs that are wrong for the
varied ones, which the validation of timed outputs catches.

What a varied call computes is checked against the reference of its own inputs
(:meth:`Variation.inputs`), computed after the call, outside the timed region, for the calls that are
validated in full (a sample, and after every trial the last call of one slot per input set).
"""

from __future__ import annotations

import ast
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from fibserve.bench.data.derived import scale_partner
from fibserve.bench.data.gdn import UNIT, is_gdn
from fibserve.bench.data.inputs import has_index_rule
from fibserve.trace import Definition, DType, Workload
from fibserve.trace.python_ast import parse_python

VARIABLE_DTYPES = (DType.FLOAT32, DType.FLOAT16, DType.BFLOAT16)
"""Dtypes a variable input may have (FP8 tensors are quantized with their scales, so they are kept)."""

FACTOR_RANGES = ((0.75, 0.98), (1.02, 1.25))
"""Where a call's scale factor is drawn from: at least 2% away from 1, more than a bfloat16 ulp (0.4%), so a
scaled element always changes, and at most 25% away, so the values keep their size."""


@dataclass(frozen=True)
class Variation:
    """How one timed call's inputs differ from input set ``input_set``: each input named in ``shifts`` is
    rolled by that many elements (flattened) and multiplied by ``factor``; the others are the set's own."""

    input_set: int
    factor: float = 1.0
    shifts: Mapping[str, int] = field(default_factory=dict)

    def varied(self, name: str, base: torch.Tensor) -> torch.Tensor:
        """Input ``name`` of this call, computed from the set's tensor ``base`` (a new tensor)."""
        return self._write(torch.empty_like(base), name, base)

    def _write(self, target: torch.Tensor, name: str, base: torch.Tensor) -> torch.Tensor:
        rolled = torch.roll(base.reshape(-1), self.shifts[name])
        torch.mul(rolled, self.factor, out=target.view(-1))
        return target

    def write(self, views: Mapping[str, torch.Tensor], base: Mapping[str, Any]) -> None:
        """Write this call's variable inputs into ``views`` (a slot's input buffers; the kept inputs are left
        as they are: the slot was filled with the set's inputs before)."""
        for name in self.shifts:
            self._write(views[name], name, base[name])

    def inputs(self, base: Mapping[str, Any]) -> dict[str, Any]:
        """This call's whole input dict (name -> tensor or scalar), for its reference."""
        return {name: self.varied(name, value) if name in self.shifts else value for name, value in base.items()}


def draw(names: list[str], base: Mapping[str, Any], input_set: int, rng: random.Random) -> Variation:
    """A fresh :class:`Variation` of input set ``input_set`` (whose inputs are ``base``) over ``names``."""
    if not names:
        return Variation(input_set)
    low, high = rng.choice(FACTOR_RANGES)
    shifts = {name: rng.randrange(1, max(2, base[name].numel())) for name in names}
    return Variation(input_set, rng.uniform(low, high), shifts)


def variable_inputs(definition: Definition, workload: Workload) -> list[str]:
    """The inputs of ``workload`` that may change from call to call (see the module docstring), in definition
    order."""
    kept = _derivation_inputs(definition.reference)
    if kept is None:
        return []
    variable = []
    for name, spec in definition.inputs.items():
        if (
            spec.shape is not None
            and workload.inputs[name].type == "random"
            and spec.dtype in VARIABLE_DTYPES
            and not has_index_rule(name, spec.dtype)
            and not _is_scale(definition, name)
            and not (is_gdn(definition) and name in UNIT)
            and name not in kept
        ):
            variable.append(name)
    return variable


def _is_scale(definition: Definition, name: str) -> bool:
    return any(scale_partner(definition, other) == name for other in definition.inputs)


def _derivation_inputs(reference: str) -> set[str] | None:
    """Every input a reference's ``derive_inputs`` reads (its parameters) or returns (the keys of the dict it
    returns); None when the returned keys cannot be read from its source: then every input is kept, nothing
    varied rather than something inconsistent."""
    try:
        tree = parse_python(reference)
    except SyntaxError:
        return set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "derive_inputs":
            names = {arg.arg for arg in node.args.args}
            for ret in (n for n in ast.walk(node) if isinstance(n, ast.Return)):
                if not isinstance(ret.value, ast.Dict):
                    return None
                names |= {key.value for key in ret.value.keys if isinstance(key, ast.Constant)}
            return names
    return set()
