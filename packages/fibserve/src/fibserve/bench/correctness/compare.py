"""Correctness comparison of candidate outputs with reference outputs (trusted side).

Rules, applied to each output in order:

1. shape must equal the expected shape, else ``INCORRECT_SHAPE``;
2. dtype must equal the definition's dtype, else ``INCORRECT_DTYPE``;
3. floating outputs: element ``x`` matches reference ``y`` when ``|x - y| <= atol + rtol * |y|``, computed in
   fp32 in chunks of ``chunk`` elements; NaN (in either) never matches; +inf/-inf match only the same inf.
   Integer and bool outputs match only when equal. An output passes when its matched ratio is at least
   ``required_matched_ratio``, else ``INCORRECT_NUMERICAL``;
4. outputs named in ``norm_checked`` (a workload's near-constant outputs, :mod:`fibserve.bench.data.degenerate`) must also
   meet ``||x - y||_2 <= rtol * ||y||_2``, else ``INCORRECT_NUMERICAL``. Each output records which checks
   decided it (``decided_by``).

Reported errors: ``max_absolute_error = max |x - y|`` and ``max_relative_error = max |x - y| / |y|`` (with
``|y|`` floored at 1e-12), both NaN when a NaN took part, inf when an infinity was missed; and
``relative_l2_error = ||x - y||_2 / ||y||_2`` (0 when both norms are 0, inf when only ``||y||`` is).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict

from fibserve.trace import EvaluationStatus

REL_FLOOR = 1e-12
"""Smallest ``|y|`` used as the denominator of the relative error."""


class TensorComparison(BaseModel):
    """Element statistics of one output against its reference (numerical part only)."""

    model_config = ConfigDict(extra="forbid")

    numel: int
    """Elements compared."""
    matched: int
    """Elements within tolerance."""
    nan_count: int
    """Elements where the candidate or the reference is NaN (never matched)."""
    max_absolute_error: float
    """Largest ``|x - y|`` (NaN when a NaN took part, inf when an infinity was missed)."""
    max_relative_error: float
    """Largest ``|x - y| / max(|y|, 1e-12)`` (same conventions)."""
    relative_l2_error: float = 0.0
    """``||x - y||_2 / ||y||_2`` over matched-or-not finite elements (NaN when a NaN took part)."""

    @property
    def matched_ratio(self) -> float:
        """``matched / numel`` (1.0 for an empty tensor)."""
        return 1.0 if self.numel == 0 else self.matched / self.numel


class OutputCheck(BaseModel):
    """The verdict on one output."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Output name."""
    status: EvaluationStatus
    """PASSED, INCORRECT_SHAPE, INCORRECT_DTYPE or INCORRECT_NUMERICAL."""
    message: str = ""
    """Why it failed, for people."""
    stats: TensorComparison | None = None
    """Numerical statistics (absent for shape and dtype failures)."""
    decided_by: Literal["shape", "dtype", "elementwise", "elementwise+relative_norm"] = "elementwise"
    """The checks that decided this output: ``elementwise+relative_norm`` for a near-constant output."""


class ComparisonResult(BaseModel):
    """The verdict on all outputs of one call: the first failing status wins (in output order)."""

    model_config = ConfigDict(extra="forbid")

    status: EvaluationStatus
    """PASSED or the first failure."""
    outputs: list[OutputCheck]
    """Per-output verdicts in output order."""

    @property
    def message(self) -> str:
        """The failure messages joined, or empty when PASSED."""
        return "; ".join(o.message for o in self.outputs if o.message)

    def max_errors(self) -> tuple[float, float]:
        """``(max_absolute_error, max_relative_error)`` over outputs with statistics (NaN dominates)."""
        abs_errors = [o.stats.max_absolute_error for o in self.outputs if o.stats]
        rel_errors = [o.stats.max_relative_error for o in self.outputs if o.stats]
        return _nan_max(abs_errors), _nan_max(rel_errors)

    def min_matched_ratio(self) -> float:
        """The smallest matched ratio over outputs with statistics (1.0 when none)."""
        ratios = [o.stats.matched_ratio for o in self.outputs if o.stats]
        return min(ratios) if ratios else 1.0


def _nan_max(values: Sequence[float]) -> float:
    if any(math.isnan(v) for v in values):
        return math.nan
    return max(values, default=0.0)


