"""The trusted process's side of a worker's buffers and calls (trusted side).

:class:`WorkloadData` holds the trusted inputs and reference outputs of one workload. A worker allocates
``count`` *slots* of input and output buffers that the trusted process maps too (:func:`allocate_slots`,
:class:`Slots`): it fills the inputs (:func:`fill`) and poisons the outputs (:func:`poison`) before each call,
then sends one call request (:func:`worker_call`), whose times it checks against the round trip it timed
itself. The candidate's sandbox worker and the comparators' timing twins (:mod:`fibserve.bench.timing.twin`)
use the same slots and calls, so both sides of a timing pair are handled alike.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from fibserve.bench.data.degenerate import Degeneracy
from fibserve.bench.dtypes import poison_
from fibserve.bench.failures import CandidateFailure, limit_failure
from fibserve.bench.worker.buffers import BufferError, buffer_spec, cpu_view, open_cuda_buffer
from fibserve.bench.worker.handover import sealed_buffer
from fibserve.bench.worker.messages import AllocRequest, SlotSpecs
from fibserve.bench.worker.pool import WorkerError, WorkerProcess
from fibserve.bench.worker.protocol import (
    Allocated,
    Called,
    Failed,
    ProtocolViolation,
    ReplyModel,
    Spans,
    parse_reply,
)
from fibserve.trace import EvaluationStatus

WALL_TOLERANCE = 0.01
"""Relative allowance between the worker's clock (CUDA events) and this process's ``perf_counter``: a call's
reported times must fit in the round trip timed here (:func:`worker_call`)."""
WALL_SLACK_MS = 0.05
"""Absolute allowance (ms) for the same comparison."""


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
    """Outputs the elementwise check cannot judge alone (:mod:`fibserve.bench.data.degenerate`)."""
    varied: list[str] = field(default_factory=list)
    """Inputs each timed call gets fresh content for (:mod:`fibserve.bench.data.variation`); none: every timed
    call repeats its input set."""
    reference: Callable[[dict[str, Any]], dict[str, torch.Tensor]] | None = None
    """The reference outputs of a whole input dict (output name -> tensor), for the validated timed calls of
    varied inputs; required when ``varied`` names any."""


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
    entry per repeat; see :func:`fibserve.bench.worker.clock.time_call`) and the round trip timed here; and the
    persisting-L2 carve-out (bytes) each call left (:mod:`fibserve.bench.worker.l2_state`)."""

    ms: list[float]
    bound: list[float]
    wall_ms: float
    overwrite: list[float]
    persisting_l2: tuple[int, ...] = ()
    gated: bool | None = None
    """Whether the worker's cold-L2 overwrite was the gate kernel (None: it did not say)."""
    torch_ops: list[str] | None = None
    """The PyTorch operators the candidate's own code ran, when the call asked for that audit."""
    released: bool | None = None
    """Whether the calls were queued whole behind the gate's release (:func:`fibserve.bench.worker.clock.time_call`)."""
    device: list[float] | None = None
    """Each call's GPU time from CUPTI (:mod:`fibserve.bench.worker.kernel_span`), or None; read after the
    trial (:func:`worker_spans`), not with the call."""
    waited: tuple[float, ...] = ()
    """How long (ms) each call kept the gate waiting for its release (0 when not released)."""


def worker_failure(exc: WorkerError, what: str, timeout: float) -> CandidateFailure:
    """The candidate's failure for a worker that did not answer a request properly: its resource limit, a
    TIMEOUT after ``timeout`` seconds, or a RUNTIME_ERROR for a crash or a broken protocol."""
    if exc.limit is not None:
        return limit_failure(exc.limit, what, exc.log)
    if exc.kind == "timeout":
        return CandidateFailure(
            EvaluationStatus.TIMEOUT, f"{what}: no result within {timeout:.1f} s (limit)\n{exc.log}"
        )
    detail = "crashed" if exc.kind == "died" else "broke the worker protocol"
    return CandidateFailure(
        EvaluationStatus.RUNTIME_ERROR, f"{what}: the candidate {detail} ({exc})\n{exc.log}"
    )


def reply_failure(worker: WorkerProcess, reply: Failed, what: str) -> CandidateFailure:
    """The candidate's failure for an error reply: the limit its ``errno`` names, the INCORRECT_SHAPE or
    INCORRECT_DTYPE it says, else RUNTIME_ERROR, with the worker's error text and output tail."""
    log = f"{what}: {reply.error}\n{worker.log_tail()}"
    if hit := worker.limit_hit(reply.errno):
        return limit_failure(hit, what, log)
    if reply.status is not None:
        return CandidateFailure(EvaluationStatus(reply.status), log)
    return CandidateFailure(EvaluationStatus.RUNTIME_ERROR, log)


