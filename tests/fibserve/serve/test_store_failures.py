"""A task store that refuses writes (a full disk) degrades the server instead of killing its lane for good.

The failure is real: the server's RLIMIT_FSIZE is lowered to 0 from outside (``prlimit``, same user, no root),
so every write(2) of the server process to a regular file fails with EFBIG, as writes to a full disk fail with
ENOSPC; SQLite's own error handling is what the lane sees. Before the fix, the lane thread died on the first
refused write (``/health``: "lane thread stopped"), the running task stayed ``running`` and later tasks
``pending`` until a restart.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

import pytest
from fibserve.client import APIError, FIBServeClient
from fibserve.trace import EvaluationStatus
from serve_helpers import VECTOR_ADD_SMALL
from test_serve_tasks import python_add, slow_python_add

pytestmark = pytest.mark.slow


def _until(predicate, what: str, timeout_s: float = 120.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_store_refusing_writes_degrades_health_and_the_lane_serves_again_afterwards(
    start_server, tmp_path: Path
) -> None:
    cache = tmp_path / "build-cache"
    server = start_server("--devices", "cpu", env={"FIBSERVE_CACHE_DIR": str(cache)})
    pid = server.proc.pid
    unlimited = resource.prlimit(pid, resource.RLIMIT_FSIZE)
    with FIBServeClient(server.url) as client:
        first = client.submit(
            "evaluate", slow_python_add("during"), workload_uuids=[VECTOR_ADD_SMALL]
        ).task_id
        # the candidate is built (written to the cache) before its 5 s import starts in the worker
        _until(lambda: list(cache.glob("builds/*/result.json")), "the candidate's build")
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (0, unlimited[1]))
        try:
            health = _until(
                lambda: (h := client.health()).status == "degraded" and h, "/health to say degraded"
            )
            (lane,) = health.workers
            assert not lane.healthy and "task store refused to record task " + first in (lane.detail or "")
            assert client.task(first).status == "running"  # its outcome waits in memory
            with pytest.raises(APIError) as refused:
                client.submit("evaluate", python_add("refused"), workload_uuids=[VECTOR_ADD_SMALL])
            assert refused.value.status_code == 503 and refused.value.code == "store_unavailable"
        finally:
            resource.prlimit(pid, resource.RLIMIT_FSIZE, unlimited)  # space is free again
        answer = client.wait(first, timeout=120)
        later = client.evaluate(python_add("after"), [VECTOR_ADD_SMALL], wait_timeout=240)
        health = client.health()
    assert answer.status in ("completed", "failed")  # recorded once the store took writes again
    assert later.status == "completed" and later.traces[0].evaluation.status is EvaluationStatus.PASSED
    assert health.status == "ok" and health.workers[0].healthy
