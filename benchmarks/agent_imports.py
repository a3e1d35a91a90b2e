"""Start-up and per-call costs of the agent's prompt and model layers.

Measures, each in fresh interpreters (median of ``--repeat`` runs):
  * ``ptxbench --help`` wall time (target < 1 s),
  * ``import mini_ptx_agent.models`` and ``import mini_ptx_agent.prompts`` (target: no litellm, well under 1 s),
  * ``compose_system_prompt`` for every tag (first call, uncached),
  * ``import litellm`` with the local price table, for contrast (``--with-litellm``; about 10 s),
  * the model layer's per-query overhead against a local OpenAI-compatible server on 127.0.0.1.

Usage: ``uv run python benchmarks/agent_imports.py [--repeat 5] [--with-litellm] [--out benchmarks/agent_imports.md]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

BIN = Path(sys.executable).parent


def _time_process(cmd: list[str], repeat: int, env: dict[str, str] | None = None) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env, timeout=300)
        times.append(time.perf_counter() - started)
    return times


def _time_import(module: str, repeat: int) -> tuple[list[float], list[str]]:
    code = (
        "import sys, time, json\n"
        f"t = time.perf_counter(); import {module}; dt = time.perf_counter() - t\n"
        "heavy = [m for m in ('litellm', 'torch', 'minisweagent', 'openai', 'httpx') if m in sys.modules]\n"
        "print(json.dumps([dt, heavy]))\n"
    )
    times, heavy = [], []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=300
        )
        dt, heavy = json.loads(out.stdout.strip().splitlines()[-1])
        times.append(dt)
    return times, heavy


def _compose_times() -> dict[str, float]:
    code = (
        "import json, time\n"
        "from mini_ptx_agent.prompts import compose_system_prompt, list_prompt_tags\n"
        "out = {}\n"
        "for tag in list_prompt_tags():\n"
        "    t = time.perf_counter(); text = compose_system_prompt(tag); out[tag] = [time.perf_counter() - t, len(text)]\n"
        "print(json.dumps(out))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=300
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _query_overhead(n: int) -> list[float]:
    body = json.dumps({
        "model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "```cuda\n//k\n```"},
                                    "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 30000, "completion_tokens": 4000},
    }).encode()  # fmt: skip

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _reply(self, data: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._reply(json.dumps({"data": [{"id": "m"}]}).encode())

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._reply(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        from mini_ptx_agent.models import make_model

        model = make_model("m", model_host=f"127.0.0.1:{server.server_address[1]}")
        # A realistic conversation: system prompt + 10 turns of ~8 KB kernels and feedback.
        messages = [{"role": "system", "content": "x" * 36000}] + [
            {"role": "user" if i % 2 else "assistant", "content": "y" * 8000, "extra": {"big": "z" * 1000}}
            for i in range(20)
        ]
        times = []
        for _ in range(n):
            started = time.perf_counter()
            model.query(messages)
            times.append(time.perf_counter() - started)
        return times
    finally:
        server.shutdown()


def _fmt(times: list[float]) -> str:
    ms = [t * 1000 for t in times]
    return f"{statistics.median(ms):.0f} ms (min {min(ms):.0f}, max {max(ms):.0f}, n={len(ms)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--with-litellm", action="store_true")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_suffix(".md"))
    args = parser.parse_args()

    rows: list[tuple[str, str, str]] = []
    baseline = _time_process([sys.executable, "-c", "pass"], args.repeat)
    rows.append(("python -c pass (interpreter start)", _fmt(baseline), ""))
    help_times = _time_process([str(BIN / "ptxbench"), "--help"], args.repeat)
    rows.append(
        (
            "ptxbench --help",
            _fmt(help_times),
            "target < 1 s: " + ("OK" if statistics.median(help_times) < 1 else "MISSED"),
        )
    )
    for module in ("mini_ptx_agent.prompts", "mini_ptx_agent.models"):
        times, heavy = _time_import(module, args.repeat)
        rows.append((f"import {module}", _fmt(times), f"heavy modules loaded: {heavy or 'none'}"))
    for tag, (dt, size) in _compose_times().items():
        rows.append(
            (f"compose_system_prompt({tag!r}) first call", f"{dt * 1000:.1f} ms", f"{size} characters")
        )
    overhead = _query_overhead(30)
    rows.append(("OpenAIEndpointModel.query on 127.0.0.1 (~200 KB conversation)", _fmt(overhead),
                 "model-layer overhead per turn; target < 100 ms"))  # fmt: skip
    if args.with_litellm:
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        lt = _time_process([sys.executable, "-c", "import litellm"], 1, env=env)
        rows.append(
            ("import litellm (local price table)", _fmt(lt), "why litellm is imported only where used")
        )

    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    lines = [
        "# Agent start-up and model-layer overhead",
        "",
        f"Measured by `uv run python benchmarks/agent_imports.py{' --with-litellm' if args.with_litellm else ''}` on "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, load average "
        f"{load[0]:.1f} at the end (other jobs running on the machine inflate wall times).",
        "",
        "| what | wall time (median) | note |",
        "| --- | --- | --- |",
        *[f"| {a} | {b} | {c} |" for a, b, c in rows],
        "",
        "Reading: `ptxbench --help` imports none of the prompt or model modules (typer and rich dominate), and",
        "importing `mini_ptx_agent.models` loads neither litellm nor httpx; both are imported when a model is",
        "built. Wall times scale with machine load: compare against the interpreter start-up in the first row.",
        "",
    ]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
