"""`quickstart --check`'s model line: one bounded request that says what the API answers now.

A model endpoint that refuses connections fails in seconds (a run's retries took 66 s). A hosted model's key
is judged by the provider: tests/mini_ptx_agent/models/test_models_litellm.py (a 401 is a FAIL).
"""

from __future__ import annotations

import time

from mini_ptx_agent.environment.embedded import free_port
from mini_ptx_agent.quickstart.check import check_model
from mini_ptx_agent.quickstart.settings import QuickstartSettings


def test_an_endpoint_that_refuses_connections_fails_within_one_bounded_request() -> None:
    settings = QuickstartSettings.resolve(
        model="served-model", model_host=f"127.0.0.1:{free_port()}", environ={}
    )
    started = time.monotonic()
    line = check_model(settings)
    elapsed = time.monotonic() - started
    assert not line.ok and "after 1 attempts" in line.detail, line.detail
    assert elapsed < 15, f"the check took {elapsed:.0f} s"  # one request of at most 10 s
