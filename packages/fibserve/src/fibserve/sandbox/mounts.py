"""What a sandboxed process can see: an allowlist of mounts, assembled as bubblewrap arguments.

The sandbox's root is an empty read-only tmpfs; only these are mounted into it:

- the system's programs and libraries, read-only: ``/usr`` (compilers, headers, the CUDA toolkit when it
  lives there, the driver's ``libcuda``), the ``LD_LIBRARY_PATH`` directories, the ``/bin``, ``/sbin``,
  ``/lib*`` links, and from ``/etc`` only the
  dynamic loader's files and ``alternatives`` (``/usr/bin/cc`` points there), plus a two-line ``passwd`` and
  ``group`` written by the service (so there is no ``/etc/shadow``, ``/etc/hostname`` or ``/etc/ssh``);
- ``/proc`` of the sandbox's own PID namespace, a minimal ``/dev`` (null, zero, random, urandom, tty) with a
  private ``/dev/shm``, and a private size-limited tmpfs at ``/tmp`` that is the work dir (HOME too);
- for Python processes (workers, the tool runner): the interpreter's prefixes, its site-packages, the
  ``PYTHONPATH`` entries and the directory holding the ``fibserve`` package, read-only;
- for GPU processes: the ``/dev/nvidia*`` device nodes, ``/sys`` read-only, and the host's ``/dev/shm``,
  because the driver's CUDA IPC keeps ``cuda.shm.*`` files there and fails when the two sides see different
  ones (measured on the H200, benchmarks/sandbox_gpu_probe.py);
- the caller's ``readable`` paths (a toolchain outside ``/usr``, one candidate's build directory, a tool's
  install directory) read-only and ``writable`` paths (one build's staging directory) read-write.

Nothing else of the host exists inside: no home directories, no checkout, no service state, no build cache
beyond the paths passed in. The processes run in their own user (uid 65534 inside, mapped to the service's
own uid outside, which keeps CUDA IPC working), PID, IPC, network, mount, UTS and cgroup namespaces, with no
capabilities, in a session of their own, and die with the service: with the *thread* of the service that started
them (``--die-with-parent`` is ``PR_SET_PDEATHSIG``), so a sandbox that must outlive a request is started from a
thread that lives as long as the process (the zygotes: :mod:`fibserve.bench.worker.forking`).
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .limits import Limits

SANDBOX_UID = 65534
"""uid and gid inside the sandbox (``nobody``); outside they are the service's own."""

WORK_DIR = Path("/tmp")
"""The sandbox's private, size-limited work dir (also HOME and TMPDIR)."""

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_ENTRIES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime")

NAMESPACES = (
    "--unshare-all", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "fibserve-sandbox",
    "--die-with-parent", "--new-session", "--cap-drop", "ALL",
)  # fmt: skip


@dataclass(frozen=True)
class Mounts:
    """What one sandbox sees beyond the system base (see the module docstring)."""

    python: bool = False
    """Mount the Python interpreter, its site-packages and the fibserve package."""
    gpu: bool = False
    """Mount the NVIDIA device nodes, ``/sys`` and the host's ``/dev/shm``."""
    readable: tuple[Path, ...] = ()
    """Further paths, read-only."""
    writable: tuple[Path, ...] = ()
    """Paths the sandbox may write."""


@lru_cache(maxsize=1)
def _etc_dir() -> Path:
    """``passwd`` and ``group`` naming only root and nobody (Python's ``pwd`` and ``getpass`` want them)."""
    directory = Path(tempfile.mkdtemp(prefix="fibserve-sandbox-etc-"))
    directory.chmod(0o755)
    (directory / "passwd").write_text(
        f"root:x:0:0:root:/tmp:/usr/sbin/nologin\nnobody:x:{SANDBOX_UID}:{SANDBOX_UID}:nobody:/tmp:/usr/sbin/nologin\n"
    )
    (directory / "group").write_text(f"root:x:0:\nnogroup:x:{SANDBOX_UID}:\n")
    atexit.register(shutil.rmtree, directory, True)
    return directory


