"""The replies of a sandbox worker, as the trusted side accepts them (trusted side).

Every line a worker sends is untrusted input: once the candidate is loaded, its code runs in the worker's
interpreter and can replace the worker's own methods, so a reply can be anything. Each reply is validated
against the model of the request it answers before any field is used; a reply that does not fit is the
candidate's failure (:class:`ProtocolViolation`, reported as RUNTIME_ERROR with the reason), never an
evaluator error. The worker side (:mod:`fibserve.bench.worker.entry`) writes these shapes as plain dicts: it must
not import pydantic (a worker starts per candidate, and the import costs about 0.4 s).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
"""A duration in ms that a worker may report."""


class ProtocolViolation(RuntimeError):
    """A worker's reply does not fit the request it answers (the message says how)."""


class _Reply(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    request: ClassVar[str] = "a request"
    """What the reply answers, for messages."""


class Ready(_Reply):
    """The first line of a worker: torch (and on a GPU, its CUDA context) is up."""

    request: ClassVar[str] = "start"
    ready: Literal[True]
    pid: int
    device: str
    torch: str
    start_ms: dict[str, float] = {}
    """How long each step of the start took: ``context``, ``gate``, ``cupti`` (ms)."""
    gate_seeded: bool = False
    """The gate kernel came from the zygote's build (:mod:`fibserve.bench.worker.gate_seed`), none was compiled."""


class Failed(_Reply):
    """Any request's failure: the error text (a traceback, trimmed to the candidate's frames), the exception's
    type, the ``errno`` of an ``OSError`` in its chain, and, for a returned value that does not fit the
    outputs, INCORRECT_SHAPE or INCORRECT_DTYPE."""

    ok: Literal[False]
    error: str = Field(default="error", max_length=64_000)
    error_type: str | None = Field(default=None, max_length=200)
    errno: int | None = None
    status: Literal["INCORRECT_SHAPE", "INCORRECT_DTYPE"] | None = None


class Loaded(_Reply):
    """``load`` succeeded: the entry function is ready to call."""

    request: ClassVar[str] = "load"
    ok: Literal[True]


class BufferHandle(_Reply):
    """How the worker shares one buffer: ``cuda_ipc`` (a CUDA IPC handle and the offset of the buffer in the
    exported allocation, bytes), ``fd`` (it mapped the memfd the trusted side sent) or ``empty`` (0 bytes)."""

    kind: Literal["cuda_ipc", "fd", "empty"]
    handle: str | None = Field(default=None, max_length=200)
    offset: int | None = Field(default=None, ge=0)


class SlotHandles(_Reply):
    """The handles of one slot, in the order of the request's specs."""

    inputs: list[BufferHandle]
    outputs: list[BufferHandle]


class Allocated(_Reply):
    """``alloc`` succeeded: one entry per requested slot."""

    request: ClassVar[str] = "alloc"
    ok: Literal[True]
    slots: list[SlotHandles]


class Called(_Reply):
    """``call`` succeeded. ``ms``, ``bound_ms`` and ``overwrite_ms`` have one entry per repeat (see
    :func:`fibserve.bench.worker.clock.time_call`); ``post_ms`` is the untimed copy of a returned value into the
    outputs; ``persisting_l2_bytes`` the persisting-L2 carve-out each timed call left; ``l2_gate`` whether the
    cold-L2 overwrite was the gate kernel, ``l2_release`` whether its calls were queued whole behind the gate's
    release (no host launch time in them; false when any of them was not: :attr:`fibserve.bench.worker.clock.
    ColdL2.released`); ``torch_ops`` the PyTorch operators the candidate's own code ran, when the request asked
    for that audit (:mod:`fibserve.bench.worker.torch_audit`); ``release_wait_ms`` how long each call kept the gate
    waiting for its release (0 when not released)."""

    request: ClassVar[str] = "call"
    ok: Literal[True]
    ms: list[NonNegative]
    bound_ms: list[NonNegative]
    overwrite_ms: list[NonNegative]
    post_ms: NonNegative = 0.0
    persisting_l2_bytes: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list)
    l2_gate: bool = False
    l2_release: bool = False
    release_wait_ms: list[NonNegative] = Field(default_factory=list)
    torch_ops: list[Annotated[str, Field(max_length=200)]] | None = Field(default=None, max_length=1000)


class Spans(_Reply):
    """``spans`` succeeded: the GPU time (ms) of each call recorded with ``kernel_span`` since the last
    ``spans`` request, in order, null where it could not be read (:mod:`fibserve.bench.worker.kernel_span`)."""

    request: ClassVar[str] = "spans"
    ok: Literal[True]
    device_ms: list[NonNegative | None] = Field(max_length=100_000)


ReplyModel = TypeVar("ReplyModel", bound=_Reply)


def parse_reply(message: dict[str, Any], success: type[ReplyModel]) -> ReplyModel | Failed:
    """``message`` as ``success`` when it says ``ok: true``, else as :class:`Failed`.

    Raises:
        ProtocolViolation: it fits neither; the message names the first problem.
    """
    model: type[_Reply] = success if message.get("ok") is True else Failed
    try:
        return model.model_validate(message)  # type: ignore[return-value]
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "the reply"
        raise ProtocolViolation(
            f"the worker's reply to `{success.request}` is malformed ({where}: {first.get('msg')})"
        ) from None
