"""What a sandboxed process can see and do: each claim of docs/security.md about isolation, shown here.

One probe program runs once in a sandbox like an evaluation worker's (Python mounted) and reports what it
found; each test asserts one finding. Things it must not reach are planted by the test first: a host process
holding a token in its command line and environment, a listening socket, a file in the host's /dev/shm,
the checkout, a service-state directory, the build cache and the home directory.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fibserve import sandbox

CHECKOUT = Path(__file__).resolve().parents[3]

PROBE = textwrap.dedent(
    """
    import json, os, socket, sys
    args = json.loads(sys.argv[1])
    token = args["token_reversed"][::-1]  # never spelled out in this probe's own command line
    found = {"uid": os.getuid(), "gid": os.getgid(), "hostname": socket.gethostname()}
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    found["pids"] = sorted(int(p) for p in pids)
    leaked = []
    for pid in pids:
        for name in ("cmdline", "environ"):
            try:
                data = open(f"/proc/{pid}/{name}", "rb").read()
            except OSError:
                continue
            if token.encode() in data:
                leaked.append(f"{pid}/{name}")
    found["token_in_proc"] = leaked
    found["token_in_env"] = any(token in v for v in os.environ.values())
    found["home_listing"] = sorted(os.listdir(args["home"])) if os.path.isdir(args["home"]) else None
    def readable(path):
        try:
            open(path, "rb").read(1)
            return True
        except OSError:
            return False
    def writable(path):
        try:
            with open(path, "w") as handle:
                handle.write("pwned")
            return True
        except OSError:
            return False
    found["readable"] = {p: readable(p) for p in args["read"]}
    found["writable"] = {p: writable(p) for p in args["write"]}
    found["exists"] = {p: os.path.exists(p) for p in args["exists"]}
    try:
        socket.create_connection(("127.0.0.1", args["port"]), timeout=2).close()
        found["network"] = "connected"
    except OSError as exc:
        found["network"] = type(exc).__name__
    status = open("/proc/self/status").read()
    found["caps"] = [line.split()[1] for line in status.splitlines() if line.startswith("CapEff")][0]
    found["work_writable"] = writable("/tmp/own-file")
    print(json.dumps(found))
    """
)


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Plant the bait, run the probe once in a Python sandbox, return what it reported."""
    token = f"fibserve-test-token-{os.getpid()}-7d1c"
    base = tmp_path_factory.mktemp("bait")
    state = base / "fibserve-state"
    state.mkdir()
    (state / "tasks.sqlite3").write_text("secret task data")
    cache = base / "cache"
    (cache / "builds" / "k").mkdir(parents=True)
    (cache / "builds" / "k" / "kernel.cu").write_text("another client's kernel")
    shm = Path("/dev/shm") / f"fibserve-bait-{os.getpid()}"
    shm.write_text("host shared memory")
    server = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "--token", token],
        env={**os.environ, "OPENAI_API_KEY": token},
    )
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    args = {
        "token_reversed": token[::-1],
        "home": str(Path.home()),
        "port": listener.getsockname()[1],
        "read": [
            "/etc/shadow",
            "/etc/hostname",
            str(state / "tasks.sqlite3"),
            str(shm),
            str(CHECKOUT / "README.md"),
        ],
        "write": [
            str(CHECKOUT / "pwned"),
            str(cache / "builds" / "pwned"),
            "/usr/pwned",
            "/pwned",
            str(base / "pwned"),
        ],
        "exists": [
            "/home",
            str(Path.home() / ".ssh"),
            str(CHECKOUT / ".git"),
            str(cache),
            str(state),
            "/etc/ssh",
        ],
    }
    try:
        done = sandbox.run(
            [sys.executable, "-c", PROBE, json.dumps(args)],
            mounts=sandbox.Mounts(python=True),
            limits=sandbox.Limits(),
            timeout_s=120,
        )
    finally:
        server.kill()
        server.wait()
        listener.close()
        shm.unlink()
    assert done.returncode == 0, done.output
    result = json.loads(done.output.strip().splitlines()[-1])
    result["planted"] = {"pwned": [p for p in args["write"] if Path(p).exists()]}
    for path in result["planted"]["pwned"]:
        Path(path).unlink()
    return result


def test_it_runs_as_nobody_without_capabilities(findings: dict) -> None:
    assert (findings["uid"], findings["gid"]) == (65534, 65534)
    assert int(findings["caps"], 16) == 0
    assert findings["hostname"] == "fibserve-sandbox"


def test_its_proc_shows_only_its_own_processes(findings: dict) -> None:
    assert max(findings["pids"]) < 10, findings["pids"]  # a fresh PID namespace: bwrap's init and the probe


def test_no_token_or_key_of_another_process_is_readable(findings: dict) -> None:
    assert findings["token_in_proc"] == [] and findings["token_in_env"] is False


def test_host_files_outside_the_allowlist_do_not_exist(findings: dict) -> None:
    assert not any(findings["readable"].values()), findings["readable"]
    assert not any(findings["exists"].values()), findings["exists"]
    # the home exists inside only where a mounted directory (the Python install, say) lies below it
    home = Path.home()
    leading = {p.relative_to(home).parts[0] for p in sandbox.mounts.python_dirs() if p.is_relative_to(home)}
    assert findings["home_listing"] is None or set(findings["home_listing"]) <= leading


def test_nothing_outside_its_work_dir_is_writable(findings: dict) -> None:
    assert not any(findings["writable"].values()) and findings["planted"]["pwned"] == []
    assert findings["work_writable"] is True


def test_it_has_no_network(findings: dict) -> None:
    assert findings["network"] != "connected"
