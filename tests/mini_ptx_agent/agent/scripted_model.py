"""A scripted OpenAI-compatible model endpoint: a real HTTP server on 127.0.0.1 with prepared replies.

It answers ``GET /v1/models`` with one served id and ``POST /v1/chat/completions`` with the next prepared
reply, and records every request body. ``down_after=N`` makes the server close its socket after N chat
completions, as a model host that dies mid-run does (the next request gets "connection refused").
``never_answer=True`` makes it accept every chat completion and never answer it (a hung model host); the
request is still recorded. ``hang_after=N`` answers N chat completions and then hangs like that. ``sizes`` holds the byte size of each chat-completion request body.

``respond`` serves several model ids at once: it maps each id to a function of the request body that writes the
reply (so concurrent trajectories of different models and definitions each get theirs), and ``GET /v1/models``
lists its ids; ``model_id`` and ``replies`` are then not used. ``answered`` holds ``(model, body)`` per reply sent.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedOpenAIServer:
    """Use as a context manager; ``host_port`` is ``127.0.0.1:PORT`` (the form of ``ACCRL_MODEL_HOST``)."""

    def __init__(
        self,
        model_id: str = "",
        replies: list[str] | None = None,
        *,
        down_after: int | None = None,
        never_answer: bool = False,
        hang_after: int | None = None,
        respond: Mapping[str, Callable[[dict[str, Any]], str]] | None = None,
    ):
        self.model_id = model_id
        self.respond = dict(respond or {})
        self.answered: list[tuple[str, dict[str, Any]]] = []
        self.replies = list(replies or [])
        self.down_after = down_after
        self.never_answer = never_answer
        self.hang_after = hang_after
        self._released = threading.Event()
        self.requests: list[dict[str, Any]] = []
        self.sizes: list[int] = []
        self.headers: list[dict[str, str]] = []
        self._served = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._down = False

    @property
    def host_port(self) -> str:
        return f"127.0.0.1:{self._server.server_address[1]}"

    @property
    def url(self) -> str:
        return f"http://{self.host_port}/v1"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/v1/models"):
                    self._send(
                        200,
                        {
                            "object": "list",
                            "data": [
                                {"id": name, "object": "model", "owned_by": "test"}
                                for name in (list(outer.respond) or [outer.model_id])
                            ],
                        },
                    )
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                with outer._lock:
                    outer.requests.append(body)
                    outer.sizes.append(length)
                    outer.headers.append(dict(self.headers))
                if outer.never_answer or (outer.hang_after is not None and outer._served >= outer.hang_after):
                    outer._released.wait()  # holds the connection open until the server stops
                    return
                model = str(body.get("model", outer.model_id))
                with outer._lock:
                    if outer.respond:
                        content = outer.respond[model](body) if model in outer.respond else None
                    else:
                        content = outer.replies.pop(0) if outer.replies else None
                    if content is None:
                        self._send(500, {"error": {"message": f"scripted server has no reply for {model}"}})
                        return
                    outer._served += 1
                    served = outer._served
                    outer.answered.append((model, body))
                prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{served}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": model if outer.respond else outer.model_id,
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": prompt,
                            "completion_tokens": len(content) // 4,
                            "total_tokens": prompt + len(content) // 4,
                        },
                    },
                )
                if outer.down_after is not None and served >= outer.down_after:
                    threading.Thread(target=outer.stop, daemon=True).start()

        return Handler

    def start(self) -> ScriptedOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._released.set()
        if not self._down:
            self._down = True
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