def candidate_reply(
    worker: WorkerProcess, message: dict[str, Any], success: type[ReplyModel], what: str
) -> ReplyModel:
    """``message`` (a reply of the candidate's worker) as ``success``.

    Raises:
        CandidateFailure: an error reply (:func:`reply_failure`) or one that breaks the protocol
            (RUNTIME_ERROR naming the problem): the worker runs the candidate, so either is its doing.
    """
    try:
        reply = parse_reply(message, success)
    except ProtocolViolation as exc:
        raise CandidateFailure(
            EvaluationStatus.RUNTIME_ERROR, f"{what}: {exc}\n{worker.log_tail()}"
        ) from None
    if isinstance(reply, Failed):
        raise reply_failure(worker, reply, what)
    return reply


def worker_call(
    worker: WorkerProcess, request: dict[str, Any], timeout: float, what: str, *, discount_post: bool = False
) -> WorkerTimes:
    """Send a call; returns the worker's times and the round trip's wall time here (ms).

    Every failure becomes a CandidateFailure (the worker is then discarded), including replies that do not
    fit the protocol (:mod:`fibserve.bench.worker.protocol`) and timings that could not have happened: not one
    time per call of ``request["repeat"]`` (default 1), a call's ``ms`` longer than its ``bound_ms``, or their
    sum longer than the round trip (a worker can only report less time than that). ``discount_post`` (the
    reference's twin only, never a candidate) subtracts the worker's reported untimed copy from the round trip."""
    started = time.perf_counter()
    try:
        message = worker.request({"op": "call", **request}, timeout)
    except WorkerError as exc:
        raise worker_failure(exc, what, timeout) from None
    wall_ms = (time.perf_counter() - started) * 1e3
    reply = candidate_reply(worker, message, Called, what)
    return _checked_times(reply, int(request.get("repeat", 1)), wall_ms, what, discount_post)


def worker_spans(worker: WorkerProcess, timeout: float, what: str) -> list[float | None]:
    """The GPU time (ms) of each call ``worker`` recorded with ``kernel_span`` since the last time it was asked
    (:mod:`fibserve.bench.worker.kernel_span`), null where it could not be read.

    Raises:
        CandidateFailure: the worker failed or broke the protocol (:func:`worker_failure`, :func:`candidate_reply`).
    """
    try:
        message = worker.request({"op": "spans"}, timeout)
    except WorkerError as exc:
        raise worker_failure(exc, what, timeout) from None
    return list(candidate_reply(worker, message, Spans, what).device_ms)


def _checked_times(reply: Called, repeat: int, wall_ms: float, what: str, discount_post: bool) -> WorkerTimes:
    ms, bound, overwrite = reply.ms, reply.bound_ms, reply.overwrite_ms
    if (
        not repeat == len(ms) == len(bound) == len(overwrite)  # none at all would pass every check below
        or any(m > b + WALL_SLACK_MS for m, b in zip(ms, bound, strict=True))
        or len(reply.release_wait_ms) not in (0, len(ms))
    ):
        raise CandidateFailure(EvaluationStatus.RUNTIME_ERROR, f"{what}: worker sent malformed timings")
    if sum(bound) > wall_ms * (1 + WALL_TOLERANCE) + WALL_SLACK_MS:
        raise CandidateFailure(
            EvaluationStatus.RUNTIME_ERROR,
            f"{what}: the worker reported {sum(bound):.3f} ms of calls in a {wall_ms:.3f} ms round trip",
        )
    if discount_post and reply.post_ms > 0:
        wall_ms = max(sum(bound), wall_ms - reply.post_ms)
    return WorkerTimes(
        list(ms), list(bound), wall_ms, list(overwrite), tuple(reply.persisting_l2_bytes), reply.l2_gate,
        reply.torch_ops, reply.l2_release, None, tuple(reply.release_wait_ms),
    )  # fmt: skip


