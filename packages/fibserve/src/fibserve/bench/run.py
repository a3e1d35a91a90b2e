"""One workload of one candidate: correctness, then interleaved timing (trusted side).

Correctness: every input set is copied into the *same* worker buffer slot (so a kernel that caches results
keyed by pointer returns stale outputs for the second set), outputs are poisoned, the candidate is called,
its outputs compared with the reference, and its inputs compared bitwise with a pristine copy.

Timing (on a GPU; the CPU tests run the same bookkeeping with ``perf_counter``): ``trials`` trials; in
trial ``t`` slot ``s`` holds input set ``(s + t) mod K`` (input rotation: the contents behind each pointer
change between trials); ``warmup`` untimed calls, then ``iterations`` pairs of one candidate call and one
call of what it is compared with (the baseline Solution, and the reference as often as its budget allows:
:mod:`fibserve.bench.sides`), in alternating order, each with cold L2 and device-wide synchronisation. All
sides are timed the same way, in worker processes of the same construction (the candidate's sandbox worker
and one timing twin per comparator, :mod:`fibserve.bench.reference_twin`): before each call the trusted side
poisons that side's outputs and sends one request. A twin's outputs are poisoned again after its call, so no
comparator's output sits in exported memory while the candidate runs. ``speedup_factor`` is the median of
the per-pair ratios ``primary / candidate`` (the baseline when the definition has one).

The defences on the timed calls (:mod:`fibserve.bench.timing_checks`): right after every candidate reply its
outputs must hold no poison, and a sample drawn then is compared in full; the last output of every slot in
every trial is compared in full; reported times must fit in the round trip timed here, and the candidate's
unexplained round trip must stay close to the twin's.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from fibserve.trace import Correctness, EvaluationStatus, Performance

from . import timing, twin_guard
from . import timing_checks as checks
from ._dtypes import poison_
from .buffers import bitwise_equal, open_buffer
from .compare import ComparisonResult, compare_outputs
from .config import EvalConfig
from .degenerate import Degeneracy
from .failures import CandidateFailure, DeviceShared, ReferenceTimingError, limit_failure
from .neighbour_bias import neighbour_bias
from .sandbox import WorkerError, WorkerProcess, live_worker_pids
from .sides import ReferencePlan, Side, check_side, comparison_extras, harness_fault, side_times

__all__ = [
    "CandidateFailure",
    "ReferenceTimingError",
    "Slots",
    "WorkloadData",
    "allocate_slots",
    "check_correctness",
    "judge",
    "measure",
    "untimed_performance",
]


@dataclass
class WorkloadData:
    """Trusted inputs and reference outputs of one workload, per input set."""

    inputs: list[dict[str, Any]]
    """Input set -> name -> tensor or scalar (definition order)."""
    references: list[dict[str, torch.Tensor]]
    """Input set -> output name -> reference tensor."""
    output_shapes: dict[str, tuple[int, ...]]
    output_dtypes: dict[str, torch.dtype]
    scalar_positions: dict[str, int] = field(default_factory=dict)
    """Scalar input name -> its position among the inputs."""
    reference_call_ms: float | None = None
    """Wall time of one reference call in the trusted process (ms; the fastest input set), None when the
    outputs came from the cache without a time: sizes the reference's timing budget."""
    degenerate: Degeneracy = field(default_factory=Degeneracy)
    """Outputs the elementwise check cannot judge alone (:mod:`fibserve.bench.degenerate`)."""


