"""The suite's own mechanisms (tests/conftest.py): the run-wide build cache and the ``exclusive`` lock."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TRY_LOCK = """
import sys
from filelock import FileLock, Timeout
try:
    FileLock(sys.argv[1]).acquire(timeout=0)
except Timeout:
    sys.exit(3)
"""


def test_the_build_cache_is_the_runs_and_subprocesses_inherit_it(build_cache: Path) -> None:
    assert os.environ["FIBSERVE_CACHE_DIR"] == str(build_cache) and build_cache.is_dir()
    assert Path.home() not in build_cache.parents  # never the user's own ~/.cache/fibserve
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ['FIBSERVE_CACHE_DIR'])"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert child.stdout.strip() == str(build_cache)


@pytest.mark.exclusive("suite-self-test")
def test_an_exclusive_test_holds_its_lock_against_every_other_process(build_cache: Path) -> None:
    lock = build_cache.parent / "exclusive-suite-self-test.lock"
    other = subprocess.run([sys.executable, "-c", TRY_LOCK, str(lock)], timeout=60)
    assert other.returncode == 3, "another worker could take the lock while this test held it"
