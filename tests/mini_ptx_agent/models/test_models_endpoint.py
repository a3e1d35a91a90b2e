"""OpenAI-compatible endpoint model against a real scripted HTTP server on 127.0.0.1."""

from __future__ import annotations

import socket
import time

import pytest
from mini_ptx_agent.models import (
    ModelConfigError,
    ModelRequestError,
    ModelUnavailableError,
    OpenAIEndpointModel,
    make_model,
)
from mini_ptx_agent.models.endpoint import normalise_base_url
from scripted_openai import completion

MESSAGES = [
    {"role": "system", "content": "You write kernels."},
    {"role": "user", "content": "Write a GEMM.", "extra": {"note": "not sent"}},
]


def test_query_returns_a_mini_swe_agent_message(scripted_server, fast_retry) -> None:
    scripted_server.script((200, completion("```cuda\n// kernel\n```")))
    model = make_model("served-model", model_host=scripted_server.host, retry=fast_retry)
    message = model.query([*MESSAGES, {"role": "exit", "content": "x"}])
    assert message["role"] == "assistant" and message["content"] == "```cuda\n// kernel\n```"
    extra = message["extra"]
    assert extra["actions"] == [] and extra["attempts"] == 1
    assert extra["usage"] == {"prompt_tokens": 11, "completion_tokens": 7}
    assert extra["cost_usd"] is None and extra["cost"] == 0.0  # unpriced endpoint: unknown, not a crash
    sent = scripted_server.chat_requests()[0]["json"]
    assert sent["messages"] == [{"role": m["role"], "content": m["content"]} for m in MESSAGES]
    assert sent["model"] == "served-model"
    assert model.usage.n_calls == 1 and model.usage.prompt_tokens == 11 and model.usage.cost_usd is None


def test_family_sampling_settings_are_sent(scripted_server, fast_retry) -> None:
    scripted_server.served_ids = ["Qwen/Qwen3-Coder-30B-A3B-Instruct"]
    scripted_server.script((200, completion("ok")), (200, completion("ok")))
    model = make_model("Qwen/Qwen3-Coder-30B-A3B-Instruct", model_host=scripted_server.url, retry=fast_retry)
    model.query(MESSAGES)
    sent = scripted_server.chat_requests()[0]["json"]
    assert (sent["temperature"], sent["top_p"], sent["top_k"]) == (0.7, 0.8, 20)
    assert model.config.family == "qwen3-coder"
    override = make_model(
        "Qwen/Qwen3-Coder-30B-A3B-Instruct", model_host=scripted_server.url, retry=fast_retry,
        sampling={"temperature": 0.0, "max_tokens": 123},
    )  # fmt: skip
    override.query(MESSAGES)
    sent = scripted_server.chat_requests()[1]["json"]
    assert (sent["temperature"], sent["max_tokens"], sent["top_p"]) == (0.0, 123, 0.8)


def test_environment_variables_select_the_endpoint(scripted_server, fast_retry, monkeypatch) -> None:
    monkeypatch.setenv("ACCRL_MODEL_HOST", scripted_server.host)
    monkeypatch.setenv("MODEL_NAME", "served-model")
    model = make_model(None, retry=fast_retry)
    assert isinstance(model, OpenAIEndpointModel)
    assert model.config.base_url == scripted_server.url


def test_a_500_then_success_is_retried(scripted_server, fast_retry) -> None:
    scripted_server.script((500, {"error": "boom"}), (200, completion("second time lucky")))
    model = make_model("served-model", model_host=scripted_server.host, retry=fast_retry)
    message = model.query(MESSAGES)
    assert message["content"] == "second time lucky"
    assert message["extra"]["attempts"] == 2 and model.usage.retries == 1
    assert len(scripted_server.chat_requests()) == 2


def test_persistent_503_is_an_infrastructure_error_after_bounded_retries(scripted_server, fast_retry) -> None:
    scripted_server.default_reply = (503, {"error": "overloaded"})
    model = make_model("served-model", model_host=scripted_server.host, retry=fast_retry)
    started = time.perf_counter()
    with pytest.raises(ModelUnavailableError, match=r"after 3 attempts: HTTP 503"):
        model.query(MESSAGES)
    assert time.perf_counter() - started < 5
    assert len(scripted_server.chat_requests()) == 3


def test_a_400_is_not_retried(scripted_server, fast_retry) -> None:
    scripted_server.script((400, {"error": "context length exceeded"}))
    model = make_model("served-model", model_host=scripted_server.host, retry=fast_retry)
    with pytest.raises(ModelRequestError, match=r"HTTP 400.*context length"):
        model.query(MESSAGES)
    assert len(scripted_server.chat_requests()) == 1


def test_served_id_mismatch_names_the_served_ids(scripted_server, fast_retry) -> None:
    scripted_server.served_ids = ["Qwen/Qwen3-8B", "other-model"]
    with pytest.raises(
        ModelConfigError, match=r"MODEL_NAME='served-model'.*\['Qwen/Qwen3-8B', 'other-model'\]"
    ):
        make_model("served-model", model_host=scripted_server.host, retry=fast_retry)
    assert not scripted_server.chat_requests()


def test_endpoint_down_at_start_is_unavailable(fast_retry) -> None:
    with socket.socket() as sock:  # a port with nobody listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ModelUnavailableError, match="ConnectError"):
        make_model("served-model", model_host=f"127.0.0.1:{port}", retry=fast_retry)


def test_host_without_name_is_a_config_error(scripted_server) -> None:
    with pytest.raises(ModelConfigError, match="MODEL_NAME is not"):
        make_model(None, model_host=scripted_server.host)


def test_configured_price_gives_a_cost(scripted_server, fast_retry) -> None:
    scripted_server.script((200, completion("ok", prompt_tokens=1_000_000, completion_tokens=500_000)))
    config = {
        "families": [{"name": "priced", "match": ["served-*"],
                      "pricing": {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 4.0}}],
    }  # fmt: skip
    model = make_model("served-model", model_host=scripted_server.host, config=config, retry=fast_retry)
    extra = model.query(MESSAGES)["extra"]
    assert extra["cost_usd"] == pytest.approx(3.0) and extra["cost"] == pytest.approx(3.0)
    assert model.usage.cost_usd == pytest.approx(3.0)


@pytest.mark.parametrize(
    ("host", "url"),
    [("10.0.0.5:8000", "http://10.0.0.5:8000"), ("http://h:1/v1/", "http://h:1"), ("https://h", "https://h")],
)
def test_host_normalisation(host: str, url: str) -> None:
    assert normalise_base_url(host) == url


def test_the_reply_text_is_kept_once_not_again_in_the_raw_response(scripted_server, fast_retry) -> None:
    from mini_ptx_agent.models.base import STORED_ELSEWHERE

    long = "z" * 100_000
    scripted_server.script((200, completion(long)))
    model = make_model("served-model", model_host=scripted_server.host, retry=fast_retry)
    message = model.query(MESSAGES)
    assert message["content"] == long
    raw = message["extra"]["response"]
    assert raw["choices"][0]["message"]["content"] == STORED_ELSEWHERE and raw["usage"]["prompt_tokens"] == 11
    assert long not in str(raw)