@dataclass
class Slots:
    """Trusted views of the worker's buffers: per slot, input name -> tensor and output name -> tensor."""

    inputs: list[dict[str, torch.Tensor]]
    outputs: list[dict[str, torch.Tensor]]
    worker: WorkerProcess | None = None
    """The worker that owns the memory: it must be alive whenever the trusted side touches the buffers."""

    def require_alive(self) -> None:
        """Raise a CandidateFailure (RUNTIME_ERROR) when the owning worker has exited, *before* the trusted
        process touches memory the dead process exported (which could fault in the trusted context)."""
        if self.worker is not None and not self.worker.alive:
            what = f"the worker exited unexpectedly (code {self.worker.proc.poll()})"
            if hit := self.worker.limit_hit():
                raise limit_failure(hit, what, self.worker.log_tail())
            raise CandidateFailure(EvaluationStatus.RUNTIME_ERROR, f"{what}\n{self.worker.log_tail()}")


class WorkerTimes(NamedTuple):
    """One call request's times (ms): the worker's ``ms``, ``bound_ms`` and ``overwrite_ms`` lists (one
    entry per repeat; see :func:`fibserve.bench.timing.time_call`) and the round trip timed here; and the
    persisting-L2 carve-out (bytes) each call left (:mod:`fibserve.bench.l2_state`)."""

    ms: list[float]
    bound: list[float]
    wall_ms: float
    overwrite: list[float]
    persisting_l2: tuple[int, ...] = ()
    gated: bool | None = None
    """Whether the worker's cold-L2 overwrite was the gate kernel (None: it did not say)."""


def _worker_call(
    worker: WorkerProcess, request: dict[str, Any], timeout: float, what: str, *, discount_post: bool = False
) -> WorkerTimes:
    """Send a call; returns the worker's times and the round trip's wall time here (ms).

    Every failure becomes a CandidateFailure (the worker is then discarded), including timings that could
    not have happened: a call's ``ms`` longer than its ``bound_ms``, or their sum longer than the round trip
    (a worker can only report less time than that). ``discount_post`` (the reference's twin only, never a
    candidate) subtracts the worker's reported untimed copy from the round trip."""
    started = time.perf_counter()
    try:
        reply = worker.request({"op": "call", **request}, timeout)
    except WorkerError as exc:
        if exc.limit is not None:
            raise limit_failure(exc.limit, what, exc.log) from None
        if exc.kind == "timeout":
            raise CandidateFailure(
                EvaluationStatus.TIMEOUT, f"{what}: no result within {timeout:.1f} s (limit)\n{exc.log}"
            ) from None
        detail = "crashed" if exc.kind == "died" else "broke the worker protocol"
        raise CandidateFailure(
            EvaluationStatus.RUNTIME_ERROR, f"{what}: the candidate {detail} ({exc})\n{exc.log}"
        ) from None
    if not reply.get("ok"):
        status = reply.get("status")
        log = f"{what}: {reply.get('error', 'error')}\n{worker.log_tail()}"
        if hit := worker.limit_hit(reply):
            raise limit_failure(hit, what, log)
        if status in ("INCORRECT_SHAPE", "INCORRECT_DTYPE"):
            raise CandidateFailure(EvaluationStatus(status), log)
        raise CandidateFailure(EvaluationStatus.RUNTIME_ERROR, log)
    ms, bound, overwrite = reply.get("ms"), reply.get("bound_ms"), reply.get("overwrite_ms")
    for values in (ms, bound, overwrite):
        if not isinstance(values, list) or not all(isinstance(x, (int, float)) and x >= 0 for x in values):
            raise CandidateFailure(EvaluationStatus.RUNTIME_ERROR, f"{what}: worker sent malformed timings")
    if not len(ms) == len(bound) == len(overwrite) or any(
        m > b + checks.WALL_SLACK_MS for m, b in zip(ms, bound, strict=True)
    ):
        raise CandidateFailure(EvaluationStatus.RUNTIME_ERROR, f"{what}: worker sent malformed timings")
    wall_ms = (time.perf_counter() - started) * 1e3
    if sum(bound) > wall_ms * (1 + checks.WALL_TOLERANCE) + checks.WALL_SLACK_MS:
        raise CandidateFailure(
            EvaluationStatus.RUNTIME_ERROR,
            f"{what}: the worker reported {sum(bound):.3f} ms of calls in a {wall_ms:.3f} ms round trip",
        )
    post = reply.get("post_ms")
    if discount_post and isinstance(post, (int, float)) and post > 0:
        wall_ms = max(sum(bound), wall_ms - float(post))
    persisting = reply.get("persisting_l2_bytes") or []
    kept = (
        tuple(int(x) for x in persisting if isinstance(x, int) and x >= 0)
        if isinstance(persisting, list)
        else ()
    )
    gated = reply.get("l2_gate")
    return WorkerTimes(
        [float(x) for x in ms],
        [float(x) for x in bound],
        wall_ms,
        [float(x) for x in overwrite],
        kept,
        gated if isinstance(gated, bool) else None,
    )


