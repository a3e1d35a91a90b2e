"""What a sandboxed process can see and do: each claim of docs/security.md about isolation, shown here.

The hostile probe (``bench/kernels/hostile_probe.py``, the same one the Evaluator tests run as a candidate)
runs once as a plain program in a sandbox like an evaluation worker's (Python mounted) and reports what it
found; each test asserts one finding. The bait it must not reach (``sandbox_probes.planted``): a host process
holding a token in its command line and environment, a listening socket, a file in the host's /dev/shm, the
checkout, a service-state directory, the build cache and the home directory.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from fibserve import sandbox
from sandbox_probes import escaped_writes, planted, python_probe


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> dict:
    with planted(tmp_path_factory.mktemp("bait")) as bait:
        program = python_probe(bait) + "\nprint(json.dumps(probe(ARGS)))\n"
        done = sandbox.run(
            [sys.executable, "-c", program],
            mounts=sandbox.Mounts(python=True),
            limits=sandbox.Limits(),
            timeout_s=120,
        )
        written = bait.written()
    assert done.returncode == 0, done.output
    return {**json.loads(done.output.strip().splitlines()[-1]), "written": written}


def test_it_runs_as_nobody_without_capabilities(findings: dict) -> None:
    assert (findings["uid"], findings["gid"]) == (65534, 65534)
    assert int(findings["caps"], 16) == 0
    assert findings["hostname"] == "fibserve-sandbox"


def test_its_proc_shows_only_its_own_processes(findings: dict) -> None:
    """A fresh PID namespace: bubblewrap's init and the probe, none of the host's (the bait's token holder)."""
    commands = findings["processes"]
    assert commands and all(c.split()[0].endswith(("bwrap", Path(sys.executable).name)) for c in commands), (
        commands
    )


def test_no_token_or_key_of_another_process_is_readable(findings: dict) -> None:
    assert findings["token"] == [] and findings["environment"] is False


def test_host_files_outside_the_allowlist_do_not_exist(findings: dict) -> None:
    assert not any(findings["readable"].values()), findings["readable"]
    assert not any(findings["exists"].values()), findings["exists"]
    # the home exists inside only where a mounted directory (the Python install, say) lies below it
    home = Path.home()
    leading = {p.relative_to(home).parts[0] for p in sandbox.mounts.python_dirs() if p.is_relative_to(home)}
    assert findings["home_listing"] is None or set(findings["home_listing"]) <= leading


def test_nothing_outside_its_work_dir_is_writable(findings: dict) -> None:
    assert escaped_writes(findings["writable"]) == [] and findings["written"] == []
    assert findings["work_writable"] is True


def test_it_has_no_network(findings: dict) -> None:
    assert findings["network"] is False
