"""Redaction of known secrets, including simple encodings of them (the second line of defence).

The first line is that no candidate can read a secret (the sandbox's mounts, namespaces and environment).
Should a secret reach a text anyway, :class:`Redactor` replaces it, and also these forms of it:

- reversed (``abc`` -> ``cba``);
- separated: any characters other than letters and digits between its letters and digits
  (``s.k.-.1.2.3``, ``s k 1 2 3``, one character per line), in either order;
- base64 (standard or URL-safe, padded or not, at any alignment inside a longer encoded text) of the secret
  or of its reverse;
- hex (either case, with or without separators) of the secret or of its reverse.

How: the text is projected onto its letters and digits, lower-cased, remembering where each came from; every
encoded form of every secret is projected the same way and searched for in it; each hit's span in the
original text (separators included) becomes ``<redacted>``. Secrets shorter than 8 characters, and encoded
forms shorter than 8 letters and digits, are not searched for (they would match ordinary text).
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .env import is_secret_name

REDACTED = "<redacted>"
MIN_SECRET_LENGTH = 8
"""Shorter values are not treated as secrets (too likely to occur by chance, e.g. ``1``)."""

_ALNUM = re.compile(r"[A-Za-z0-9]+")


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of credential-looking environment variables (:func:`fibserve.sandbox.env.is_secret_name`) at
    least :data:`MIN_SECRET_LENGTH` long, longest first."""
    env = os.environ if environ is None else environ
    values = {v.strip() for k, v in env.items() if is_secret_name(k) and len(v.strip()) >= MIN_SECRET_LENGTH}
    return sorted(values, key=len, reverse=True)


def _project(text: str) -> tuple[str, list[int]]:
    """``text``'s letters and digits, lower-cased, and the index in ``text`` of each."""
    chars: list[str] = []
    positions: list[int] = []
    for run in _ALNUM.finditer(text):
        chars.append(run.group().lower())
        positions.extend(range(run.start(), run.end()))
    return "".join(chars), positions


def _base64_cores(data: bytes) -> list[str]:
    """The part of ``data``'s base64 that is the same wherever ``data`` sits in a longer encoded text: for
    each of the three alignments, the encoding without the groups that would mix in neighbouring bytes."""
    cores = []
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + data).decode()
        start = 4 if shift else 0
        end = len(encoded) - (4 if (shift + len(data)) % 3 else 0)
        cores.append(encoded[start:end])
    return cores


def encoded_forms(secret: str) -> set[str]:
    """The projected forms of ``secret`` searched for (see the module docstring)."""
    raw = secret.encode("utf-8")
    forms = [secret]
    for data in (raw, raw[::-1]):
        forms.append(data.hex())
        forms.extend(_base64_cores(data))
    projected = {_project(form)[0] for form in forms}
    return {f for form in projected for f in (form, form[::-1]) if len(f) >= MIN_SECRET_LENGTH}


class Redactor:
    """Replaces ``secrets`` and their encoded forms with ``<redacted>`` (see the module docstring)."""

    def __init__(self, secrets: Iterable[str]):
        self.secrets = sorted({s for s in secrets if len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True)
        self.needles = sorted({f for s in self.secrets for f in encoded_forms(s)}, key=len, reverse=True)

    @classmethod
    def from_environment(
        cls, environ: Mapping[str, str] | None = None, extra: Iterable[str] = ()
    ) -> Redactor:
        """A redactor for the credential-looking variables of ``environ`` (default ``os.environ``) and
        ``extra`` values (a server's ``--token``, say)."""
        return cls([*secret_values(environ), *extra])

    def __call__(self, text: str) -> str:
        """``text`` with every secret and encoded secret replaced."""
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        if not self.needles or not text:
            return text
        projected, positions = _project(text)
        spans = []
        for needle in self.needles:
            start = projected.find(needle)
            while start != -1:
                spans.append((positions[start], positions[start + len(needle) - 1] + 1))
                start = projected.find(needle, start + 1)
        return _replace_spans(text, spans) if spans else text

    def json(self, data: Any) -> Any:
        """A copy of JSON-like ``data`` with every string redacted (keys, numbers and shapes kept, so a model
        validated from ``data`` still validates from the copy)."""
        if isinstance(data, dict):
            return {key: self.json(value) for key, value in data.items()}
        if isinstance(data, list | tuple):
            return [self.json(item) for item in data]
        if isinstance(data, str):
            return self(data)
        return data


def _replace_spans(text: str, spans: list[tuple[int, int]]) -> str:
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    pieces, cursor = [], 0
    for start, end in merged:
        pieces += [text[cursor:start], REDACTED]
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)