def allocate_slots(
    worker: WorkerProcess, data: WorkloadData, count: int, device: torch.device, timeout: float
) -> Slots:
    """Ask the worker for ``count`` slots of input and output buffers and map them here.

    Raises:
        WorkerError / BufferError: the allocation failed (infrastructure; the caller reports a task error).
    """
    from .buffers import buffer_spec

    first = data.inputs[0]
    tensor_inputs = [(n, v) for n, v in first.items() if isinstance(v, torch.Tensor)]
    specs, places = [], []

    def spec(shape: tuple[int, ...], dtype: torch.dtype, name: str) -> dict[str, Any]:
        inner = worker.workdir / f"buf-{name}.bin"
        places.append(worker.host_path(inner))
        return buffer_spec(shape, dtype, inner, places[-1])

    for s in range(count):
        specs.append(
            {
                "inputs": [spec(tuple(v.shape), v.dtype, f"{s}-in-{n}") for n, v in tensor_inputs],
                "outputs": [
                    spec(data.output_shapes[n], data.output_dtypes[n], f"{s}-out-{n}")
                    for n in data.output_shapes
                ],
            }
        )
    reply = worker.request({"op": "alloc", "slots": specs}, timeout)
    if not reply.get("ok"):
        raise WorkerError("protocol", f"buffer allocation failed in the worker: {reply.get('error')}")
    here = iter(places)
    slots = Slots([], [], worker)
    for spec_, handles in zip(specs, reply["slots"], strict=True):
        slots.inputs.append(
            {
                n: open_buffer(h, sp, device, next(here))
                for (n, _), sp, h in zip(tensor_inputs, spec_["inputs"], handles["inputs"], strict=True)
            }
        )
        slots.outputs.append(
            {
                n: open_buffer(h, sp, device, next(here))
                for n, sp, h in zip(data.output_shapes, spec_["outputs"], handles["outputs"], strict=True)
            }
        )
    return slots


def _fill(slots: Slots, slot: int, inputs: dict[str, Any], device: torch.device) -> None:
    slots.require_alive()
    for name, view in slots.inputs[slot].items():
        view.copy_(inputs[name])
    _sync(device)


def _poison(slots: Slots, slot: int, device: torch.device) -> None:
    slots.require_alive()
    for view in slots.outputs[slot].values():
        poison_(view)
    _sync(device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _scalars(data: WorkloadData, input_set: int) -> dict[str, Any]:
    return {str(pos): data.inputs[input_set][name] for name, pos in data.scalar_positions.items()}


def _correctness_of(result: ComparisonResult, config: EvalConfig, extra: dict[str, Any]) -> Correctness:
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
    slots: Slots, slot: int, data: WorkloadData, input_set: int, config: EvalConfig, phase: str
) -> ComparisonResult:
    """Compare slot outputs with the reference of ``input_set``; raise CandidateFailure on a mismatch."""
    slots.require_alive()
    actual = {n: t.clone() for n, t in slots.outputs[slot].items()}
    result = compare_outputs(
        actual,
        data.references[input_set],
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
        _correctness_of(result, config, extra)
        if result.status is EvaluationStatus.INCORRECT_NUMERICAL
        else None
    )
    raise CandidateFailure(result.status, message, correctness, worker_dead=False)


