"""Fixtures of the model tests: a scripted OpenAI-compatible server, a fast retry policy, a clean environment."""

from __future__ import annotations

import pytest
from scripted_openai import start_server


@pytest.fixture
def scripted_server():
    """Start the server on a free port; yields its ``ScriptedServer`` state (``.url``, ``.script(...)``)."""
    state, server = start_server()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def fast_retry():
    """A retry policy with millisecond backoffs and 3 attempts."""
    from mini_ptx_agent.models.config import RetryPolicy

    return RetryPolicy(max_attempts=3, initial_backoff_s=0.01, max_backoff_s=0.05, request_timeout_s=10)


@pytest.fixture(autouse=True)
def _clean_model_env(monkeypatch):
    """Tests start without the run's model variables."""
    for name in ("MODEL_NAME", "ACCRL_MODEL_HOST", "ACCRL_MODEL_API_KEY"):
        monkeypatch.delenv(name, raising=False)
