"""No API key or token ever appears in a model's serialized config, repr, template vars, messages, errors or logs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from mini_ptx_agent.models import ModelRequestError, make_model
from mini_ptx_agent.models.base import redact
from scripted_openai import completion

FAKE = "sk-FAKE-secret-9f8e7d6c5b4a39281706"
KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ACCRL_MODEL_API_KEY", "HF_TOKEN")


@pytest.fixture
def fake_keys(monkeypatch) -> str:
    for name in KEY_VARS:
        monkeypatch.setenv(name, FAKE)
    return FAKE


def _build(kind: str, server, retry, tmp_path: Path):
    if kind == "endpoint":
        return make_model("served-model", model_host=server.host, retry=retry)
    if kind == "litellm":
        return make_model("openai/tiny-unpriced-model", api_base=server.url + "/v1", retry=retry)
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1.1",
                                "messages": [{"role": "assistant", "content": "x"}]}))  # fmt: skip
    return make_model(f"replay:{path}")


@pytest.mark.parametrize("kind", ["endpoint", pytest.param("litellm", marks=pytest.mark.slow), "replay"])
def test_no_secret_in_anything_a_model_exposes(
    kind, fake_keys, scripted_server, fast_retry, tmp_path, caplog
):
    caplog.set_level(logging.DEBUG, logger="mini_ptx_agent")
    scripted_server.script((500, {"error": "retry me"}), (200, completion("ok", model="tiny-unpriced-model")))
    model = _build(kind, scripted_server, fast_retry, tmp_path)
    message = model.query([{"role": "user", "content": "hi"}])
    exposed = [
        json.dumps(model.serialize()),
        repr(model),
        json.dumps(model.get_template_vars(), default=str),
        json.dumps(message, default=str),
        caplog.text,
    ]
    for text in exposed:
        assert fake_keys not in text
    if kind == "endpoint":  # the key was used: the bearer token went to the server, and only there
        assert scripted_server.requests[-1]["headers"]["authorization"] == f"Bearer {fake_keys}"


def test_error_messages_are_redacted(fake_keys, scripted_server, fast_retry) -> None:
    scripted_server.script((400, "ECHO_AUTH"))
    model = make_model("served-model", model_host=scripted_server.host, retry=fast_retry)
    with pytest.raises(ModelRequestError) as info:
        model.query([{"role": "user", "content": "hi"}])
    assert fake_keys not in str(info.value) and "Bearer ***" in str(info.value)


def test_redact_replaces_credential_values_only(fake_keys, monkeypatch) -> None:
    monkeypatch.setenv("PATH_LIKE_THING", "not-a-secret-value")
    assert redact(f"a {fake_keys} b not-a-secret-value") == "a *** b not-a-secret-value"
