"""Redaction catches a known secret and its simple encodings (the second line of defence behind the sandbox)."""

from __future__ import annotations

import base64

import pytest
from fibserve.sandbox import REDACTED, Redactor, secret_values

KEY = "sk-proj-Qx7vB2mN9pLr4TwZ8kHc"


def _encodings(secret: str) -> dict[str, str]:
    raw = secret.encode()
    return {
        "plain": secret,
        "reversed": secret[::-1],
        "dot-separated": ".".join(secret),
        "reversed and dot-separated": ".".join(secret[::-1]),
        "one character per line": "\n".join(secret),
        "spaced upper hex": " ".join(f"{b:02X}" for b in raw),
        "hex": raw.hex(),
        "hex of the reverse": raw[::-1].hex(),
        "base64": base64.b64encode(raw).decode(),
        "urlsafe base64, unpadded": base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "base64 of the reverse": base64.b64encode(raw[::-1]).decode(),
        "base64 inside a longer encoded text": base64.b64encode(b"key=" + raw + b";").decode(),
    }


@pytest.mark.parametrize("form", list(_encodings(KEY)))
def test_each_encoding_is_redacted(form: str) -> None:
    encoded = _encodings(KEY)[form]
    text = f"RuntimeError: found {encoded} in /proc/1/environ"
    redacted = Redactor([KEY])(text)
    assert encoded not in redacted and REDACTED in redacted
    assert redacted.startswith("RuntimeError: found ") and redacted.endswith(" in /proc/1/environ")


def test_ordinary_text_is_left_alone() -> None:
    text = "max_relative_error 0.0013 at [3, 7]; speedup 1.02x; sk-proj-other-key-value"
    assert Redactor([KEY])(text) == text


def test_short_values_are_not_secrets() -> None:
    assert secret_values({"OPENAI_API_KEY": KEY, "SHORT_TOKEN": "abc", "PATH": "/usr/bin"}) == [KEY]
    assert Redactor(["abc"])("abc abc") == "abc abc"