def check_correctness(
    worker: WorkerProcess, slots: Slots, data: WorkloadData, config: EvalConfig, device: torch.device
) -> tuple[ComparisonResult, float]:
    """Run every input set through slot 0 and judge it; returns the last comparison and the call wall ms."""
    result = None
    wall_ms = 0.0
    for k, inputs in enumerate(data.inputs):
        _fill(slots, 0, inputs, device)
        _poison(slots, 0, device)
        started = time.perf_counter()
        _worker_call(
            worker,
            {"slot": 0, "scalars": _scalars(data, k), "timed": False},
            config.timeouts.correctness,
            f"correctness call, input set {k}",
        )
        wall_ms = (time.perf_counter() - started) * 1e3
        result = judge(slots, 0, data, k, config, "correctness")
        if config.check_input_mutation:
            mutated = [n for n, view in slots.inputs[0].items() if not bitwise_equal(view, inputs[n])]
            if mutated:
                correctness = _correctness_of(
                    result, config, {"phase": "correctness", "input_set": k, "input_mutated": mutated}
                )
                raise CandidateFailure(
                    EvaluationStatus.INCORRECT_NUMERICAL,
                    f"the candidate modified its inputs {mutated} (input set {k}); inputs are read-only",
                    correctness,
                    worker_dead=False,
                )
    return result, wall_ms