def allocate_slots(
    worker: WorkerProcess, data: WorkloadData, count: int, device: torch.device, timeout: float
) -> Slots:
    """Ask the worker for ``count`` slots of input and output buffers and map them here
    (:mod:`fibserve.bench.worker.buffers`): on CPU the buffers are size-sealed memfds made and mapped here first and
    handed over; on a GPU the worker allocates them and exports CUDA IPC handles, opened here.

    Raises:
        WorkerError: the worker did not answer the request (it died, hung or broke the protocol).
        AllocationRefused: it answered, but with an error or handles that do not fit the protocol or cannot be
            opened (once the candidate is loaded, its doing).
        OSError: this process could not make the CPU buffers (out of memory: infrastructure).
    """
    first = data.inputs[0]
    tensor_inputs = [n for n, v in first.items() if isinstance(v, torch.Tensor)]
    specs = [
        SlotSpecs(
            inputs=[buffer_spec(tuple(first[n].shape), first[n].dtype) for n in tensor_inputs],
            outputs=[buffer_spec(data.output_shapes[n], data.output_dtypes[n]) for n in data.output_shapes],
        )
        for _ in range(count)
    ]
    flat = [spec for slot in specs for kind in ("inputs", "outputs") for spec in slot[kind]]
    views: list[torch.Tensor] = []
    if device.type != "cuda":
        made = [sealed_buffer(int(spec["nbytes"])) for spec in flat]
        try:
            worker.hand_over([fd for fd, _ in made])
        finally:
            for fd, _ in made:
                os.close(fd)
        views = [cpu_view(mapping, spec) for (_, mapping), spec in zip(made, flat, strict=True)]
    message = worker.request(AllocRequest(op="alloc", slots=specs), timeout)
    try:
        reply = parse_reply(message, Allocated)
    except ProtocolViolation as exc:
        raise AllocationRefused(str(exc)) from None
    if isinstance(reply, Failed):
        raise AllocationRefused(f"buffer allocation failed in the worker: {reply.error}")
    if len(reply.slots) != count:
        raise AllocationRefused(f"the worker answered {len(reply.slots)} slots where {count} were asked for")
    if device.type == "cuda":
        handles = [h for slot in reply.slots for kind in (slot.inputs, slot.outputs) for h in kind]
        if len(handles) != len(flat):
            raise AllocationRefused(f"the worker answered {len(handles)} handles for {len(flat)} buffers")
        try:
            views = [
                open_cuda_buffer(h.model_dump(), spec, device) for h, spec in zip(handles, flat, strict=True)
            ]
        except BufferError as exc:
            raise AllocationRefused(str(exc)) from None
    opened = iter(views)
    slots = Slots([], [], worker)
    for _ in range(count):
        slots.inputs.append({n: next(opened) for n in tensor_inputs})
        slots.outputs.append({n: next(opened) for n in data.output_shapes})
    return slots


SMALL_POOL_BYTES = 1 << 20
"""PyTorch's caching allocator serves every request of at most this many bytes from shared 2 MiB segments (its
``kSmallSize``): a slot none of whose buffers is larger gets no slots beyond the input sets', which would not lie
in places of their own."""


def timing_slot_count(
    data: WorkloadData, device: torch.device, input_sets: int, most: int, budget_bytes: int, calls: int
) -> int:
    """How many buffer slots each side of a timing pair gets: on a GPU up to ``most``, as many as fit in
    ``budget_bytes`` of device memory together (each slot holds one call's inputs and outputs), no more than the
    ``calls`` (timed pairs) of a trial, and never fewer than the input sets (``input_sets``, at most as many as
    ``data`` has). On CPU, and where no buffer is larger than :data:`SMALL_POOL_BYTES`, the input sets' alone:
    the latency's dependence on where its buffers lie was measured on the GPU (``EvalConfig.timing_slots``)."""
    sets = max(1, min(input_sets, len(data.inputs)))
    if device.type != "cuda":
        return sets
    first = data.inputs[0]
    specs = [buffer_spec(tuple(v.shape), v.dtype) for v in first.values() if isinstance(v, torch.Tensor)]
    specs += [buffer_spec(shape, data.output_dtypes[name]) for name, shape in data.output_shapes.items()]
    sizes = [int(spec["nbytes"]) for spec in specs]
    if max(sizes, default=0) <= SMALL_POOL_BYTES:
        return sets
    return max(sets, min(most, calls, budget_bytes // sum(sizes)))


class AllocationRefused(RuntimeError):
    """The worker answered ``alloc`` with an error, or with handles that do not fit or do not open."""


def fill(slots: Slots, slot: int, inputs: dict[str, Any], device: torch.device) -> None:
    """Copy the tensors of one input set into ``slot``'s input buffers (the owning worker must be alive)."""
    slots.require_alive()
    for name, view in slots.inputs[slot].items():
        view.copy_(inputs[name])
    sync(device)


def poison(slots: Slots, slot: int, device: torch.device) -> None:
    """Fill ``slot``'s output buffers with NaN (integers: their minimum), so unwritten outputs show."""
    slots.require_alive()
    for view in slots.outputs[slot].values():
        poison_(view)
    sync(device)


def sync(device: torch.device) -> None:
    """Wait for all work on ``device`` (nothing on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def scalars(data: WorkloadData, input_set: int) -> dict[str, Any]:
    """The scalar inputs of ``input_set`` as a call request carries them: position (as text) -> value."""
    return {str(pos): data.inputs[input_set][name] for name, pos in data.scalar_positions.items()}
