"""Degenerate workloads (trusted side): reference outputs that the elementwise check
``|x - y| <= atol + rtol * |y|`` cannot tell apart from a kernel that writes zeros or a constant.

Judged per output over every input set of a workload, from the reference outputs alone (before the candidate
runs), with the evaluation's ``atol`` and ``rtol``; ``c`` is the midpoint of the output's smallest and largest
value over all input sets and ``h`` half their distance:

- ``near_constant``: ``h <= atol + rtol * |c|``, so a kernel that writes ``c`` everywhere without reading its
  inputs passes the elementwise check; outputs that all lie within ``atol`` of zero are the usual case, and
  zeros pass too. The defence (:func:`fibserve.bench.correctness.compare.compare_outputs`, ``norm_checked``): such an
  output must also meet the relative-norm check ``||x - y||_2 <= rtol * ||y||_2``, which zeros fail (their
  relative error is 1) and so does a constant unless the output really is one. A request that raises ``atol``
  above the outputs' spread (an unlocked server, ``atol: 1e308``) makes every output near-constant, so it meets
  the same check.
- ``constant``: near-constant, and the mean ``m`` passes both checks too (``max|y - m| <= atol + rtol *
  |m|`` and ``||y - m||_2 <= rtol * ||y||_2``; integer and bool outputs: every element is the same value):
  no comparison of outputs can tell a kernel that writes ``m`` from a correct one (softmax over an axis of
  length 1 is all ones; a request's ``rtol`` of 1 or more makes zeros pass the norm check).

A workload whose every output is constant is refused (a workload error that names it; the candidate is not
judged on it); a constant output beside others that are not is recorded in the correctness record, and the
others decide.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch

Kind = Literal["constant", "near_constant"]


@dataclass(frozen=True)
class Degeneracy:
    """The degenerate outputs of one workload."""

    kinds: dict[str, Kind] = field(default_factory=dict)
    """Output name -> its kind; outputs that discriminate are absent."""
    values: dict[str, float] = field(default_factory=dict)
    """Output name -> the constant (its mean) of a ``constant`` output."""

    @property
    def norm_checked(self) -> frozenset[str]:
        """Outputs held to the relative-norm check as well (near-constant and constant ones)."""
        return frozenset(self.kinds)

    def refusal(self, outputs: Sequence[str], atol: float, rtol: float) -> str | None:
        """Why the workload cannot be judged (every one of ``outputs`` is constant), else None."""
        if not outputs or any(self.kinds.get(name) != "constant" for name in outputs):
            return None
        values = ", ".join(f"{name}={self.values[name]:g}" for name in outputs)
        return (
            f"degenerate workload: on every input set each reference output is matched by one constant "
            f"({values}) under atol={atol:g} and rtol={rtol:g}, elementwise and in relative norm, so a kernel that "
            "writes those constants without reading its inputs would pass every check; the workload is not "
            "evaluated (choose axes or inputs whose outputs vary, or tighter tolerances)"
        )

    def as_dict(self) -> dict[str, str]:
        """Output name -> kind, for the correctness record."""
        return dict(self.kinds)


def degeneracy(references: Sequence[Mapping[str, torch.Tensor]], *, atol: float, rtol: float) -> Degeneracy:
    """Classify every output of ``references`` (input set -> output name -> reference tensor, any dtype and
    device) as ``constant``, ``near_constant`` or neither (see the module docstring). Empty outputs and outputs
    holding a NaN or an infinity are never degenerate. Costs a min, a max and two sums per output and input
    set."""
    kinds: dict[str, Kind] = {}
    values: dict[str, float] = {}
    if not references:
        return Degeneracy()
    for name in references[0]:
        stats = [_stats(refs[name]) for refs in references if name in refs]
        if len(stats) != len(references) or any(st is None for st in stats):
            continue
        known = [st for st in stats if st is not None]
        low, high = min(st[0] for st in known), max(st[1] for st in known)
        centre, half = (low + high) / 2, (high - low) / 2
        if not references[0][name].dtype.is_floating_point:
            if low == high:
                kinds[name], values[name] = "constant", centre
            continue
        if half > atol + rtol * abs(centre):
            continue
        n, total, squares = (sum(st[i] for st in known) for i in (2, 3, 4))
        mean = total / n
        spread = max(high - mean, mean - low)
        deviation = max(0.0, squares - n * mean * mean)  # sum of (y - mean)^2
        if spread <= atol + rtol * abs(mean) and deviation <= rtol * rtol * squares:
            kinds[name], values[name] = "constant", mean
        else:
            kinds[name] = "near_constant"
    return Degeneracy(kinds, values)


def _stats(tensor: torch.Tensor) -> tuple[float, float, int, float, float] | None:
    """(min, max, count, sum, sum of squares) of ``tensor`` as floats (sums in float64); None when it is
    empty or holds a NaN or an infinity."""
    if tensor.numel() == 0:
        return None
    values = tensor if tensor.dtype != torch.bool else tensor.to(torch.uint8)
    if values.dtype.is_floating_point and values.dtype.itemsize == 1:
        values = values.float()  # fp8 has no min/max kernels
    low, high = float(values.min()), float(values.max())
    if not (abs(low) < float("inf") and abs(high) < float("inf")):
        return None
    flat = values.reshape(-1)
    total = float(flat.sum(dtype=torch.float64))
    squares = float(flat.float().square().sum(dtype=torch.float64))
    return low, high, flat.numel(), total, squares