def measure(
    slots: Slots, sides: list[Side], data: WorkloadData, config: EvalConfig, device: torch.device,
    reference_plan: ReferencePlan | None = None, definition: str = "",
) -> tuple[Performance, int]:  # fmt: skip
    """Interleaved timing with input rotation and validation (GPU; on CPU the same bookkeeping runs with
    ``perf_counter``). ``slots`` belong to the candidate's worker; each of ``sides`` (same slot layout) to a
    twin worker running what the candidate is compared with (:mod:`fibserve.bench.sides`; the first is the
    primary: the speedup and the timing checks are against it). ``reference_plan`` says why the reference is
    sampled or missing. Returns the performance and the number of validated timed outputs.

    Raises:
        CandidateFailure: TIMEOUT, RUNTIME_ERROR or INCORRECT_* of the candidate.
        ReferenceTimingError: a comparator's worker failed, or the baseline disagrees with the reference
            (a harness problem).
    """
    count = len(slots.inputs)
    cand_calls: list[WorkerTimes] = []
    wall_ms: list[float] = []
    plan = timing.overwrite_plan(str(device)) if config.cold_l2 and device.type == "cuda" else None
    budget = config.timeouts.timing
    used = 0.0
    validated = 0
    checked = 0

    def request(slot: int, input_set: int, repeat: int) -> dict[str, Any]:
        return {
            "slot": slot,
            "scalars": _scalars(data, input_set),
            "timed": True,
            "cold_l2": config.cold_l2,
            "l2_plan": list(plan) if plan else None,
            "repeat": repeat,
        }

    def candidate(slot: int, input_set: int, repeat: int = 1) -> WorkerTimes:
        nonlocal used
        remaining = budget - used
        if remaining <= 0:
            raise CandidateFailure(
                EvaluationStatus.TIMEOUT, f"timing: candidate calls exceeded the {budget:.0f} s limit"
            )
        _poison(slots, slot, device)
        with twin_guard.paused(twin_pids):  # both sides reach their calls alike: each was paused before
            started = time.perf_counter()
            result = _worker_call(
                slots.worker,  # type: ignore[arg-type]
                request(slot, input_set, repeat),
                remaining,
                f"timed call, input set {input_set}",
            )
        elapsed = time.perf_counter() - started
        if plan is not None and plan.gate and result.gated is False:
            raise CandidateFailure(
                EvaluationStatus.RUNTIME_ERROR,
                f"timed call, input set {input_set}: the cold-L2 overwrite in the candidate's worker ran without "
                "its gate kernel (built at the worker's start, before the candidate loaded), so work on another "
                "stream could have finished inside it untimed; its timings cannot be trusted",
            )
        used += elapsed
        wall_ms.append(elapsed * 1e3 / max(repeat, 1))
        nonlocal validated, checked
        # Right after the reply, before anything else runs: outputs still poisoned mean the call replied
        # before its work was done (work hidden from the timer); a sample drawn only now, which the
        # candidate cannot predict, is compared in full.
        slots.require_alive()
        left = checks.poison_left(slots.outputs[slot])
        checked += 1
        if left:
            raise CandidateFailure(
                EvaluationStatus.INCORRECT_NUMERICAL,
                f"timed call, input set {input_set}: outputs {left} still held the poison when the worker "
                "replied (work finished after the reply is not timed)",
            )
        if secrets.randbelow(checks.SAMPLE_DENOMINATOR) == 0:
            judge(slots, slot, data, input_set, config, f"timed call on slot {slot} (sampled)")
            validated += 1
        return result

    unchecked: set[int] = set()
    probe = twin_guard.BusyProbe(device)
    candidate_pids: list[int] = []
    twin_pids: list[int] = []

    def compared(side_index: int, slot: int, input_set: int, repeat: int = 1) -> WorkerTimes:
        side = sides[side_index]
        # the candidate's sandbox is stopped while what it is compared with runs (twin_guard)
        with twin_guard.paused(candidate_pids), harness_fault(side):
            _poison(side.slots, slot, device)
            probe.measure()
            result = _worker_call(
                side.slots.worker,  # type: ignore[arg-type]
                request(slot, input_set, repeat),
                budget,
                f"timed {side.role} call",
                discount_post=True,
            )
        if side_index in unchecked:
            unchecked.discard(side_index)
            check_side(side, slot, data.references[input_set], data.output_dtypes, input_set, config)
        # a twin's buffers are exported: never leave a comparator's output in them while a candidate runs
        with harness_fault(side):
            _poison(side.slots, slot, device)
        return result

    for trial in range(config.trials):
        if slots.worker is not None:  # once per trial: processes the candidate started since are paused too
            candidate_pids[:] = twin_guard.sandbox_pids(slots.worker.proc.pid)
        twin_pids[:] = [
            p
            for side in sides
            if side.slots.worker
            for p in twin_guard.sandbox_pids(side.slots.worker.proc.pid)
        ]
        holds = [(s + trial) % len(data.inputs) for s in range(count)]
        unchecked.update(i for i, side in enumerate(sides) if side.check)
        for s in range(count):
            _fill(slots, s, data.inputs[holds[s]], device)
            for side in sides:
                with harness_fault(side):
                    _fill(side.slots, s, data.inputs[holds[s]], device)
        previous: int | None = None  # who made the last timed call (-1: the candidate)
        if config.warmup:
            candidate(0, holds[0], repeat=config.warmup)
        for k, side in enumerate(sides):
            if side.warmup(trial, config):
                compared(k, 0, holds[0], repeat=side.warmup(trial, config))
        for i in range(config.iterations):
            s = i % count
            index = len(cand_calls)
            order = [-1] + [k for k, side in enumerate(sides) if side.due(index)]
            for who in order if i % 2 == 0 else reversed(order):
                if who < 0:
                    cand_calls.append(candidate(s, holds[s]))
                else:
                    sides[who].calls.append(compared(who, s, holds[s]))
                    sides[who].paired.append(index)
                    sides[who].after_candidate.append(previous == -1)
                previous = who
        if config.validate_timed_outputs:
            for s in range(min(count, config.iterations)) if config.iterations else ():
                judge(slots, s, data, holds[s], config, f"timing trial {trial} (last timed call on slot {s})")
                validated += 1
    busy = twin_guard.busy_verdict(probe, device, candidate_pids, [os.getpid(), *live_worker_pids()])
    if busy is not None and busy.startswith("environment: "):
        raise DeviceShared(f"timing: {busy.removeprefix('environment: ')}")
    if busy is not None:
        raise CandidateFailure(EvaluationStatus.RUNTIME_ERROR, f"timing: {busy.removeprefix('candidate: ')}")
    primary = sides[0]
    cand_ms, cand_bound = [c.ms[0] for c in cand_calls], [c.bound[0] for c in cand_calls]
    ref_ms, ref_bound = side_times(primary, "events"), side_times(primary, "bound")
    unexplained_ms = checks.unexplained_round_trip(
        [c.wall_ms for c in cand_calls], cand_bound, [r.wall_ms for r in primary.calls], ref_bound, device
    )
    basis, hidden_ms = checks.timing_basis(cand_ms, cand_bound, ref_ms, ref_bound)
    overwrite = checks.overwrite_excess(
        [c.overwrite[0] for c in cand_calls], [r.overwrite[0] for r in primary.calls]
    )
    if basis != "events":
        cand_ms, ref_ms = cand_bound, ref_bound
    cand = timing.summarize(cand_ms)
    ref = timing.summarize(ref_ms)
    ratios = sorted(r / c for c, r in zip(cand_ms, ref_ms, strict=True) if c > 0)
    performance = Performance(
        latency_ms=cand.median,
        reference_latency_ms=ref.median,
        speedup_factor=timing.pair_speedup(cand_ms, ref_ms),
        extra={
            "measured_on": "gpu" if device.type == "cuda" else "cpu",
            "method": "interleaved pairs, both sides in worker processes of the same construction, "
            f"speedup = median({primary.role}_ms / candidate_ms)",
            **comparison_extras(sides, cand_ms, basis, reference_plan, definition),
            "timing_basis": basis,
            "hidden_work_ms": hidden_ms,
            "unexplained_round_trip_ms": unexplained_ms,
            "l2_overwrite": {"passes": plan.passes, "solo_ms": plan.solo_ms, "gate": plan.gate, **overwrite}
            if plan
            else None,
            "comparator_overwrite_ungated": any(c.gated is False for side in sides for c in side.calls),
            "persisting_l2": {
                "reset_before_each_timed_call": True,
                "candidate_max_bytes": max((b for c in cand_calls for b in c.persisting_l2), default=0),
            }
            if plan
            else None,
            "candidate_ms": cand.as_dict(),
            "reference_ms": ref.as_dict(),
            "speedup_p10": timing.percentile(ratios, 10),
            "speedup_p90": timing.percentile(ratios, 90),
            "pairs": len(ratios),
            "candidate_wall_ms_median": timing.summarize(wall_ms).median,
            "warmup": config.warmup,
            "iterations": config.iterations,
            "trials": config.trials,
            "input_sets": len(data.inputs),
            "cold_l2": config.cold_l2,
            "l2_flush_bytes": timing.cold_l2_bytes(device) if config.cold_l2 else 0,
            "timed_outputs_validated": validated,
            "timed_outputs_checked_for_poison": checked,
            "comparators_timed_with_candidate_paused": True,
            "busy_probe_ms": timing.summarize(probe.samples).as_dict() if probe.samples else None,
            "neighbour_bias": neighbour_bias(
                side_times(primary, basis), primary.after_candidate, [cand_ms[i] for i in primary.paired]
            ),
        },
    )
    return performance, validated


def untimed_performance(reason: str, call_ms: float | None = None) -> Performance:
    """The Performance of a run without GPU timing: latencies and speedup null (not measured), marked
    ``measured_on: cpu``, ``timed: false`` with the reason."""
    extra: dict[str, Any] = {"measured_on": "cpu", "timed": False, "reason": reason}
    if call_ms is not None:
        extra["cpu_call_wall_ms"] = call_ms
    return Performance(extra=extra)