def package_root() -> Path:
    """The directory that holds the ``fibserve`` package (``src/`` of a checkout, or site-packages)."""
    return Path(__file__).resolve().parents[2]


def python_dirs() -> list[Path]:
    """Directories a Python sandbox needs: prefixes, site directories, ``PYTHONPATH``, the fibserve package."""
    prefixes = {sys.base_prefix, sys.prefix, sys.base_exec_prefix, sys.exec_prefix}
    found = [Path(p) for p in prefixes]
    found += [Path(p) for p in sys.path if p and Path(p).name in ("site-packages", "dist-packages")]
    found += [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    found.append(package_root())
    return [p for p in dict.fromkeys(p.resolve() for p in found) if p.is_dir()]


def python_path() -> str:
    """``PYTHONPATH`` of a Python sandbox: the fibserve package and the service's own ``PYTHONPATH``."""
    entries = [str(package_root()), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    return os.pathsep.join(dict.fromkeys(entries))


def library_dirs() -> list[Path]:
    """The ``LD_LIBRARY_PATH`` directories that exist (a driver or CUDA install outside ``/usr``, say)."""
    entries = [Path(p) for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    return [p for p in entries if p.is_dir()]


def gpu_nodes() -> list[str]:
    """The NVIDIA device nodes of this machine (``/dev/nvidia0``, ``nvidiactl``, ``nvidia-uvm``, ...)."""
    return sorted(glob.glob("/dev/nvidia*"))


def _covered(path: Path, roots: Iterable[Path]) -> bool:
    return any(path.is_relative_to(root) for root in roots)


def _binds(paths: Sequence[Path], flag: str, covered: list[Path]) -> list[tuple[Path, list[str]]]:
    """``(real path, args)`` binding each existing path at its real location, plus a symbolic link where it
    was spelled through one (``/opt/cuda`` -> ``/opt/cuda-13.0``); paths already visible are skipped."""
    found = []
    for raw in paths:
        spelled = Path(os.path.abspath(raw))
        real = spelled.resolve()
        if not real.exists() or _covered(real, covered):
            continue
        args = [flag, str(real), str(real)]
        if spelled != real and not _covered(spelled, covered):
            args += ["--symlink", str(real), str(spelled)]
        found.append((real, args))
        covered.append(real)
    return found


def _system() -> tuple[list[str], list[Path]]:
    args: list[str] = []
    covered: list[Path] = []
    for name in SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            args += ["--ro-bind", name, name]
            covered.append(path)
    for entry in ETC_ENTRIES:
        args += ["--ro-bind-try", f"/etc/{entry}", f"/etc/{entry}"]
    etc = _etc_dir()
    args += ["--ro-bind", str(etc / "passwd"), "/etc/passwd", "--ro-bind", str(etc / "group"), "/etc/group"]
    return args, covered


def bwrap_argv(bwrap: str, mounts: Mounts, limits: Limits, cwd: Path = WORK_DIR) -> list[str]:
    """The bubblewrap command line (up to, not including, the sandboxed command) for ``mounts``, starting
    the command in ``cwd`` (a path the sandbox sees). Nothing of the host is written through the sandbox's
    own root: what the service hands in crosses as descriptors (``fibserve.bench.worker.handover``)."""
    args, covered = _system()
    args = [bwrap, *NAMESPACES, *args, "--proc", "/proc", "--dev", "/dev"]
    if limits.disk_bytes is not None:
        args += ["--size", str(limits.disk_bytes)]
    args += ["--tmpfs", str(WORK_DIR)]
    if mounts.gpu:
        for node in gpu_nodes():
            args += ["--dev-bind", node, node]
        args += ["--bind", "/dev/shm", "/dev/shm", "--ro-bind", "/sys", "/sys"]
    readable = [*library_dirs(), *(python_dirs() if mounts.python else []), *mounts.readable]
    ordered = _binds(list(mounts.writable), "--bind", covered) + _binds(readable, "--ro-bind", covered)
    for _, bind in sorted(ordered, key=lambda item: len(item[0].parts)):
        args += bind
    return [*args, "--remount-ro", "/", "--chdir", str(cwd)]
