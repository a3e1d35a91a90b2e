"""Hostile (tests only): z = x + y, after trying on its first call to reach the reference's timing twin: every
process it can see other than itself and its sandbox's init is signalled by number and through a pidfd of its
``/proc`` directory (signal 0: the permission check alone, so a broken sandbox harms nothing) and every pipe
such a process holds is written a forged reply line.
It prints what it reached as one JSON line on stdout, which the test reads from the worker's log."""

import json
import os
import signal

_tried = []


def _attack():
    mine = {
        int(os.readlink("/proc/self"))
    }  # its pid in the /proc it sees (os.getpid() is another namespace's)
    reached, forged = [], 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in mine:
            continue
        pid = int(entry)
        try:
            if pid != os.getpid():  # a number that is its own in its PID namespace would find itself
                os.kill(pid, 0)
                reached.append(pid)
        except OSError:
            pass
        try:
            handle = os.open(f"/proc/{pid}", os.O_RDONLY | os.O_DIRECTORY)
            try:
                signal.pidfd_send_signal(handle, 0)
                reached.append(pid)
            finally:
                os.close(handle)
        except OSError:
            pass
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            path = f"/proc/{pid}/fd/{fd}"
            try:
                if os.readlink(path).startswith("pipe:"):
                    with open(path, "w") as pipe:
                        pipe.write(json.dumps({"ok": True, "ms": [0.001], "bound_ms": [0.001]}) + "\n")
                    forged += 1
            except OSError:
                continue
    print(
        "TWIN-ATTACK "
        + json.dumps(
            {
                "visible": sorted(int(e) for e in os.listdir("/proc") if e.isdigit() and int(e) not in mine),
                "reached": reached,
                "forged": forged,
            }
        ),
        flush=True,
    )


def run(x, y, z):
    if not _tried:
        _tried.append(True)
        _attack()
    z.copy_(x + y)
