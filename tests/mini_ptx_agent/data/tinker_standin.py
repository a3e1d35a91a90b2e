"""A local HTTP server standing in for the Tinker API: it answers the SDK's session set-up and records every
request, then refuses the first request that would start work (``create_model``, or any route it does not
know), so a test sees exactly what `ptxbench train` would send and how it reports a refusal."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWERS: dict[str, dict[str, Any]] = {
    "/api/v1/client/config": {},
    "/api/v1/client/dynamic_config": {},
    "/api/v1/create_session": {"type": "create_session", "session_id": "standin-session"},
    "/api/v1/session_heartbeat": {},
    "/api/v1/telemetry": {"status": "accepted"},
}
REFUSAL = {"error": "the stand-in for the Tinker API stops here"}


class TinkerStandIn:
    """Use as a context manager; ``url`` is its base URL, ``requests`` holds ``{method, path, headers, json}``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    parsed = json.loads(body) if body else None
                except ValueError:
                    parsed = None
                outer.requests.append({"method": self.command, "path": self.path.split("?")[0],
                                       "headers": {k.lower(): v for k, v in self.headers.items()}, "json": parsed})  # fmt: skip
                status, answer = (200, ANSWERS[self.path]) if self.path in ANSWERS else (400, REFUSAL)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _answer

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def paths(self) -> list[str]:
        return [r["path"] for r in self.requests]

    def __enter__(self) -> TinkerStandIn:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
