"""Joining a Ray cluster as a driver (:mod:`fibserve.ray_driver`): Ray's ``uv run`` hook is off.

Under any ``uv run`` ancestor Ray would zip the driver's current directory, upload it to the cluster and start
every worker through ``uv run``. The test runs a child under a stand-in ``uv`` (a script named ``uv`` whose
command line is ``uv run python ...``, which is all Ray looks for) in a directory holding a file, and asks
Ray's own hook what it would do to the driver's runtime environment before and after the switch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")

CHILD = """
import json
from ray._private.worker import _maybe_modify_runtime_env
from fibserve.ray_driver import _no_uv_run_hook

before = _maybe_modify_runtime_env({}, False)
_no_uv_run_hook()
after = _maybe_modify_runtime_env({}, False)
print(json.dumps({"before": sorted(before), "working_dir": before.get("working_dir"), "after": after}))
"""


def test_the_driver_uploads_no_directory_and_starts_no_worker_through_uv(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    uv = bin_dir / "uv"
    uv.write_text('#!/bin/sh\nshift\nexec "$@"\n')  # `uv run CMD...` runs CMD as its child
    uv.chmod(0o755)
    work = tmp_path / "checkout"
    work.mkdir()
    (work / ".env").write_text("ANTHROPIC_API_KEY=would-travel\n")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_UV_RUN_RUNTIME_ENV"}
    out = subprocess.run(
        [str(uv), "run", sys.executable, "-c", CHILD], cwd=work, env=env, capture_output=True, text=True,
        timeout=120, check=True,
    ).stdout  # fmt: skip
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["working_dir"] == str(work) and "py_executable" in seen["before"]  # what Ray does by default
    assert seen["after"] == {}
