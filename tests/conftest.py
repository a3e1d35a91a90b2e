"""How the suite runs, and what that asks of a new test: parallel workers and one build cache per run.

``uv run pytest -m "not gpu"`` (the README's command, and CI's) runs the tests on every core with
pytest-xdist (``-n auto --dist loadfile`` in pyproject's addopts; files with a ``slow`` test start first, see
:func:`pytest_collection_modifyitems`) and prints the 15 slowest
(``--durations=15``). ``-n 0`` runs them in one process (for ``--pdb`` or ``-s``).

- **A test file runs on one worker**, top to bottom, as it would alone; files run beside each other. So a
  module- or session-scoped fixture (an Evaluator, a server, a quickstart run) is made once, not once per
  worker, and an expensive fixture belongs at module scope.
- **One build cache for the whole run.** Before any test starts, ``FIBSERVE_CACHE_DIR`` is pointed at one
  fresh, empty folder, shared by every xdist worker and inherited by every subprocess a test starts (the
  ``fibserve``/``ptxbench`` commands, an embedded or uvicorn FIBServe, the agent). The builder keys a build by
  its sources, flags and toolchain and holds a file lock per key, so each kernel is compiled by nvcc once per
  run, by whichever test needs it first, while any other test that needs it waits and then reuses it. The
  folder starts empty and is removed at the end, so every kernel still really builds in every run, and
  nothing is written to the user's own cache. In a test, get its path from the ``build_cache`` fixture
  (or simply let FIBServe use its default). A test that asserts the cache's own behaviour (a first build
  that is *not* cached) passes its own ``tmp_path`` instead.
- **A test that must not overlap with certain others** (it needs a machine-wide resource to itself) is
  marked ``@pytest.mark.exclusive("name")``: it holds a run-wide file lock of that name from its setup to its
  teardown (module-scoped fixtures are made outside it), so tests that name the same lock, in any file and on
  any worker, run one at a time. Use it for a real
  conflict, not for slowness.
- **Nothing else is shared.** Each test has its own ``tmp_path``; servers take a free port
  (``serve_helpers.free_port``) and their own state directory; environment changes go through
  ``monkeypatch``. A test that writes anywhere else breaks the parallel run.
- **Expensive work is done once.** Two tests that pay for the same end-to-end run (the same nvcc build, the
  same agent run) are one test too many: share a fixture or assert both in one test.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock

CACHE_VARIABLE = "FIBSERVE_CACHE_DIR"
_RUN_VARIABLE = "PTXBENCH_TEST_RUN_DIR"
"""Set by the process that made the run's folder (the xdist controller, or the only process): workers that
find it use that folder, and only its maker removes it. It holds ``builds/`` (the cache) and the locks."""
_made_run_dir = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """Point ``FIBSERVE_CACHE_DIR`` at the run's build cache, made here unless a controller already made it.

    xdist starts its workers after the controller's ``pytest_configure``, with the controller's environment,
    so every worker and every subprocess of a test sees the same folder.
    """
    config.addinivalue_line(
        "markers", "exclusive(name): runs while holding the run-wide lock `name` (see tests/conftest.py)"
    )
    if not os.environ.get(_RUN_VARIABLE):
        run_dir = Path(tempfile.mkdtemp(prefix="ptxbench-test-run-"))
        os.environ[_RUN_VARIABLE] = str(run_dir)
        config.stash[_made_run_dir] = run_dir
    os.environ[CACHE_VARIABLE] = str(Path(os.environ[_RUN_VARIABLE]) / "builds")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files holding a ``slow`` test first, the rest after, each group in collection order.

    With ``--dist loadfile --no-loadscope-reorder`` (pyproject's addopts) xdist hands files to workers in this
    order, so the long end-to-end files start early and the many short ones fill the end: the run does not
    wait at its end for one worker's last long file (xdist's own reorder, most tests first, put the long
    files with few tests last). The order is the same on every worker, as xdist requires."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: collection order within each group


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the run's folder (only in the process that made it)."""
    run_dir = config.stash.get(_made_run_dir, None)
    if run_dir is not None:
        shutil.rmtree(run_dir, ignore_errors=True)
        os.environ.pop(_RUN_VARIABLE, None)


@pytest.fixture(autouse=True)
def _exclusive(request: pytest.FixtureRequest) -> Iterator[None]:
    """Hold the run-wide lock of each ``exclusive(name)`` mark for the test's duration (setup to teardown)."""
    names = sorted({str(mark.args[0]) for mark in request.node.iter_markers("exclusive")})
    locks = [FileLock(Path(os.environ[_RUN_VARIABLE]) / f"exclusive-{name}.lock") for name in names]
    for lock in locks:  # sorted, so two tests never take the same locks in opposite orders
        lock.acquire()
    try:
        yield
    finally:
        for lock in reversed(locks):
            lock.release()


@pytest.fixture(scope="session")
def build_cache() -> Path:
    """The run's build cache (``FIBSERVE_CACHE_DIR``), shared by every test, worker and subprocess."""
    path = Path(os.environ[CACHE_VARIABLE])
    path.mkdir(parents=True, exist_ok=True)
    return path
