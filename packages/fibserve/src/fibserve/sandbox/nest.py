"""A fresh sandbox nested inside a sandboxed process, for a child forked from it (standard library only).

A lane's workers are forked from one warm interpreter (:mod:`fibserve.bench.worker.zygote`), itself a bubblewrap
sandbox (:mod:`fibserve.sandbox.mounts`: read-only root, no network, its own user, PID and IPC namespaces, no
capabilities). Each forked child isolates itself from the zygote and from its siblings before any candidate
code runs, with the kernel's own primitives (Linux's ``unshare(2)``, ``mount(2)``, ``prctl(2)``, ``capset(2)``):

- :func:`enter_namespaces` (in the first child): new user, mount, PID and IPC namespaces, the uid and gid kept
  (mapped to themselves). The child's own child (:func:`fork_init`) is PID 1 of the new PID namespace: it has
  no PID for a sibling to signal or trace, and when it dies the kernel kills everything it started.
- :func:`private_mounts` (in PID 1): the mount tree made private, and fresh size-limited tmpfs mounts over
  ``/tmp`` (and ``/dev/shm`` on CPU), so no file of the zygote or of an earlier worker is visible and nothing is
  left for the next.
- :func:`drop_privileges` (last, in PID 1): every capability dropped (bounding set included) and
  ``no_new_privs`` set, as bubblewrap's ``--cap-drop ALL`` leaves its own children, and the process not
  dumpable (:func:`forbid_tracing`, which the zygote sets on itself too): same-user processes may trace each
  other across user namespaces while they are dumpable, so without it a worker could open its sibling's or the
  zygote's ``/proc/PID/mem``.

``/proc`` stays the zygote's (a new procfs cannot be mounted under bubblewrap's read-only ``/proc/sys``): a worker
can list its siblings' pids and read what any process may read there (``cmdline``, ``stat``), but not their
memory, descriptors or environment, which need trace access: refused to a process in another user namespace
without capabilities over it, and to anyone over a process that is not dumpable. Signals cannot
reach them either: a PID is looked up in the sender's PID namespace, where no sibling has one.

A GPU worker gets no PID namespace: the CUDA driver fails to initialise (error 304, "OS call failed") when the
process's PID does not match the ``/proc`` it sees (measured on the H200, 2026-12-03: user, mount and IPC
namespaces work, a PID namespace alone breaks it). It shares the zygote's, so it is made its descendants'
reaper (:func:`become_subreaper`) and its signals are kept to itself by a seccomp filter
(:mod:`fibserve.sandbox.signal_filter`).
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
import resource
import signal
import stat

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MS_NOSUID = 0x2
MS_NODEV = 0x4
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
CAP_LAST = 63
_SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT = 428, 429
"""Numbers shared by every machine (the generic syscall table of Linux 5.2+)."""
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
OPEN_TREE_CLONE = 1
OPEN_TREE_CLOEXEC = os.O_CLOEXEC
MOVE_MOUNT_F_EMPTY_PATH = 0x4
"""``capset``'s syscall number per machine (Linux's ``unistd`` tables)."""
_CAPABILITY_VERSION_3 = 0x20080522


class NestError(OSError):
    """A namespace, mount or privilege change failed (the child exits; the trusted side sees a failed start)."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise NestError(errno, f"{what}: {os.strerror(errno)}")


def enter_namespaces(pid: bool = True) -> None:
    """New user, mount and IPC namespaces for this process, with its uid and gid mapped to themselves, and with
    ``pid`` a new PID namespace, whose PID 1 is the next child it forks.

    Raises:
        NestError: the kernel refused (user namespaces disabled, or nested too deep).
    """
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC | (CLONE_NEWPID if pid else 0)
    _check(_libc().unshare(flags), "unshare")
    with open("/proc/self/setgroups", "w") as handle:
        handle.write("deny")
    with open("/proc/self/uid_map", "w") as handle:
        handle.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as handle:
        handle.write(f"{gid} {gid} 1")


