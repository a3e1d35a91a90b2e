"""`quickstart --check`'s model line: one bounded request that says what the API answers now.

A model endpoint that refuses connections fails in seconds (a run's retries took 66 s), and a hosted model's
key is judged by the provider: a real local HTTP server stands in for Anthropic's API (litellm sends it the
request it would send api.anthropic.com) and answers 401 to a bogus key, or one token to a good one.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from mini_ptx_agent.models import make_model
from mini_ptx_agent.quickstart.check import check_hosted_model, check_model
from mini_ptx_agent.quickstart.settings import QuickstartSettings
from mini_ptx_agent.service import free_port

HOSTED = "anthropic/claude-sonnet-4-5"
GOOD_KEY = "sk-ant-test-good-0123456789"
REFUSED = {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
ONE_TOKEN = {
    "id": "msg_test", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "OK"}], "stop_reason": "max_tokens", "stop_sequence": None,
    "usage": {"input_tokens": 5, "output_tokens": 1},
}  # fmt: skip


@pytest.fixture
def anthropic_api() -> Iterator[tuple[str, list[str]]]:
    """A stand-in for Anthropic's messages API: 401 unless the key is GOOD_KEY. Yields (base URL, paths asked)."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            asked.append(self.path)
            good = self.headers.get("x-api-key") == GOOD_KEY
            body = json.dumps(ONE_TOKEN if good else REFUSED).encode()
            self.send_response(200 if good else 401)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def test_a_bogus_key_is_a_fail_that_quotes_the_provider(
    anthropic_api, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, asked = anthropic_api
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-bogus-0000000000")
    line = check_hosted_model(make_model(HOSTED, api_base=url))
    assert not line.ok and asked == ["/v1/messages"]  # one request, not "a key variable is present"
    assert "refused the API key (HTTP 401)" in line.detail and "invalid x-api-key" in line.detail
    assert "sk-ant-bogus" not in line.detail

    monkeypatch.setenv("ANTHROPIC_API_KEY", GOOD_KEY)
    line = check_hosted_model(make_model(HOSTED, api_base=url))
    assert line.ok and "answered a 1-token request (key accepted)" in line.detail, line.detail


def test_an_endpoint_that_refuses_connections_fails_within_one_bounded_request() -> None:
    settings = QuickstartSettings.resolve(
        model="served-model", model_host=f"127.0.0.1:{free_port()}", environ={}
    )
    started = time.monotonic()
    line = check_model(settings)
    elapsed = time.monotonic() - started
    assert not line.ok and "after 1 attempts" in line.detail, line.detail
    assert elapsed < 15, f"the check took {elapsed:.0f} s"  # one request of at most 10 s
