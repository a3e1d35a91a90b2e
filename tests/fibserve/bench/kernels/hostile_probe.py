"""A hostile candidate (tests only): tries each attack of issue 14 from inside its worker, then raises with
what it found, so that whatever it could read travels back in its trace log as the attack in the issue did.

``$args`` is replaced by the test with a JSON object: the token to look for (reversed, so that it is spelled
nowhere in this source), the files to read and write, the port of a listening socket, and a marker for the
orphan it leaves behind.
"""

# ruff: noqa: SIM115  (each attack is one expression inside _try)
import json
import os
import socket
import sys

ARGS = json.loads(r"""$args""")


def _try(action):
    try:
        return action()
    except Exception as exc:  # each attack's failure is a finding too
        return f"{type(exc).__name__}: {exc}"[:200]


def _processes_holding(token):
    hits = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        for name in ("cmdline", "environ"):
            try:
                data = open(f"/proc/{pid}/{name}", "rb").read()
            except OSError:
                continue
            if token.encode() in data:
                hits.append(data.decode(errors="replace"))  # the leak itself goes into the log
    return hits


def _leave_an_orphan(marker):
    """A setsid double fork: the grandchild is in no process group or session of the worker's."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", marker])
        os._exit(0)
    os.wait()


def _connect(port):
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    return "connected"


def run(x, y, z):
    token = ARGS["token_reversed"][::-1]
    found = {
        "uid": os.getuid(),
        "shadow": _try(lambda: open("/etc/shadow").read()[:40]),
        "processes": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
        "token": _processes_holding(token),
        "environment": token in json.dumps(dict(os.environ)),
        "checkout_read": _try(lambda: open(ARGS["checkout_file"]).read()[:40]),
        "checkout_write": _try(lambda: open(ARGS["checkout_pwned"], "w").write("pwned")),
        "cache_write": _try(lambda: open(ARGS["cache_pwned"], "w").write("pwned")),
        "state_read": _try(lambda: open(ARGS["state_file"]).read()[:40]),
        "network": _try(lambda: _connect(ARGS["port"])),
        "shm_write": _try(lambda: open(ARGS["shm_pwned"], "w").write("pwned")),
    }
    _leave_an_orphan(ARGS["marker"])
    raise RuntimeError("FINDINGS " + json.dumps(found))