def fork_init() -> int | None:
    """Fork the worker (PID 1 of the namespace :func:`enter_namespaces` made, when it made one): None in the
    child (which should then set itself up and run); in the parent, the child's exit code once it is gone
    (negative: the signal that killed it). The child dies with the parent."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # a zygote ignores SIGCHLD to reap; this parent must wait
    pid = os.fork()
    if pid == 0:
        _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        return None
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def private_mounts(tmp_bytes: int | None, private_shm: bool) -> None:
    """Make this mount namespace's tree private and mount fresh tmpfs at ``/tmp`` (``tmp_bytes`` large, or
    half the memory when None) and, with ``private_shm``, at ``/dev/shm``. What the zygote's sandbox mounted
    below ``/tmp`` (a Python path or a library directory that lives there, read-only) is carried over to the
    same place on the fresh tmpfs (Linux's ``open_tree(2)`` and ``move_mount(2)``), else the worker could not
    import what the zygote could.

    Raises:
        NestError: a mount failed.
    """
    libc = _libc()
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    carried = [(path, _clone_tree(path)) for path in submounts("/tmp")]
    size = f"size={tmp_bytes},mode=1777".encode() if tmp_bytes is not None else b"mode=1777"
    _check(libc.mount(b"tmpfs", b"/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, size), "mount /tmp")
    for path, tree in carried:
        _place(tree, path)
    if private_shm:
        _check(
            libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=1777"), "mount /dev/shm"
        )


def submounts(top: str) -> list[str]:
    """The outermost mount points strictly below ``top`` in this mount namespace (``/proc/self/mountinfo``,
    whose fifth field is the mount point with space, tab, newline and backslash escaped in octal)."""
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        points = [_unescape(line.split()[4]) for line in handle]
    below = sorted({p for p in points if p.startswith(top.rstrip("/") + "/")})
    return [p for p in below if not any(p != q and p.startswith(q + "/") for q in below)]


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)


def _clone_tree(path: str) -> int:
    """A detached copy of the mount tree at ``path``, as a descriptor."""
    fd = _libc().syscall(
        _SYS_OPEN_TREE, AT_FDCWD, path.encode(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE
    )
    if fd < 0:
        _check(-1, f"clone the mount at {path}")
    return fd


def _place(tree: int, path: str) -> None:
    """Attach the detached mount tree ``tree`` at ``path`` (made as an empty directory or file first)."""
    try:
        if stat.S_ISDIR(os.fstat(tree).st_mode):
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "a").close()
        result = _libc().syscall(_SYS_MOVE_MOUNT, tree, b"", AT_FDCWD, path.encode(), MOVE_MOUNT_F_EMPTY_PATH)
        if result != 0:
            _check(-1, f"attach the mount at {path}")
    finally:
        os.close(tree)


def become_subreaper() -> None:
    """Make this process its descendants' reaper (``PR_SET_CHILD_SUBREAPER``): an orphan of a ``setsid`` double
    fork stays below it, where the trusted side's kill of the tree finds it, instead of leaving for the PID
    namespace's init. A worker without a PID namespace of its own needs this; PID 1 is its namespace's reaper.

    Raises:
        NestError: the kernel refused.
    """
    _check(_libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "child subreaper")


def set_limits(cpu_s: int | None, file_bytes: int | None) -> None:
    """The sandbox's rlimits (as :mod:`fibserve.sandbox.launch` sets them for a spawned sandbox): CPU seconds
    (SIGXCPU, then SIGKILL 5 s later), the largest file, and no core files."""
    if cpu_s is not None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))
    if file_bytes is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def forbid_tracing() -> None:
    """Make this process (and what it forks) not dumpable: its ``/proc`` files that need trace access
    (``mem``, ``environ``, ``fd``, ``maps``) and ``ptrace`` itself are then refused to any process without
    ``CAP_SYS_PTRACE`` over its user namespace, even one running as the same user (a sibling worker).

    Raises:
        NestError: the kernel refused.
    """
    _check(_libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable")


def drop_privileges() -> None:
    """Drop every capability (the bounding set too), set ``no_new_privs`` and stay not dumpable
    (:func:`forbid_tracing`).

    Raises:
        NestError: the kernel refused one of them.
    """
    libc = _libc()
    for cap in range(CAP_LAST + 1):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: no such cap
            _check(-1, f"drop capability {cap} from the bounding set")
    header, data = _CapHeader(_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    _check(libc.syscall(_SYS_CAPSET[platform.machine()], ctypes.byref(header), data), "capset")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    forbid_tracing()
