"""Cheats on timing: writes its own reply, claiming more time than the request can have taken, into the worker's reply
pipe (the one pipe it holds open for writing besides stdout and stderr), then computes z = x + y honestly."""

import fcntl
import os


def _reply_pipe():
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            is_pipe = os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:")
        except OSError:
            continue
        if fd > 2 and is_pipe and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
            return fd
    raise RuntimeError("no reply pipe found")


def run(x, y, z):
    os.write(
        _reply_pipe(), b'{"ok": true, "ms": [100000.0], "bound_ms": [100000.0], "overwrite_ms": [0.0]}\n'
    )
    z.copy_(x + y)
