"""The gate kernel compiled once per zygote and copied into every GPU worker's own Triton cache (UNTRUSTED side,
run before any candidate code).

A GPU worker builds the cold-L2 gate kernel as it starts (:func:`fibserve.bench.worker.l2_state.warm_gate`),
into a Triton cache of its own: a cache shared by workers would let one candidate plant the kernel, or the
launcher library, that the next worker's gate loads. From an empty cache that build is Triton's JIT of the
kernel plus gcc compiling Triton's CUDA utilities and the kernel's launcher, most of a worker's start after its
CUDA context (a GPU worker was ready in p50 1,699 ms on the H100, docs/gpu-results.md, twelfth session).

The zygote must not create a CUDA context (one does not survive ``fork``), so :func:`make` forks a child of it
that does: the child builds the gate into a fresh cache directory and exits. No candidate has run in the zygote
or its children when it does. Each worker reads that directory (:func:`read`) before it mounts its private
``/tmp`` over the zygote's, and writes the files into its own cache (:func:`plant`). Triton's group files
(``__grp__*``) name their members by absolute path, which :func:`plant` moves to the worker's cache. A candidate
may change its own copy; no other worker sees it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
import traceback
from pathlib import Path

SEED_TIMEOUT_S = 120.0
"""How long the zygote waits for the child that builds the seed; without a seed each worker builds its own."""

GROUP_PREFIX = "__grp__"
"""Triton's group files (``triton.runtime.cache.FileCacheManager.put_group``): JSON naming files by absolute path."""


def make(device: str, timeout_s: float = SEED_TIMEOUT_S) -> str | None:
    """Build the gate kernel for ``device`` (``cuda:N``) into a fresh Triton cache directory, in a child process
    (and process group) that creates the CUDA context this one must not; the directory, or None where no gate
    could be built: not a GPU, no Triton, the child failed, or it ran past ``timeout_s`` seconds and its group was
    killed. Never raises. Call it while this process still reaps its children (before ``SIGCHLD`` is ignored)."""
    if not device.startswith("cuda"):
        return None
    cache = None
    try:
        cache = tempfile.mkdtemp(prefix="fibserve-gate-seed-")
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child exits without returning
            code = 1
            try:
                os.setpgid(0, 0)  # its compilers (gcc, ptxas) die with it
                code = 0 if _build(device, cache) else 1
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        if _wait(pid, timeout_s) == 0:
            return cache
    except OSError:
        pass
    if cache is not None:
        shutil.rmtree(cache, ignore_errors=True)
    return None


def _build(device: str, cache: str) -> bool:
    """In the child: the gate kernel built into ``cache`` (:func:`fibserve.bench.worker.l2_state.warm_gate`)."""
    os.environ["TRITON_CACHE_DIR"] = cache
    import torch

    from fibserve.bench.worker.clock import GATE_HOLD_MS
    from fibserve.bench.worker.l2_state import warm_gate

    torch.cuda.set_device(torch.device(device))
    return warm_gate(torch.device(device), GATE_HOLD_MS)


def _wait(pid: int, timeout_s: float) -> int | None:
    """The exit code of child ``pid``, waited for up to ``timeout_s`` seconds; None when it ran longer (its process
    group is then killed, and it is reaped if it dies within a second: a child stuck in the GPU driver may not)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() <= deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    for _ in range(50):
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0]:
                break
        time.sleep(0.02)
    return None


def read(seed: str | None) -> dict[str, bytes]:
    """Every file of the seed directory by its path relative to it ({} for None or an unreadable seed)."""
    if not seed:
        return {}
    files: dict[str, bytes] = {}
    try:
        for path in Path(seed).rglob("*"):
            if path.is_file() and not path.is_symlink():
                files[str(path.relative_to(seed))] = path.read_bytes()
    except OSError:
        return {}
    return files


def plant(files: dict[str, bytes], seed: str, cache: str) -> int:
    """Write ``files`` (from :func:`read` of ``seed``) into the Triton cache directory ``cache``, group files'
    paths moved from ``seed`` to ``cache``, group files last; the number of files written. All or nothing: where a
    file cannot be written, ``cache`` is removed and 0 returned (a group file naming a missing member would make
    Triton take a partial build for a whole one), and the worker builds the gate itself. Raises nothing."""
    ordered = sorted(files.items(), key=lambda item: Path(item[0]).name.startswith(GROUP_PREFIX))
    try:
        for relative, data in ordered:
            target = Path(cache, relative)
            if Path(relative).name.startswith(GROUP_PREFIX):
                data = data.replace(os.fsencode(seed), os.fsencode(cache))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    except OSError:
        shutil.rmtree(cache, ignore_errors=True)
        return 0
    return len(ordered)
