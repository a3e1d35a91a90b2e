"""What the trusted side hands a worker, as file descriptors it made itself (both sides; standard library only).

The trusted process never reaches into a worker's file system: a path under ``/proc/<pid>/root`` is whatever
the candidate made of it (a symbolic link to the task store, a file it truncates later). Instead everything
the worker needs from the trusted side crosses a Unix socket as descriptors of *memfds* (anonymous memory
files, no name anywhere) sent with ``SCM_RIGHTS``:

- **CPU buffers** (:func:`sealed_buffer`): the trusted side creates the memfd, sizes it, seals its size
  (``F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL``) and maps it before sending it. The worker maps the same
  pages and writes outputs there, but cannot truncate the file under the trusted mapping, which would kill
  the whole service with SIGBUS the next time it read an output.
- **Build products** (:func:`sealed_copy`): the library or the package files, copied into memfds that are
  also sealed against writes. The worker runs with the service's own kernel uid (65534 only inside its user
  namespace), so a descriptor of a build-cache file, reopened through ``/proc/self/fd``, would let it rewrite
  the cache for the next client; a sealed copy cannot be changed by anyone.

Sources: memfd_create(2), fcntl(2) "File Seals", unix(7) ``SCM_RIGHTS`` (at most 253 descriptors per message,
``SCM_MAX_FD``).
"""

from __future__ import annotations

import fcntl
import mmap
import os
import socket
from collections.abc import Sequence

SIZE_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
"""Seals of a shared buffer: its size is fixed for good, its contents stay writable."""

READ_ONLY_SEALS = SIZE_SEALS | fcntl.F_SEAL_WRITE
"""Seals of a handed-over file: nothing about it can change any more."""

FDS_PER_MESSAGE = 200
"""Descriptors per ``SCM_RIGHTS`` message, under the kernel's ``SCM_MAX_FD`` of 253."""


class HandoverError(RuntimeError):
    """Descriptors could not be made, sent or received (on the worker's side: the trusted side broke the
    protocol or went away)."""


def sealed_buffer(nbytes: int, name: str = "fibserve-buffer") -> tuple[int, mmap.mmap]:
    """A zero-filled memfd of ``max(nbytes, 1)`` bytes whose size is sealed, and this process's shared
    mapping of it. The caller sends the descriptor (:func:`send_fds`) and then closes it; the mapping stays.

    Raises:
        OSError: the memfd could not be created, sized, sealed or mapped (out of memory).
    """
    size = max(nbytes, 1)
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SIZE_SEALS)
        view = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    except BaseException:
        os.close(fd)
        raise
    return fd, view


def sealed_copy(data: bytes, name: str = "fibserve-file") -> int:
    """A memfd holding ``data``, sealed against every change (the descriptor; the caller closes it).

    Raises:
        OSError: the memfd could not be created, written or sealed.
    """
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, READ_ONLY_SEALS)
    except BaseException:
        os.close(fd)
        raise
    return fd


def send_fds(channel: socket.socket, fds: Sequence[int]) -> None:
    """Send ``fds`` in order over ``channel`` (a connected ``AF_UNIX`` stream socket).

    Raises:
        HandoverError: the peer is gone.
    """
    try:
        for start in range(0, len(fds), FDS_PER_MESSAGE):
            socket.send_fds(channel, [b"f"], list(fds[start : start + FDS_PER_MESSAGE]))
    except OSError as exc:
        raise HandoverError(f"could not hand descriptors to the worker: {exc}") from None


def receive_fds(channel: socket.socket, count: int) -> list[int]:
    """Receive exactly ``count`` descriptors sent by :func:`send_fds` (worker side).

    Raises:
        HandoverError: the channel closed or the messages carried fewer descriptors than announced.
    """
    received: list[int] = []
    while len(received) < count:
        data, fds, _flags, _address = socket.recv_fds(channel, 1, FDS_PER_MESSAGE)
        if not data:
            raise HandoverError(f"the channel closed after {len(received)} of {count} descriptors")
        received.extend(fds)
    if len(received) != count:
        for fd in received:
            os.close(fd)
        raise HandoverError(f"expected {count} descriptors, received {len(received)}")
    return received


def read_all(fd: int) -> bytes:
    """The whole contents of a handed-over file descriptor (from its start), which is then closed."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
