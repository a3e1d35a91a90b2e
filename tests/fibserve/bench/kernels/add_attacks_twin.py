"""Hostile (tests only): z = x + y, after trying on its first call to reach the reference's timing twin: every
process it can see other than itself and its sandbox's init is signalled (signal 0: the permission check
alone, so a broken sandbox harms nothing) and every pipe such a process holds is written a forged reply line.
It prints what it reached as one JSON line on stdout, which the test reads from the worker's log."""

import json
import os

_tried = []


def _attack():
    mine = {os.getpid(), 1}
    reached, forged = [], 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in mine:
            continue
        pid = int(entry)
        try:
            os.kill(pid, 0)
            reached.append(pid)
        except OSError:
            continue
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
                "visible": sorted(int(e) for e in os.listdir("/proc") if e.isdigit()),
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