def compare_tensors(
    actual: torch.Tensor, expected: torch.Tensor, *, atol: float, rtol: float, chunk: int = 1 << 24
) -> TensorComparison:
    """Compare two tensors of the same shape element by element, ``chunk`` elements at a time.

    Args:
        actual: candidate output, any dtype and device.
        expected: reference output of the same shape (any dtype; it is converted to fp32 per chunk).
        atol, rtol: tolerances of ``|x - y| <= atol + rtol * |y|``.
        chunk: elements per fp32 chunk (bounds temporary memory to about ``12 * chunk`` bytes).

    Raises:
        ValueError: the shapes differ (check shapes first with :func:`compare_outputs`).
    """
    if tuple(actual.shape) != tuple(expected.shape):
        raise ValueError(f"shape {tuple(actual.shape)} != {tuple(expected.shape)}")
    exact = not (actual.dtype.is_floating_point or expected.dtype.is_floating_point)
    x_flat = actual.reshape(-1)
    y_flat = expected.reshape(-1).to(actual.device)
    numel = x_flat.numel()
    matched = nan_count = 0
    max_abs = max_rel = 0.0
    err_sq = ref_sq = 0.0
    for start in range(0, numel, chunk):
        work = torch.float64 if exact else torch.float32
        x = x_flat[start : start + chunk].to(work)
        y = y_flat[start : start + chunk].to(work)
        if exact:
            ok = x == y
            diff = (x - y).abs()
            nan = torch.zeros_like(ok)
        else:
            nan = torch.isnan(x) | torch.isnan(y)
            any_inf = torch.isinf(x) | torch.isinf(y)
            same_inf = torch.isinf(x) & (x == y)
            # An infinity matches only the same infinity: atol + rtol * inf would accept anything.
            diff = torch.where(same_inf, torch.zeros_like(x), (x - y).abs())
            ok = ~nan & torch.where(any_inf, same_inf, diff <= atol + rtol * y.abs())
        rel = diff / y.abs().clamp_min(REL_FLOOR)
        if not exact:
            rel = torch.where(any_inf & ~same_inf & ~nan, torch.full_like(rel, math.inf), rel)
        matched += int(ok.sum())
        finite = torch.isfinite(diff) & torch.isfinite(y)
        err_sq += float(torch.where(finite, diff, 0).square().sum(dtype=torch.float64))
        ref_sq += float(torch.where(finite, y, 0).square().sum(dtype=torch.float64))
        n_nan = int(nan.sum())
        nan_count += n_nan
        if n_nan:
            max_abs = max_rel = math.nan
        elif not math.isnan(max_abs) and diff.numel():
            max_abs = max(max_abs, float(diff.max()))
            max_rel = max(max_rel, float(rel.max()))
    if nan_count:
        rel_l2 = math.nan
    elif err_sq == 0.0:
        rel_l2 = 0.0
    else:
        rel_l2 = math.sqrt(err_sq) / math.sqrt(ref_sq) if ref_sq > 0 else math.inf
    if math.isinf(max_abs):
        rel_l2 = math.inf  # a missed infinity is excluded from the sums above
    return TensorComparison(
        numel=numel,
        matched=matched,
        nan_count=nan_count,
        max_absolute_error=max_abs,
        max_relative_error=max_rel,
        relative_l2_error=rel_l2,
    )


def compare_outputs(
    actual: Mapping[str, torch.Tensor],
    expected: Mapping[str, torch.Tensor],
    expected_dtypes: Mapping[str, torch.dtype],
    *,
    atol: float,
    rtol: float,
    required_matched_ratio: float = 1.0,
    chunk: int = 1 << 24,
    norm_checked: Collection[str] = (),
) -> ComparisonResult:
    """Judge every output (see the module docstring for the rules).

    Args:
        actual: output name -> candidate tensor.
        expected: output name -> reference tensor (its shape is the expected shape).
        expected_dtypes: output name -> the definition's dtype for that output.
        atol, rtol, required_matched_ratio: tolerances from :class:`~fibserve.bench.config.EvalConfig`.
        chunk: elements per fp32 chunk.
        norm_checked: outputs also held to ``||x - y||_2 <= rtol * ||y||_2`` (near-constant references, where
            the elementwise check alone passes a kernel that writes zeros or a constant).

    Returns:
        Per-output checks; the overall status is the first non-PASSED one, else PASSED.
    """
    checks: list[OutputCheck] = []
    for name, ref in expected.items():
        out = actual.get(name)
        if not isinstance(out, torch.Tensor):
            checks.append(
                OutputCheck(
                    name=name,
                    status=EvaluationStatus.INCORRECT_SHAPE,
                    message=f"output {name!r} missing (got {type(out).__name__})",
                    decided_by="shape",
                )
            )
            continue
        if tuple(out.shape) != tuple(ref.shape):
            checks.append(
                OutputCheck(
                    name=name,
                    status=EvaluationStatus.INCORRECT_SHAPE,
                    message=f"output {name!r} has shape {tuple(out.shape)}, expected {tuple(ref.shape)}",
                    decided_by="shape",
                )
            )
            continue
        want = expected_dtypes[name]
        if out.dtype != want:
            checks.append(
                OutputCheck(
                    name=name,
                    status=EvaluationStatus.INCORRECT_DTYPE,
                    message=f"output {name!r} has dtype {out.dtype}, expected {want}",
                    decided_by="dtype",
                )
            )
            continue
        stats = compare_tensors(out, ref, atol=atol, rtol=rtol, chunk=chunk)
        ok = stats.matched_ratio >= required_matched_ratio
        message = ""
        if not ok:
            message = (
                f"output {name!r}: {stats.numel - stats.matched} of {stats.numel} elements outside "
                f"atol={atol:g} + rtol={rtol:g}*|ref| (matched ratio {stats.matched_ratio:.6f} < "
                f"{required_matched_ratio:g}; {stats.nan_count} NaN; max abs error "
                f"{stats.max_absolute_error:.4g}, max rel error {stats.max_relative_error:.4g})"
            )
        norm = name in norm_checked
        if ok and norm and not stats.relative_l2_error <= rtol:
            ok = False
            message = (
                f"output {name!r}: relative L2 error {stats.relative_l2_error:.4g} > rtol={rtol:g}; its reference "
                f"values all lie within atol={atol:g} + rtol*|value| of one constant (zero, typically), where the "
                "elementwise check alone would pass a kernel that writes that constant, so it is held to "
                "||out - ref|| <= rtol * ||ref|| too"
            )
        checks.append(
            OutputCheck(
                name=name,
                status=EvaluationStatus.PASSED if ok else EvaluationStatus.INCORRECT_NUMERICAL,
                message=message,
                stats=stats,
                decided_by="elementwise+relative_norm" if norm else "elementwise",
            )
        )
    status = next(
        (c.status for c in checks if c.status is not EvaluationStatus.PASSED), EvaluationStatus.PASSED
    )
    return ComparisonResult(status=status, outputs=checks)
