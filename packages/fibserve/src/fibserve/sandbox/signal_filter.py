"""A seccomp filter that keeps a process's signals and trace calls to itself (standard library only).

A GPU worker forked from the zygote cannot have a PID namespace of its own (:mod:`fibserve.sandbox.nest`: the CUDA
driver fails to initialise, error 304, when the process's PID does not match the ``/proc`` it sees, and a new
procfs cannot be mounted under bubblewrap's). Its siblings (the reference's timing twin among them) and the
zygote then have PIDs it can name, and they run as the same user, which is all ``kill(2)`` asks. This filter,
installed before any candidate code runs, makes the kernel answer ``EPERM`` to:

- ``kill``, ``tgkill``, ``rt_sigqueueinfo``, ``rt_tgsigqueueinfo`` and ``pidfd_open`` whose target is not the
  process itself (its PID, 0 for its own process group, or minus its PID), ``-1`` (everyone) included;
- ``tkill`` (a thread id it cannot check), ``pidfd_send_signal`` and ``pidfd_getfd`` (a pidfd can come from any
  ``/proc/PID`` directory), ``ptrace``, ``process_vm_readv`` and ``process_vm_writev``;
- every call through the x32 ABI on x86-64 (another number for the same calls).

What it costs the candidate: it cannot signal processes it starts itself (a ``subprocess`` that times out is
left to the worker's end, which kills everything it started). The filter is inherited by every child and
thread and cannot be removed (``no_new_privs`` is set first). Syscall numbers are Linux's ``unistd`` tables;
the BPF layout is ``struct seccomp_data`` (``linux/seccomp.h``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
X32_SYSCALL_BIT = 0x40000000

_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
"""``AUDIT_ARCH_*`` per machine."""

_CHECKED = {
    "x86_64": {
        "kill": 62,
        "tgkill": 234,
        "rt_sigqueueinfo": 129,
        "rt_tgsigqueueinfo": 297,
        "pidfd_open": 434,
    },
    "aarch64": {
        "kill": 129,
        "tgkill": 131,
        "rt_sigqueueinfo": 138,
        "rt_tgsigqueueinfo": 240,
        "pidfd_open": 434,
    },
}
"""Calls whose first argument names the target process: allowed only for the process itself."""

_DENIED = {
    "x86_64": {
        "tkill": 200,
        "pidfd_send_signal": 424,
        "pidfd_getfd": 438,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
    },
    "aarch64": {
        "tkill": 130,
        "pidfd_send_signal": 424,
        "pidfd_getfd": 438,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
    },
}

_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_NR, _ARCH_OFFSET, _ARG0_LOW = 0, 4, 16  # offsets in struct seccomp_data (little-endian: arg 0's low word)


class FilterError(OSError):
    """The kernel refused the filter, or this machine has no syscall table here."""


def _program(own_pid: int, machine: str) -> list[tuple[int, int, int, int]]:
    """The BPF program as ``(code, jump if true, jump if false, k)`` rows."""
    checked, denied = _CHECKED[machine], _DENIED[machine]
    allowed_targets = [own_pid, 0, (-own_pid) & 0xFFFFFFFF]
    # every jump goes forward (BPF's rule): header, one row per checked call, one per denied call, the default
    # ALLOW, the target check, DENY, ALLOW
    rows: list[tuple[str, int, int | str, int | str, int]] = [
        ("ld arch", _LD_W_ABS, 0, 0, _ARCH_OFFSET),
        ("arch", _JEQ_K, 0, "deny", _ARCH[machine]),
        ("ld nr", _LD_W_ABS, 0, 0, _NR),
        ("x32", _JGE_K, "deny", 0, X32_SYSCALL_BIT),
        *(("checked", _JEQ_K, "check", 0, number) for number in checked.values()),
        *(("denied", _JEQ_K, "deny", 0, number) for number in denied.values()),
        ("other calls", _RET_K, 0, 0, SECCOMP_RET_ALLOW),
        ("check", _LD_W_ABS, 0, 0, _ARG0_LOW),
        *(("target", _JEQ_K, "allow", 0, target) for target in allowed_targets),
        ("deny", _RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM),
        ("allow", _RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    first: dict[str, int] = {}
    for index, row in enumerate(rows):
        first.setdefault(row[0], index)

    def offset(index: int, target: int | str) -> int:
        return target if isinstance(target, int) else first[target] - index - 1

    return [
        (code, offset(i, if_true), offset(i, if_false), k)
        for i, (_, code, if_true, if_false, k) in enumerate(rows)
    ]


def forbid_signals_to_others() -> None:
    """Install the filter in this process (see the module docstring).

    Raises:
        FilterError: the kernel refused it, or this machine is neither x86-64 nor aarch64.
    """
    machine = platform.machine()
    if machine not in _ARCH:
        raise FilterError(errno.ENOSYS, f"no syscall table for {machine}")
    rows = _program(os.getpid(), machine)
    if any(jump < 0 or jump > 255 for row in rows for jump in row[1:3]):
        raise FilterError(errno.EINVAL, "filter jump out of range")
    packed = b"".join(struct.pack("=HBBI", *row) for row in rows)
    buffer = ctypes.create_string_buffer(packed, len(packed))

    class _Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    program = _Program(len(rows), ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    for request, argument in ((PR_SET_NO_NEW_PRIVS, 1), (PR_SET_SECCOMP, SECCOMP_MODE_FILTER)):
        pointer = ctypes.byref(program) if request == PR_SET_SECCOMP else None
        if libc.prctl(request, argument, pointer, 0, 0) != 0:
            code = ctypes.get_errno()
            raise FilterError(code, f"prctl({request}): {os.strerror(code)}")
