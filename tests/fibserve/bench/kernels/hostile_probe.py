"""A hostile candidate (tests only): tries each attack of issue 14 from inside its sandbox.

``probe(ARGS)`` returns what it found; ``run`` (the candidate's entry point) leaves a setsid orphan and raises
with the findings, so whatever it could read travels back in its trace log, as the attack in the issue did.
``$args`` is replaced by the test with a JSON object: the token to look for (reversed, so that it is spelled
nowhere in this source), paths to read, write and look for, the home directory, the port of a listening
socket and a marker for the orphan.
"""

import json
import os
import socket
import sys

ARGS = json.loads(r"""$args""")


def _holding(token):
    """The command lines and environments of /proc entries that contain ``token`` (the leak itself)."""
    hits = []
    for pid in os.listdir("/proc"):
        for name in ("cmdline", "environ") if pid.isdigit() else ():
            try:
                with open(f"/proc/{pid}/{name}", "rb") as file:
                    data = file.read()
            except OSError:
                continue
            if token.encode() in data:
                hits.append(data.decode(errors="replace"))
    return hits


def _readable(path):
    try:
        with open(path, "rb") as file:
            file.read(1)
    except OSError:
        return False
    return True


def _writable(path):
    try:
        with open(path, "w") as file:
            file.write("pwned")
    except OSError:
        return False
    return True


def _connects(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return False
    return True


def _commands():
    """The command line of every process this one's /proc lists."""
    commands = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                commands.append(handle.read(200).replace(b"\0", b" ").decode(errors="replace").strip())
        except (OSError, NotADirectoryError):
            continue
    return commands


def probe(args):
    """Everything this process can see and do that the sandbox should forbid."""
    token = args["token_reversed"][::-1]
    with open("/proc/self/status") as status:
        caps = next(line.split()[1] for line in status if line.startswith("CapEff"))
    home = args["home"]
    return {
        "uid": os.getuid(),
        "gid": os.getgid(),
        "caps": caps,
        "hostname": socket.gethostname(),
        "processes": _commands(),
        "token": _holding(token),
        "environment": token in json.dumps(dict(os.environ)),
        "readable": {path: _readable(path) for path in args["read"]},
        "writable": {path: _writable(path) for path in args["write"]},
        "exists": {path: os.path.exists(path) for path in args["exists"]},
        "home_listing": sorted(os.listdir(home)) if os.path.isdir(home) else None,
        "network": _connects(args["port"]),
        "work_writable": _writable("/tmp/own-file"),
    }


def _leave_an_orphan(marker):
    """A setsid double fork: the grandchild is in no process group or session of the worker's."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", marker])
        os._exit(0)
    os.wait()


def run(x, y, z):
    found = probe(ARGS)
    _leave_an_orphan(ARGS["marker"])
    raise RuntimeError("FINDINGS " + json.dumps(found))
