"""Trajectories in mini-swe-agent-1.1 JSON, written with every secret removed.

A trajectory is ``{"info": {...}, "messages": [...], "trajectory_format": "mini-swe-agent-1.1"}`` as
``DefaultAgent.serialize`` makes it, so mini-swe-agent's own inspector (``mini-extra inspector FILE``) reads it.
Nothing a run writes may carry an API key or token. Two defences, both applied to every JSON value
and every text file a run writes:

1. values under secret-looking keys (``api_key``, ``token``, ``authorization``, ``password``...) become
   ``"<redacted>"`` (but not counters such as ``max_tokens`` or ``total_tokens``);
2. any string containing the value of a secret-looking environment variable (``OPENAI_API_KEY``,
   ``ANTHROPIC_API_KEY``, ``FIBSERVE_TOKEN``, ``HF_TOKEN``...), or a simple encoding of it (reversed,
   separated, base64, hex: :class:`fibserve.sandbox.Redactor`), has it replaced by ``<redacted>``.

Files are written atomically (temporary file, then rename), so a crash leaves the previous turn's file intact.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from fibserve.sandbox import REDACTED, Redactor, secret_values

TRAJECTORY_FORMAT = "mini-swe-agent-1.1"
"""The ``trajectory_format`` value of mini-swe-agent 2.x trajectories."""

_SECRET_KEY = re.compile(
    r"(?i)(^|[_\-.])(api[_\-]?key|apikey|access[_\-]?key|secret([_\-]?key)?|password|passwd|token|"
    r"auth|authorization|bearer|credentials?|cookie)$"
)
"""A dict key whose value is a secret: ends in api_key, token, secret, password... (``max_tokens`` does not)."""


@lru_cache(maxsize=8)
def _redactor(secrets: tuple[str, ...]) -> Redactor:
    return Redactor(secrets)


def redact_text(text: str, secrets: list[str] | None = None) -> str:
    """``text`` with every known secret value, and every simple encoding of one, replaced by ``<redacted>``."""
    return _redactor(tuple(secret_values() if secrets is None else secrets))(text)


def redact_strings(data: Any, secrets: list[str] | None = None) -> Any:
    """A copy of JSON-like ``data`` with :func:`redact_text` applied to every string (keys and shapes kept,
    so a model validated from ``data`` still validates from the copy)."""
    return _redactor(tuple(secret_values() if secrets is None else secrets)).json(data)


def scrub(data: Any, secrets: list[str] | None = None) -> Any:
    """A copy of JSON-like ``data`` with secret-keyed values and secret substrings redacted."""
    secrets = secret_values() if secrets is None else secrets
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            if isinstance(key, str) and _SECRET_KEY.search(key) and value not in (None, "", [], {}):
                out[key] = REDACTED
            else:
                out[key] = scrub(value, secrets)
        return out
    if isinstance(data, list | tuple):
        return [scrub(item, secrets) for item in data]
    if isinstance(data, str):
        return redact_text(data, secrets)
    return data


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (secrets redacted) to ``path`` via a temporary file and rename; creates parent folders."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(redact_text(text), encoding="utf-8")
    os.replace(tmp, path)


def write_json(path: Path, data: Any) -> None:
    """Write JSON-like ``data`` scrubbed of secrets, indented, atomically."""
    write_text_atomic(path, json.dumps(scrub(data), indent=2, ensure_ascii=False, default=str) + "\n")


class TrajectoryError(ValueError):
    """A file is not a mini-swe-agent-1.1 trajectory; the message says what is wrong."""


def load_trajectory(path: Path) -> dict[str, Any]:
    """Read a trajectory written by :func:`write_json` (or by mini-swe-agent itself).

    Raises:
        TrajectoryError: unreadable, not JSON, or missing ``messages``/``trajectory_format``.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TrajectoryError(
            f"cannot read trajectory {path}: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        ended = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")  # ran into the end
        cut = " (the file ends before the JSON does: truncated?)" if ended else ""
        raise TrajectoryError(f"trajectory {path} is not JSON: {exc.msg} at line {exc.lineno}{cut}") from None
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise TrajectoryError(f"trajectory {path} has no 'messages' list")
    if data.get("trajectory_format") != TRAJECTORY_FORMAT:
        raise TrajectoryError(
            f"trajectory {path} has format {data.get('trajectory_format')!r}; expected {TRAJECTORY_FORMAT!r}"
        )
    return data
