"""The warm interpreter a lane's workers are forked from (UNTRUSTED side: it runs in a bubblewrap sandbox).

Started by :mod:`fibserve.bench.worker.forking` (on its zygote thread) as ``python -m fibserve.bench.worker.zygote
--control FD --device D`` inside a :class:`fibserve.sandbox.Sandbox` like any worker's. It imports torch, Triton and the worker's own
modules once (about 2 CPU-seconds that every worker used to pay) and initialises nothing on the GPU (a CUDA
context does not survive ``fork``), then forks one worker per request and never runs candidate code itself.
On a GPU it first has a child of its own build the cold-L2 gate kernel into a Triton cache that each worker
copies into its own (:mod:`fibserve.bench.worker.gate_seed`).

The control socket carries one request per fork: a JSON object and, by ``SCM_RIGHTS``, five descriptors the
trusted side made: the worker's request pipe (read end), its reply pipe (write end), its descriptor channel,
the pipe its stdout and stderr go to, and a pipe for its exit status. The zygote answers ``{"forked": pid}``.

Each fork becomes a worker with a sandbox of its own (:mod:`fibserve.sandbox.nest`): the first child enters new
user, mount, PID and IPC namespaces and forks PID 1 of them (a GPU worker, request ``pid_namespace: false``,
stays in the zygote's PID namespace, becomes its descendants' reaper and installs
:mod:`fibserve.sandbox.signal_filter`); the worker mounts a private ``/tmp`` (and on CPU a
private ``/dev/shm``), sets its rlimits, drops every capability, announces itself on the descriptor channel
(the trusted side reads its host pid from the kernel's ``SCM_CREDENTIALS`` and moves it into a cgroup of its
own), and serves requests (:func:`fibserve.bench.worker.entry.serve`). The first child waits for it and writes
its exit code to the status pipe. Under ``--unsafe-no-sandbox`` (request ``isolate: false``) the namespaces
and mounts are skipped and the worker gets a fresh directory under the zygote's temporary directory instead.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import traceback
from typing import Any

REQUEST_BYTES = 1 << 16
"""Largest fork request (JSON)."""


def _preload(device: str) -> None:
    """Import what every worker uses, without touching the GPU; on a GPU, also fill Triton's process-wide caches
    that every worker's first compile (of the gate kernel, even from the seed) would fill again: the hash of
    Triton's own files and its 400 MB library (0.5 s), the CUDA library's directory (``ldconfig -p``) and ptxas's
    version (for sm_90, where the other targets miss)."""
    import torch  # noqa: F401

    import fibserve.bench.worker.entry  # noqa: F401

    with contextlib.suppress(ImportError):
        import triton
        import triton.language  # noqa: F401
    if not device.startswith("cuda"):
        return
    with contextlib.suppress(Exception):
        from triton.runtime.cache import triton_key

        triton_key()
    with contextlib.suppress(Exception):
        from triton.backends.nvidia.driver import libcuda_dirs

        libcuda_dirs()
    with contextlib.suppress(Exception):
        from triton.backends.nvidia.compiler import get_ptxas, get_ptxas_version

        get_ptxas(90)
        get_ptxas_version(90)


def _worker(request: dict[str, Any], fds: list[int], seed: str | None) -> None:
    """The first child of a fork request: isolate, fork the worker (PID 1 of its namespaces), report its exit
    code; ``seed`` is the gate kernel's Triton cache (:mod:`fibserve.bench.worker.gate_seed`). Never returns."""
    req_r, rep_w, channel, out_w, status_w = fds
    try:
        if request.get("isolate", True):
            from fibserve.sandbox import nest

            nest.enter_namespaces(pid=request.get("pid_namespace", True))
            code = nest.fork_init()
        else:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            pid = os.fork()
            code = None if pid == 0 else os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    except Exception:
        traceback.print_exc()
        code = 125
    if code is not None:  # the first child: only the status pipe is its business
        with contextlib.suppress(OSError):
            os.write(status_w, str(code).encode())
        os._exit(0)
    os.close(status_w)
    try:
        _become_worker(request, req_r, rep_w, channel, out_w, seed)
    except BaseException:
        traceback.print_exc()
        os._exit(125)
    os._exit(0)


