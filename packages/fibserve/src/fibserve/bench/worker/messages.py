"""The requests a sandbox worker takes, typed for both sides (standard library only: the worker imports it).

The trusted side builds these as JSON objects (one per line on the request pipe) and the worker
(:mod:`fibserve.bench.worker.entry`) reads them; the worker's replies are validated on the trusted side by
:mod:`fibserve.bench.worker.protocol`. ``TypedDict``\\ s cost nothing at run time and let a type checker see
both ends agree on every key.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict


class LoadRequest(TypedDict):
    """``load``: the candidate (or a comparator) to import. ``files`` names the memfds sent just before it over
    the descriptor channel, in order; the tool runner, which has no channel, names paths instead (``library``,
    ``package_root``)."""

    op: Literal["load"]
    language: str
    entry_file: str
    symbol: str
    dps: bool
    """Destination-passing style: outputs are passed after the inputs."""
    arity: int
    """Positional arguments ``run`` receives."""
    files: NotRequired[list[str]]
    package: NotRequired[str]
    """The importable package name of a Python/Triton build."""
    library: NotRequired[str]
    package_root: NotRequired[str]
    cast_outputs: NotRequired[bool]
    """A comparator's twin only: returned outputs may be cast to the buffers' dtypes."""


class BufferSpec(TypedDict):
    """One buffer: its shape, dtype name (:mod:`fibserve.bench.dtypes`) and size in bytes."""

    shape: list[int]
    dtype: str
    nbytes: int


class SlotSpecs(TypedDict):
    """The buffers of one slot, inputs (tensor inputs in definition order) and outputs."""

    inputs: list[BufferSpec]
    outputs: list[BufferSpec]


class AllocRequest(TypedDict):
    """``alloc``: ``slots`` of buffers; on CPU one sealed memfd per spec was sent over the channel first."""

    op: Literal["alloc"]
    slots: list[SlotSpecs]


class CallRequest(TypedDict):
    """``call``: call the entry on ``slot``'s buffers ``repeat`` times (timed, each with a cold L2 when asked),
    scalars inserted at their positions (position as text -> value)."""

    op: Literal["call"]
    slot: int
    scalars: dict[str, float | int | bool]
    timed: bool
    cold_l2: NotRequired[bool]
    l2_plan: NotRequired[list[float | int | bool] | None]
    """The trusted side's :class:`fibserve.bench.worker.clock.OverwritePlan` (passes, solo ms, gate, release)."""
    repeat: NotRequired[int]
    warmup: NotRequired[bool]
    """Warm-up calls: timed alike, but their stalls do not turn the gate's release off
    (:func:`fibserve.bench.worker.clock.time_call`)."""
    audit_torch: NotRequired[bool]
    """Run the call under :class:`fibserve.bench.worker.torch_audit.TorchAudit` and report ``torch_ops``."""
