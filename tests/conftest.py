"""How the suite runs, and what that asks of a new test: parallel workers and one build cache per run.

``uv run pytest -m "not gpu"`` (the README's command, and CI's) runs the tests on every core with
pytest-xdist (``-n auto --dist loadgroup`` in pyproject's addopts) and prints the 15 slowest
(``--durations=15``). ``-n 0`` runs them in one process (for ``--pdb`` or ``-s``).

- **One build cache for the whole run.** Before any test starts, ``FIBSERVE_CACHE_DIR`` is pointed at one
  fresh, empty folder, shared by every xdist worker and inherited by every subprocess a test starts (the
  ``fibserve``/``ptxbench`` commands, an embedded or uvicorn FIBServe, the agent). The builder keys a build by
  its sources, flags and toolchain and holds a file lock per key, so each kernel is compiled by nvcc once per
  run, by whichever test needs it first, while any other test that needs it waits and then reuses it. The
  folder starts empty and is removed at the end, so every kernel still really builds in every run, and
  nothing is written to the user's own cache. In a test, get its path from the ``build_cache`` fixture
  (or simply let FIBServe use its default). A test that asserts the cache's own behaviour (a first build
  that is *not* cached) passes its own ``tmp_path`` instead.
- **Tests that must not overlap** with some others share a group:
  ``@pytest.mark.xdist_group("name")`` (or ``pytestmark = pytest.mark.xdist_group("name")`` for a module).
  xdist sends a whole group to one worker, which runs it one test after another; groups and ungrouped
  tests still run beside each other. Keep a group for a real conflict (one machine-wide resource), not for
  slowness.
- **Nothing else is shared.** Each test has its own ``tmp_path``; servers take a free port
  (``serve_helpers.free_port``) and their own state directory; environment changes go through
  ``monkeypatch``. A test that writes anywhere else breaks the parallel run.
- **Expensive work is done once.** A kernel built or a server started for several assertions belongs in a
  module- or session-scoped fixture, or in one test that asserts all of them; two tests that pay for the same
  end-to-end run are one test too many.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

CACHE_VARIABLE = "FIBSERVE_CACHE_DIR"
_OWNER_VARIABLE = "PTXBENCH_TEST_BUILD_CACHE"
"""Set by the process that made the run's cache (the xdist controller, or the only process): workers that
find it use that cache, and only its maker removes it."""
_made_cache = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """Point ``FIBSERVE_CACHE_DIR`` at the run's build cache, made here unless a controller already made it.

    xdist starts its workers after the controller's ``pytest_configure``, with the controller's environment,
    so every worker and every subprocess of a test sees the same folder.
    """
    if os.environ.get(_OWNER_VARIABLE):
        os.environ[CACHE_VARIABLE] = os.environ[_OWNER_VARIABLE]
        return
    cache = tempfile.mkdtemp(prefix="ptxbench-test-builds-")
    os.environ[_OWNER_VARIABLE] = os.environ[CACHE_VARIABLE] = cache
    config.stash[_made_cache] = Path(cache)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the run's build cache (only in the process that made it)."""
    cache = config.stash.get(_made_cache, None)
    if cache is not None:
        shutil.rmtree(cache, ignore_errors=True)
        os.environ.pop(_OWNER_VARIABLE, None)


@pytest.fixture(scope="session")
def build_cache() -> Path:
    """The run's build cache (``FIBSERVE_CACHE_DIR``), shared by every test, worker and subprocess."""
    return Path(os.environ[CACHE_VARIABLE])
