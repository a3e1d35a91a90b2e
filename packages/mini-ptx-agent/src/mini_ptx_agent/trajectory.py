"""Trajectories in mini-swe-agent-1.1 JSON, written with every secret removed.

A trajectory is ``{"info": {...}, "messages": [...], "trajectory_format": "mini-swe-agent-1.1"}`` as
``DefaultAgent.serialize`` makes it, so mini-swe-agent's own inspector (``mini-extra inspector FILE``) reads it.
Nothing a run writes may carry an API key or token. Two defences, both applied to every JSON value
and every text file a run writes:

1. values under secret-looking keys (``api_key``, ``token``, ``authorization``, ``password``...) become
   ``"<redacted>"`` (but not counters such as ``max_tokens`` or ``total_tokens``);
2. any string equal to or containing the value of a secret-looking environment variable (``OPENAI_API_KEY``,
   ``ANTHROPIC_API_KEY``, ``FIBSERVE_TOKEN``, ``HF_TOKEN``...) has that value replaced by ``<redacted>``.

Files are written atomically (temporary file, then rename), so a crash leaves the previous turn's file intact.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

TRAJECTORY_FORMAT = "mini-swe-agent-1.1"
"""The ``trajectory_format`` value of mini-swe-agent 2.x trajectories."""

REDACTED = "<redacted>"

_SECRET_KEY = re.compile(
    r"(?i)(^|[_\-.])(api[_\-]?key|apikey|access[_\-]?key|secret([_\-]?key)?|password|passwd|token|"
    r"auth|authorization|bearer|credentials?|cookie)$"
)
"""A dict key whose value is a secret: ends in api_key, token, secret, password... (``max_tokens`` does not)."""

_SECRET_ENV = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)($|_)")
"""Environment variable names that hold secrets (``OPENAI_API_KEY``, ``FIBSERVE_TOKEN``, ``HF_TOKEN``)."""

MIN_SECRET_LENGTH = 8
"""Shorter environment values are not treated as secrets (too likely to occur by chance, e.g. ``1``)."""


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking environment variables, longest first (so overlapping values redact fully)."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if _SECRET_ENV.search(k) and len(v.strip()) >= MIN_SECRET_LENGTH}
    return sorted(values, key=len, reverse=True)


def redact_text(text: str, secrets: list[str] | None = None) -> str:
    """``text`` with every known secret value replaced by ``<redacted>``."""
    for value in secret_values() if secrets is None else secrets:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


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
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise TrajectoryError(f"cannot read trajectory {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise TrajectoryError(f"trajectory {path} is not JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise TrajectoryError(f"trajectory {path} has no 'messages' list")
    if data.get("trajectory_format") != TRAJECTORY_FORMAT:
        raise TrajectoryError(
            f"trajectory {path} has format {data.get('trajectory_format')!r}; expected {TRAJECTORY_FORMAT!r}"
        )
    return data
