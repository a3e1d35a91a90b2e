"""The sandbox worker: the only process that loads and calls candidate code (UNTRUSTED side).

Forked from the lane's warm zygote (:mod:`fibserve.bench.worker.zygote`) into a sandbox of its own, it runs
:func:`serve` on three descriptors the trusted side made: a request pipe, a reply pipe, and a descriptor
channel. It speaks newline-delimited JSON on two inherited pipe descriptors,
so a candidate printing to stdout cannot corrupt the protocol; its stdout/stderr go to a pipe the trusted side
drains, keeping only the start and the end.

Requests (trusted -> worker) and replies (worker -> trusted), one JSON object per line:

* on start the worker sends ``{"ready": true, "pid", "device", "torch", "start_ms", "gate_seeded"}`` once torch
  (and CUDA, and the gate kernel) are up, and CUPTI too when its fork request said the trusted side will ask for
  spans (``warm_spans``); ``start_ms`` times those steps, ``gate_seeded`` whether the gate kernel's build came
  from the zygote's seed, nothing compiled (:mod:`fibserve.bench.worker.gate_seed`);
* ``{"op": "load", "language", "entry_file", "symbol", "dps", "arity", "files"}`` (plus ``"package"`` for a
  Python/Triton package and ``"cast_outputs"`` for the reference's timing twin), after the trusted side sent
  one sealed memfd per name in ``files`` over the descriptor channel: the library (``solution.so``) or the
  package's files, written here into a fresh directory of this worker's own ``/tmp`` -> ``{"ok": true}`` or
  ``{"ok": false, "error"}``;
* ``{"op": "alloc", "slots": [{"inputs": [spec], "outputs": [spec]}]}`` with ``spec = {"shape", "dtype",
  "nbytes"}`` -> ``{"ok": true, "slots": [{"inputs": [handle], "outputs": [handle]}]}``. CUDA buffers are
  allocated here and exported as CUDA IPC handles (``{"kind": "cuda_ipc", "handle", "offset"}``,
  :mod:`fibserve.bench.worker.cuda_ipc`); on CPU the trusted side first sent one size-sealed memfd per spec over the
  descriptor channel, which this worker maps (``{"kind": "fd"}``). The trusted side writes inputs and poison
  into these buffers and reads outputs back; nothing else crosses, and this process never sees reference
  outputs or the seed secret;
* ``{"op": "call", "slot", "scalars": {position: value}, "timed", "cold_l2", "l2_plan"?, "kernel_span"?,
  "repeat", "warmup"?, "audit_torch"?}`` ->
  ``{"ok": true, "ms": [...], "bound_ms": [...], "overwrite_ms": [...], "post_ms",
  "persisting_l2_bytes": [...], "l2_gate", "l2_release", "release_wait_ms": [...]}`` or ``{"ok": false, "error", "error_type", "errno", "status"?}`` (``errno`` of an ``OSError`` in
  the failure, else null); ``persisting_l2_bytes`` is the persisting-L2 carve-out each timed call left (reset
  before the next, :mod:`fibserve.bench.worker.l2_state`), ``l2_gate`` whether the overwrite was the gate kernel.
  ``audit_torch`` runs the candidate under :class:`fibserve.bench.worker.torch_audit.TorchAudit` and adds the
  ``torch_ops`` its own code ran to the reply. ``l2_plan`` is the trusted side's ``[passes, solo_ms, gate, release]``
  (:class:`fibserve.bench.worker.clock.OverwritePlan`); ``kernel_span`` records the calls' GPU activity with
  CUPTI (:mod:`fibserve.bench.worker.kernel_span`; the recording runs on until a ``spans`` request or any other
  request); ``release_wait_ms`` is how long each call kept the gate waiting for its release (0 when not
  released); for the lists see :func:`fibserve.bench.worker.clock.time_call`; ``post_ms`` is the untimed copy
  of a returned value into the outputs, which the trusted side discounts for the reference's twin only;
* ``{"op": "spans"}`` -> ``{"ok": true, "device_ms": [ms | null, ...]}``: the GPU time of each call recorded with
  ``kernel_span`` since the last ``spans`` request, in order;
* ``{"op": "exit"}``.

The trusted side validates every reply (:mod:`fibserve.bench.worker.protocol`): once the candidate is loaded, its code
runs in this interpreter and may rewrite any of it.

Any error reply makes the trusted side discard this process. This module imports only the standard library,
torch and :mod:`fibserve.bench.worker.clock`/`l2_state`, :mod:`fibserve.bench.dtypes` (Triton for the gate kernel on a GPU, and tvm_ffi or
the candidate when loading).
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import json
import mmap
import os
import socket
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from fibserve.bench.dtypes import TORCH_DTYPES
from fibserve.bench.worker.clock import GATE_HOLD_MS, ColdL2, OverwritePlan, time_call
from fibserve.bench.worker.handover import read_all, receive_fds
from fibserve.bench.worker.kernel_span import SpanRecording
from fibserve.bench.worker.l2_state import GATE_KERNEL, persisting_l2_bytes, warm_gate
from fibserve.bench.worker.messages import AllocRequest, BufferSpec, CallRequest, LoadRequest


class Worker:
    """State of one worker: the loaded candidate, its buffers, the cold-L2 buffer."""

    def __init__(self, device: str, channel: socket.socket | None = None):
        self.device = torch.device(device)
        self.channel = channel
        """The descriptor channel: the trusted side's memfds arrive here (:mod:`fibserve.bench.worker.handover`);
        None in the tool runner, which reads the build products from read-only mounts instead."""
        self.start_ms: dict[str, float] = {}
        """How long each step of this worker's start took (ms): ``context``, ``gate`` and, with spans asked
        for, ``cupti`` (:func:`serve`)."""
        self.gate_compiled = False
        """Whether building the gate kernel wrote to this worker's Triton cache (it was not all in the seed)."""
        if self.device.type == "cuda":
            began = time.perf_counter()
            torch.cuda.set_device(self.device)
            torch.zeros(1, device=self.device)  # create the context now, off the critical path
            built = time.perf_counter()
            cached = _files_below(os.environ.get("TRITON_CACHE_DIR"))
            warm_gate(self.device, GATE_HOLD_MS)  # and compile the gated cold-L2 overwrite (l2_state)
            self.start_ms = {"context": (built - began) * 1e3, "gate": (time.perf_counter() - built) * 1e3}
            self.gate_compiled = _files_below(os.environ.get("TRITON_CACHE_DIR")) != cached
        self.fn: Any = None
        self.dps = True
        self.cast_outputs = False
        self.slots: list[dict[str, list[torch.Tensor]]] = []
        self.flush: ColdL2 | None = None
        self.source_dir: str | None = None
        self.recording = SpanRecording()
        self.spans_read: list[float | None] = []
        """Spans of recorded calls read since the last ``spans`` request (the recording stopped in between)."""

    def _receive_files(self, names: list[str]) -> Path:
        """Write the handed-over files ``names`` (in the order their memfds were sent) into a fresh directory
        of this worker's own ``/tmp``; returns it."""
        if self.channel is None:
            raise RuntimeError("this worker has no descriptor channel: the load request must name paths")
        root = Path(tempfile.mkdtemp(prefix="candidate-"))
        for name, fd in zip(names, receive_fds(self.channel, len(names)), strict=True):
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(read_all(fd))
        return root

    def load(self, req: LoadRequest) -> dict[str, Any]:
        language = req["language"]
        self.dps = bool(req.get("dps", True))
        self.cast_outputs = bool(req.get("cast_outputs", False))
        if language in ("cuda", "cpp"):
            library = req.get("library") or str(self._receive_files(["solution.so"]) / "solution.so")
            import tvm_ffi

            module = tvm_ffi.load_module(library)
            fn = module.get_function(req["symbol"]) if hasattr(module, "get_function") else None
            if fn is None:
                return {"ok": False, "error": f"the built library exports no function {req['symbol']!r}"}
            self.fn = fn
            return {"ok": True}
        package = req["package"]
        package_root = req.get("package_root") or str(
            self._receive_files([f"pkg/{package}/{name}" for name in req["files"]]) / "pkg"
        )
        self.source_dir = str(Path(package_root) / package)
        fn = _import_entry(package_root, package, req["entry_file"], req["symbol"])
        if not callable(fn):
            return {"ok": False, "error": f"{req['entry_file']} defines no callable {req['symbol']!r}"}
        problem = _arity_problem(fn, int(req["arity"]), req["symbol"])
        if problem:
            return {"ok": False, "error": problem}
        self.fn = fn
        return {"ok": True}

    def _buffer(self, spec: BufferSpec, fd: int | None) -> tuple[torch.Tensor, dict[str, Any]]:
        dtype = TORCH_DTYPES[spec["dtype"]]
        shape = tuple(int(s) for s in spec["shape"])
        nbytes = int(spec["nbytes"])
        if fd is not None:  # CPU: map the trusted side's sealed memfd
            mapping = mmap.mmap(fd, max(nbytes, 1), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            os.close(fd)
            if nbytes == 0:
                return torch.empty(shape, dtype=dtype), {"kind": "fd"}
            raw = torch.frombuffer(mapping, dtype=torch.uint8, count=nbytes)
            return raw.view(dtype).view(shape), {"kind": "fd"}
        tensor = torch.empty(shape, dtype=dtype, device=self.device)
        if nbytes == 0:
            return tensor, {"kind": "empty"}
        from fibserve.bench.worker.cuda_ipc import export_handle

        return tensor, export_handle(tensor)

    def alloc(self, req: AllocRequest) -> dict[str, Any]:
        specs = [spec for slot in req["slots"] for kind in ("inputs", "outputs") for spec in slot[kind]]
        fds: list[int | None] = (
            [None] * len(specs) if self.device.type == "cuda" else list(receive_fds(self.channel, len(specs)))
        )
        received = iter(fds)
        self.slots, handles = [], []
        for slot in req["slots"]:
            made: dict[str, list[torch.Tensor]] = {"inputs": [], "outputs": []}
            out: dict[str, list[dict[str, Any]]] = {"inputs": [], "outputs": []}
            for kind in ("inputs", "outputs"):
                for spec in slot[kind]:
                    tensor, handle = self._buffer(spec, next(received))
                    made[kind].append(tensor)
                    out[kind].append(handle)
            self.slots.append(made)
            handles.append(out)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return {"ok": True, "slots": handles}

    def _args(self, slot: dict[str, list[torch.Tensor]], scalars: dict[str, Any]) -> list[Any]:
        args: list[Any] = list(slot["inputs"])
        for position, value in sorted(scalars.items(), key=lambda kv: int(kv[0])):
            args.insert(int(position), value)
        return args

    def call(self, req: CallRequest) -> dict[str, Any]:
        slot = self.slots[int(req["slot"])]
        args = self._args(slot, req.get("scalars") or {})
        outputs = slot["outputs"]
        returned: list[Any] = []
        audit = None
        if req.get("audit_torch"):
            from fibserve.bench.worker.torch_audit import TorchAudit

            audit = TorchAudit()

        def once() -> None:
            with audit if audit is not None else contextlib.nullcontext():
                if self.dps:
                    self.fn(*args, *outputs)
                else:
                    returned[:] = [self.fn(*args)]

        times, bounds, overwrites = [], [], []
        flush = None
        if req.get("timed") and req.get("cold_l2") and self.device.type == "cuda":
            plan = req.get("l2_plan")
            self.flush = self.flush or ColdL2(self.device, OverwritePlan(*plan) if plan else None)
            flush = self.flush
        persisting: list[int] = []
        released: list[bool] = []
        waited: list[float] = []
        if req.get("kernel_span") and flush is not None and flush.gate is not None:
            self.recording.start(flush.plan.passes)
        else:  # nothing but recorded calls may run while CUPTI records: their spans are read first
            self.stop_recording()
        for _ in range(int(req.get("repeat", 1))):
            timed = time_call(
                once, self.device, flush, mark=self.recording.on, warmup=bool(req.get("warmup"))
            )
            self.recording.add(timed.attempts)
            released.append(flush is not None and flush.released)
            waited.append(flush.waited_ms() if flush is not None and flush.released else 0.0)
            times.append(timed.ms)
            bounds.append(timed.bound_ms)
            overwrites.append(timed.overwrite_ms)
            if flush is not None:  # the carve-out the call left; the next flush clears it
                persisting.append(persisting_l2_bytes(self.device) or 0)
        copied = time.perf_counter()
        if not self.dps:
            problem = _copy_returned(returned[0], outputs, cast=self.cast_outputs)
            if problem:
                return {"ok": False, **problem}
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        post_ms = (time.perf_counter() - copied) * 1e3
        return {
            "ok": True,
            "ms": times,
            "bound_ms": bounds,
            "overwrite_ms": overwrites,
            "post_ms": post_ms,
            "persisting_l2_bytes": persisting,
            "l2_gate": flush is not None and flush.gate is not None,
            "l2_release": bool(released) and all(released),
            "release_wait_ms": waited,
            "torch_ops": audit.ops if audit is not None else None,
        }

    def stop_recording(self) -> None:
        """Stop the CUPTI recording, if it runs, and keep the spans of its calls for the next ``spans``."""
        self.spans_read += self.recording.finish(GATE_KERNEL)

    def spans(self, req: dict[str, Any]) -> dict[str, Any]:
        """The GPU time (ms) of each call recorded since the last ``spans`` request (:mod:`fibserve.bench.worker.kernel_span`)."""
        self.stop_recording()
        read, self.spans_read = self.spans_read, []
        return {"ok": True, "device_ms": read}


def _files_below(directory: str | None) -> set[str]:
    """The paths of the files below ``directory`` (empty when it is None or missing)."""
    if not directory:
        return set()
    return {os.path.join(root, name) for root, _dirs, names in os.walk(directory) for name in names}


def _import_entry(package_root: str, package: str, entry_file: str, symbol: str) -> Any:
    """Import ``<package>.<entry module>`` from ``package_root`` (the fibserve.build package layout) and return
    ``symbol`` (None when missing). The package directory also goes on sys.path for absolute sibling imports."""
    package_dir = Path(package_root) / package
    sys.path.insert(0, str(package_dir))
    spec = importlib.util.spec_from_file_location(
        package, package_dir / "__init__.py", submodule_search_locations=[str(package_dir)]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the candidate package at {package_dir}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[package] = module
    spec.loader.exec_module(module)
    dotted = ".".join(Path(entry_file).with_suffix("").parts)
    entry = importlib.import_module(f"{package}.{dotted}")
    return getattr(entry, symbol, None)


def _arity_problem(fn: Any, arity: int, symbol: str) -> str | None:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if not (len(required) <= arity <= len(positional)):
        return f"{symbol}() takes {len(positional)} positional arguments but the definition passes {arity}"
    return None


def _copy_returned(value: Any, outputs: list[torch.Tensor], *, cast: bool = False) -> dict[str, Any] | None:
    """Copy a value-returning ``run``'s result into the output buffers (after timing). A dtype other than the
    buffer's is the candidate's INCORRECT_DTYPE, unless ``cast`` (the reference's timing twin: the trusted
    correctness path accepts a reference in any dtype, so its timing must too)."""
    values = (
        [value]
        if isinstance(value, torch.Tensor)
        else list(value)
        if isinstance(value, (tuple, list))
        else None
    )
    if values is None or len(values) != len(outputs) or not all(isinstance(v, torch.Tensor) for v in values):
        return {
            "status": "INCORRECT_SHAPE",
            "error": f"run returned {type(value).__name__}, expected {len(outputs)} tensor(s)",
        }
    for i, (got, out) in enumerate(zip(values, outputs, strict=True)):
        if tuple(got.shape) != tuple(out.shape):
            return {
                "status": "INCORRECT_SHAPE",
                "error": f"output {i} has shape {tuple(got.shape)}, expected {tuple(out.shape)}",
            }
        if got.dtype != out.dtype and not cast:
            return {
                "status": "INCORRECT_DTYPE",
                "error": f"output {i} has dtype {got.dtype}, expected {out.dtype}",
            }
        out.copy_(got)
    return None


def _error_text(exc: BaseException, source_dir: str | None) -> str:
    """The traceback of ``exc`` as the candidate's author (often a model) needs it. When frames of the
    candidate's own files (under ``source_dir``) are in it, it starts at the first of them, so the harness's
    frames above are left out; otherwise it is whole, so that a failure of the harness stays diagnosable.
    Paths under ``source_dir`` are written relative to it (``kernel.py``, as in the solution's sources)."""
    report = traceback.TracebackException.from_exception(exc)
    prefix = source_dir + os.sep if source_dir else None
    frames = list(report.stack)
    first = next((i for i, f in enumerate(frames) if prefix and f.filename.startswith(prefix)), None)
    if first is not None:  # chained causes and exception-group members keep their own stacks
        report.stack = traceback.StackSummary.from_list(frames[first:])
    text = "".join(report.format())
    return text.replace(prefix, "") if prefix else text


def _os_errno(exc: BaseException | None) -> int | None:
    """The errno of the first ``OSError`` in ``exc``'s chain (EFBIG and ENOSPC name the sandbox's file-size
    and disk limits), else None."""
    seen = 0
    while exc is not None and seen < 16:
        if isinstance(exc, OSError) and isinstance(exc.errno, int):
            return exc.errno
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def serve(
    fd_in: int, fd_out: int, fd_channel: int, device: str, *, warm_spans: bool = False, seeded: bool = False
) -> None:
    """Answer requests until ``exit`` or end of input; ``fd_channel`` is the descriptor channel. With
    ``warm_spans`` (the trusted side will ask for CUPTI spans) CUPTI is loaded before the worker says it is ready
    (:meth:`fibserve.bench.worker.kernel_span.SpanRecording.warm`). ``seeded``: the zygote's build of the gate
    kernel was copied into this worker's Triton cache (:mod:`fibserve.bench.worker.gate_seed`); the ready
    message's ``gate_seeded`` says the gate then compiled nothing, ``start_ms`` times the start's steps."""
    reader = os.fdopen(fd_in, "r", encoding="utf-8")
    writer = os.fdopen(fd_out, "w", encoding="utf-8")
    channel = socket.socket(fileno=fd_channel)

    def send(message: dict[str, Any]) -> None:
        writer.write(json.dumps(message) + "\n")
        writer.flush()

    worker = Worker(device, channel)
    if warm_spans:
        began = time.perf_counter()
        worker.recording.warm()
        worker.start_ms["cupti"] = (time.perf_counter() - began) * 1e3
    send(
        {
            "ready": True,
            "pid": os.getpid(),
            "device": str(worker.device),
            "torch": torch.__version__,
            "start_ms": worker.start_ms,
            "gate_seeded": seeded and not worker.gate_compiled,
        }
    )
    for line in reader:
        req = json.loads(line)
        op = req.get("op")
        if op == "exit":
            break
        try:
            if op not in ("call", "spans"):
                worker.stop_recording()
            reply = getattr(worker, op)(req)
        except BaseException as exc:
            reply = {
                "ok": False,
                "error": _error_text(exc, worker.source_dir)[-8000:],
                "error_type": type(exc).__name__,
                "errno": _os_errno(exc),
            }
        send(reply)
        if not reply.get("ok"):
            break


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (bubblewrap does the same with
    ``--die-with-parent``), so a candidate stuck in a loop cannot outlive the evaluator."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9)  # PR_SET_PDEATHSIG = 1, SIGKILL = 9
    except (OSError, AttributeError):
        pass
