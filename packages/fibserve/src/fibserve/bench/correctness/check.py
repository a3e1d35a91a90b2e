"""Correctness of one workload (trusted side): every input set through the same slot, outputs judged.

Every input set is copied into the *same* worker buffer slot (so a kernel that caches results keyed by
pointer returns stale outputs for the second set), outputs are poisoned, the candidate is called, its outputs
compared with the reference, and its inputs compared bitwise with a pristine copy. :func:`judge` is also how
the timing loop (:mod:`fibserve.bench.timing.loop`) validates timed outputs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import torch

from fibserve.bench.config import EvalConfig
from fibserve.bench.correctness.compare import ComparisonResult, compare_outputs
from fibserve.bench.failures import CandidateFailure
from fibserve.bench.worker.buffers import bitwise_equal
from fibserve.bench.worker.pool import WorkerProcess
from fibserve.bench.worker.slots import Slots, WorkloadData, fill, poison, scalars, worker_call
from fibserve.trace import Correctness, EvaluationStatus


def correctness_of(result: ComparisonResult, config: EvalConfig, extra: dict[str, Any]) -> Correctness:
    """The Correctness of a comparison: the largest errors, and per output and overall ``extra`` facts
    (matched ratio, the tolerances it was judged by) plus ``extra``."""
    max_abs, max_rel = result.max_errors()
    outputs = {
        o.name: {
            "max_absolute_error": o.stats.max_absolute_error,
            "max_relative_error": o.stats.max_relative_error,
            "matched_ratio": o.stats.matched_ratio,
            "nan_count": o.stats.nan_count,
            "relative_l2_error": o.stats.relative_l2_error,
            "decided_by": o.decided_by,
        }
        for o in result.outputs
        if o.stats
    }
    return Correctness(
        max_absolute_error=max_abs,
        max_relative_error=max_rel,
        extra={
            "matched_ratio": result.min_matched_ratio(),
            "atol": config.atol,
            "rtol": config.rtol,
            "required_matched_ratio": config.required_matched_ratio,
            "outputs": outputs,
            **extra,
        },
    )


def _untouched(outputs: dict[str, torch.Tensor]) -> list[str]:
    """Outputs still entirely holding the NaN/sentinel poison (the kernel wrote nothing there)."""
    names = []
    for name, t in outputs.items():
        if t.numel() == 0:
            continue
        if (t.dtype.is_floating_point and t.dtype.itemsize > 1 and bool(torch.isnan(t.float()).all())) or (
            not t.dtype.is_floating_point
            and t.dtype != torch.bool
            and bool((t == torch.iinfo(t.dtype).min).all())
        ):
            names.append(name)
    return names


def judge(
    slots: Slots,
    slot: int,
    data: WorkloadData,
    input_set: int,
    config: EvalConfig,
    phase: str,
    references: Mapping[str, torch.Tensor] | None = None,
) -> ComparisonResult:
    """Compare slot outputs with the reference of ``input_set`` (or with ``references``, the reference of the
    call's own inputs when they were varied); raise CandidateFailure on a mismatch."""
    slots.require_alive()
    actual = {n: t.clone() for n, t in slots.outputs[slot].items()}
    result = compare_outputs(
        actual,
        data.references[input_set] if references is None else references,
        data.output_dtypes,
        atol=config.atol,
        rtol=config.rtol,
        required_matched_ratio=config.required_matched_ratio,
        chunk=config.compare_chunk_elements,
        norm_checked=data.degenerate.norm_checked,
    )
    if result.status is EvaluationStatus.PASSED:
        return result
    extra: dict[str, Any] = {"phase": phase, "input_set": input_set, "degenerate": data.degenerate.as_dict()}
    untouched = _untouched(actual)
    message = f"{phase}, input set {input_set}: {result.message}"
    if untouched:
        extra["outputs_untouched"] = untouched
        message += (
            f"; outputs {untouched} still hold the poison written before the call (nothing was written)"
        )
    correctness = (
        correctness_of(result, config, extra)
        if result.status is EvaluationStatus.INCORRECT_NUMERICAL
        else None
    )
    raise CandidateFailure(result.status, message, correctness, worker_dead=False)


TORCH_AT_RUN_TIME = "python.torch-at-run-time"
"""Rule id of PyTorch compute found while a Triton candidate ran (:mod:`fibserve.bench.worker.torch_audit`)."""


def check_correctness(
    worker: WorkerProcess,
    slots: Slots,
    data: WorkloadData,
    config: EvalConfig,
    device: torch.device,
    *,
    audit_torch: bool = False,
) -> tuple[ComparisonResult, float]:
    """Run every input set through slot 0 and judge it; returns the last comparison and the call wall ms.

    ``audit_torch`` (Triton candidates under the source policy): each call runs under the worker's PyTorch
    operator audit, and a candidate whose own code ran PyTorch compute fails with COMPILE_ERROR and the
    source-policy rule :data:`TORCH_AT_RUN_TIME`, naming the operators.

    Raises:
        CandidateFailure: the candidate failed, computed wrong values, changed its inputs or ran PyTorch
            compute (see ``audit_torch``).
    """
    result = None
    wall_ms = 0.0
    for k, inputs in enumerate(data.inputs):
        fill(slots, 0, inputs, device)
        poison(slots, 0, device)
        started = time.perf_counter()
        what = f"correctness call, input set {k}"
        request = {"slot": 0, "scalars": scalars(data, k), "timed": False, "audit_torch": audit_torch}
        times = worker_call(worker, request, config.timeouts.correctness, what)
        wall_ms = (time.perf_counter() - started) * 1e3
        if audit_torch:
            _refuse_torch_compute(times.torch_ops, what)
        result = judge(slots, 0, data, k, config, "correctness")
        if config.check_input_mutation:
            mutated = [n for n, view in slots.inputs[0].items() if not bitwise_equal(view, inputs[n])]
            if mutated:
                correctness = correctness_of(
                    result, config, {"phase": "correctness", "input_set": k, "input_mutated": mutated}
                )
                raise CandidateFailure(
                    EvaluationStatus.INCORRECT_NUMERICAL,
                    f"the candidate modified its inputs {mutated} (input set {k}); inputs are read-only",
                    correctness,
                    worker_dead=False,
                )
    return result, wall_ms


def _refuse_torch_compute(ops: list[str] | None, what: str) -> None:
    if ops is None:
        raise CandidateFailure(EvaluationStatus.RUNTIME_ERROR, f"{what}: the worker did not report its audit")
    if ops:
        names = ", ".join(f"aten.{op}" for op in ops)
        raise CandidateFailure(
            EvaluationStatus.COMPILE_ERROR,
            f"source policy / ABI check failed:\n[{TORCH_AT_RUN_TIME}] {what}: the solution's own code ran "
            f"PyTorch operators ({names}), which this benchmark forbids in Triton solutions (operators and "
            "tensor methods included); allocate with torch.empty and compute inside @triton.jit kernels.",
        )
