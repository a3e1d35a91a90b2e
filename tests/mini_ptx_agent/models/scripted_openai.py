"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 (real sockets, real HTTP) for the model tests.

A uniquely named module (not conftest) so that test modules can import its helpers unambiguously.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def completion(
    content: str, *, model: str = "served-model", prompt_tokens: int = 11, completion_tokens: int = 7
) -> dict:
    """A chat-completions response body."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }  # fmt: skip


@dataclass
class ScriptedServer:
    """State shared with the handler: served ids, queued replies, and every request received."""

    served_ids: list[str] = field(default_factory=lambda: ["served-model"])
    replies: deque = field(default_factory=deque)
    default_reply: tuple[int, Any] | None = None
    requests: list[dict] = field(default_factory=list)
    url: str = ""

    @property
    def host(self) -> str:
        return self.url.removeprefix("http://")

    def script(self, *replies: tuple[int, Any]) -> None:
        self.replies.extend(replies)

    def chat_requests(self) -> list[dict]:
        return [r for r in self.requests if r["path"].endswith("/chat/completions")]


def _handler(state: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def _send(self, status: int, body: Any) -> None:
            data = (body if isinstance(body, str) else json.dumps(body)).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            state.requests.append(
                {
                    "method": "GET",
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                }
            )
            if self.path.rstrip("/").endswith("/v1/models"):
                self._send(
                    200, {"object": "list", "data": [{"id": i, "object": "model"} for i in state.served_ids]}
                )
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            state.requests.append(
                {
                    "method": "POST",
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "json": body,
                }
            )
            if not self.path.endswith("/chat/completions"):
                self._send(404, {"error": "not found"})
                return
            if state.replies:
                status, reply = state.replies.popleft()
            elif state.default_reply is not None:
                status, reply = state.default_reply
            else:
                status, reply = 500, {"error": "no scripted reply left"}
            if reply == "ECHO_AUTH":  # a misbehaving server that echoes the bearer token in its error
                reply = {"error": f"bad request from {self.headers.get('Authorization')}"}
            self._send(status, reply)

    return Handler


def start_server() -> tuple[ScriptedServer, ThreadingHTTPServer]:
    """Start a server on a free port in a daemon thread; returns its state and the server (call shutdown())."""
    state = ScriptedServer()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    return state, server
