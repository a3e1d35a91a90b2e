"""The trusted process's side of a worker's buffers and calls (trusted side).

:class:`WorkloadData` holds the trusted inputs and reference outputs of one workload. A worker allocates
``count`` *slots* of input and output buffers that the trusted process maps too (:func:`allocate_slots`,
:class:`Slots`): it fills the inputs (:func:`fill`) and poisons the outputs (:func:`poison`) before each call,
then sends one call request (:func:`worker_call`), whose times it checks against the round trip it timed
itself. The candidate's sandbox worker and the comparators' timing twins (:mod:`fibserve.bench.reference_twin`)
use the same slots and calls, so both sides of a timing pair are handled alike.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from fibserve.trace import EvaluationStatus

from . import timing_checks as checks
from ._dtypes import poison_
from .buffers import open_buffer
from .degenerate import Degeneracy
from .failures import CandidateFailure, limit_failure
from .sandbox import WorkerError, WorkerProcess


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


def worker_call(
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
