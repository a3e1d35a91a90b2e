"""`--check` judges FIBServe's ``/health`` only once its lanes had time to start, and names an unhealthy lane.

A real FIBServe app (bundled trace set, one ``cpu`` lane) runs under uvicorn on 127.0.0.1 in a thread; only its
lane factory is replaced: one that takes a few seconds (the cold start that made a newcomer's first ``--check``
print ``/health degraded``), or one that always fails.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from mini_ptx_agent.environment import embedded
from mini_ptx_agent.environment.embedded import free_port, unhealthy_lanes, wait_lanes_ready
from mini_ptx_agent.quickstart import check as quickstart_check
from mini_ptx_agent.quickstart.settings import QuickstartSettings

pytestmark = pytest.mark.timeout(180)


class _Resources:
    """Stands in for a lane's Evaluator; nothing is evaluated in these tests."""

    healthy = True


def _never_runs(task, ctx):  # pragma: no cover - no task is submitted
    raise AssertionError("no task is submitted in these tests")


def _serve(tmp_path: Path, factory):
    """Start the real app with ``factory`` in a uvicorn thread; yields its URL."""
    import uvicorn
    from fibserve.serve.app import create_app
    from fibserve.serve.settings import ServeSettings

    settings = ServeSettings(devices=["cpu"], state_dir=tmp_path / "state")
    app = create_app(settings, handler=_never_runs, factory=factory, closer=lambda resources: None)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture
def slow_lane_service(tmp_path):
    def slow(device: str) -> _Resources:
        time.sleep(3.0)
        return _Resources()

    yield from _serve(tmp_path, slow)


@pytest.fixture
def broken_lane_service(tmp_path):
    def broken(device: str) -> _Resources:
        raise RuntimeError("evaluator exploded on purpose")

    yield from _serve(tmp_path, broken)


def _settings(url: str) -> QuickstartSettings:
    return QuickstartSettings(language="cuda", service_url=url, output_root=Path("unused"))


def test_check_waits_for_a_starting_lane_instead_of_failing(slow_lane_service):
    lines = {line.name: line for line in quickstart_check.run_checks(_settings(slow_lane_service))}
    assert lines["service"].ok, lines["service"].detail
    assert "/health ok" in lines["service"].detail


def test_wait_lanes_ready_returns_the_ok_answer_once_the_lane_started(slow_lane_service):
    started = time.monotonic()
    health = wait_lanes_ready(slow_lane_service, 30.0, poll_s=0.1)
    assert health is not None and health["status"] == "ok"
    assert time.monotonic() - started < 30.0


def test_a_lane_that_never_starts_is_named_with_its_reason(broken_lane_service, monkeypatch):
    monkeypatch.setattr(embedded, "LANES_READY_TIMEOUT_S", 2.0)
    lines = {line.name: line for line in quickstart_check.run_checks(_settings(broken_lane_service))}
    detail = lines["service"].detail
    assert not lines["service"].ok
    assert "/health degraded" in detail and "after waiting 2 s" in detail
    assert "cpu: could not start the evaluator on cpu" in detail and "evaluator exploded on purpose" in detail


def test_an_unreachable_service_is_not_waited_on():
    started = time.monotonic()
    assert wait_lanes_ready(f"http://127.0.0.1:{free_port()}", 30.0, poll_s=0.1) is None
    assert time.monotonic() - started < 5.0


def test_a_degraded_service_is_waited_on_only_until_the_bound(broken_lane_service):
    started = time.monotonic()
    health = wait_lanes_ready(broken_lane_service, 1.5, poll_s=0.1)
    assert health is not None and health["status"] == "degraded"
    assert 1.5 <= time.monotonic() - started < 10.0


def test_unhealthy_lanes_lists_each_unhealthy_lane_with_its_detail():
    health = {
        "workers": [
            {"device": "cuda:0", "healthy": True, "detail": None},
            {"device": "cuda:1", "healthy": False, "detail": "starting"},
            {"device": "cuda:2", "healthy": False, "detail": None},
        ]
    }
    assert unhealthy_lanes(health) == ["cuda:1: starting", "cuda:2: unhealthy (no detail given)"]
    assert unhealthy_lanes({"workers": []}) == ["no lanes: the server runs no worker lane"]