def _become_worker(
    request: dict[str, Any], req_r: int, rep_w: int, channel: int, out_w: int, seed: str | None
) -> None:
    os.setsid()
    os.dup2(out_w, 1)
    os.dup2(out_w, 2)
    _close_all_but({0, 1, 2, req_r, rep_w, channel})
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    from fibserve.bench.worker import gate_seed
    from fibserve.sandbox import nest

    seeded = gate_seed.read(seed) if request["device"].startswith("cuda") else {}  # before /tmp is hidden
    if request.get("isolate", True):
        nest.private_mounts(request.get("tmp_bytes"), private_shm=not request["device"].startswith("cuda"))
        work = "/tmp"
    else:
        work = tempfile.mkdtemp(prefix="fibserve-worker-")
    os.chdir(work)
    os.environ.update(HOME=work, TMPDIR=work, TRITON_CACHE_DIR=os.path.join(work, "triton"))
    planted = gate_seed.plant(seeded, seed, os.environ["TRITON_CACHE_DIR"]) if seed and seeded else 0
    tempfile.tempdir = None  # tempfile caches TMPDIR
    nest.set_limits(request.get("cpu_s"), request.get("file_bytes"))
    if request.get("isolate", True):
        nest.drop_privileges()
        if not request.get("pid_namespace", True):
            from fibserve.sandbox.signal_filter import forbid_signals_to_others

            nest.become_subreaper()
            forbid_signals_to_others()
    sock = socket.socket(fileno=channel)
    sock.sendall(b"p")  # the trusted side reads this process's host pid from the kernel's credentials
    sock.detach()
    from fibserve.bench.worker.entry import serve

    serve(
        req_r,
        rep_w,
        channel,
        request["device"],
        warm_spans=bool(request.get("warm_spans")),
        seeded=planted > 0,
    )


def _close_all_but(keep: set[int]) -> None:
    """Close every descriptor the zygote had open (its imports', its output pipe) except ``keep``."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def main() -> None:
    """Preload, say ready on the control socket, then fork a worker per request until the socket closes."""
    parser = argparse.ArgumentParser(
        description="fibserve worker zygote (started by fibserve.bench.worker.pool)"
    )
    parser.add_argument("--control", type=int, required=True)
    parser.add_argument(
        "--device", default="cpu", help="the lane's device: cuda:N builds the gate kernel's seed"
    )
    args = parser.parse_args()
    from fibserve.bench.worker.entry import die_with_parent

    die_with_parent()
    from fibserve.sandbox import nest

    nest.forbid_tracing()  # a worker must not reach into the process its siblings are forked from
    _preload(args.device)
    from fibserve.bench.worker import gate_seed

    seed = gate_seed.make(args.device)  # while this process still reaps its children
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # first children are reaped by the kernel
    control = socket.socket(fileno=args.control)
    control.sendall(
        json.dumps({"ready": True, "threads": len(os.listdir("/proc/self/task"))}).encode() + b"\n"
    )
    zygote = os.getpid()
    try:
        _serve_forks(control, seed)
    finally:
        if seed and os.getpid() == zygote:  # not a fork that unwound here before it could exit
            shutil.rmtree(seed, ignore_errors=True)


def _serve_forks(control: socket.socket, seed: str | None) -> None:
    """Fork a worker per request on ``control`` until it closes."""
    while True:
        try:
            data, fds, _flags, _address = socket.recv_fds(control, REQUEST_BYTES, 5)
        except OSError:
            return
        if not data:
            return
        request = json.loads(data)
        pid = os.fork()
        if pid == 0:
            control.close()
            _worker(request, fds, seed)
        for fd in fds:
            os.close(fd)
        control.sendall(json.dumps({"forked": pid}).encode() + b"\n")


if __name__ == "__main__":
    main()
