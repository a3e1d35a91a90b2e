"""Hosted models through litellm, pointed at the scripted server (litellm's openai provider, no internet)."""

from __future__ import annotations

import pytest
from mini_ptx_agent.models import ModelConfigError, ModelUnavailableError, make_model
from scripted_openai import completion

pytestmark = pytest.mark.slow  # importing litellm takes ~10 s on a 2-core machine

FAKE_KEY = "sk-test-not-a-real-key-0123456789"
MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]


def test_missing_key_variable_is_named(monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ModelConfigError, match="ANTHROPIC_API_KEY"):
        make_model("anthropic/claude-sonnet-4-5")


def test_unpriced_model_has_unknown_cost(scripted_server, fast_retry, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    scripted_server.script((200, completion("hello", model="tiny-unpriced-model")))
    model = make_model("openai/tiny-unpriced-model", api_base=scripted_server.url + "/v1", retry=fast_retry)
    message = model.query(MESSAGES)
    assert message["content"] == "hello"
    assert message["extra"]["cost_usd"] is None and message["extra"]["cost"] == 0.0
    assert message["extra"]["usage"] == {"prompt_tokens": 11, "completion_tokens": 7}
    assert model.usage.cost_usd is None
    sent = scripted_server.chat_requests()[0]
    assert sent["json"]["temperature"] == 0.7  # default sampling from models.yaml
    assert sent["headers"]["authorization"] == f"Bearer {FAKE_KEY}"  # litellm read the usual variable


def test_priced_model_cost_comes_from_the_local_price_table(scripted_server, fast_retry, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    scripted_server.script(
        (200, completion("hi", model="gpt-4o-mini", prompt_tokens=1000, completion_tokens=1000))
    )
    model = make_model("openai/gpt-4o-mini", api_base=scripted_server.url + "/v1", retry=fast_retry)
    cost = model.query(MESSAGES)["extra"]["cost_usd"]
    assert cost is not None and 0 < cost < 0.01


def test_retry_then_unavailable(scripted_server, fast_retry, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    scripted_server.script((500, {"error": {"message": "boom"}}))
    scripted_server.default_reply = (200, completion("after retry"))
    model = make_model("openai/tiny-unpriced-model", api_base=scripted_server.url + "/v1", retry=fast_retry)
    assert model.query(MESSAGES)["content"] == "after retry"
    assert model.usage.retries == 1 and len(scripted_server.chat_requests()) == 2  # no hidden SDK retries
    scripted_server.default_reply = (503, {"error": {"message": "overloaded"}})
    with pytest.raises(ModelUnavailableError, match="after 3 attempts"):
        model.query(MESSAGES)
    assert len(scripted_server.chat_requests()) == 5


def test_a_name_litellm_cannot_route_is_refused_before_any_request() -> None:
    with pytest.raises(ModelConfigError, match="does not know model 'nonsense-model-xyz'") as info:
        make_model("nonsense-model-xyz")
    assert "ACCRL_MODEL_HOST" in str(info.value) and "anthropic/claude-sonnet-4-5" in str(info.value)
    with pytest.raises(ModelConfigError, match="Did you mean gpt-4o-mini"):
        make_model("gpt-4o-minii")


def test_check_fails_for_a_model_that_does_not_exist_and_says_what_to_type() -> None:
    from mini_ptx_agent.quickstart.check import check_model
    from mini_ptx_agent.quickstart.settings import QuickstartSettings

    line = check_model(QuickstartSettings.resolve(model="nonsense-model-xyz", environ={}))
    assert not line.ok
    assert "does not know model" in line.detail and "provider-prefixed name" in line.detail


def test_check_asks_the_provider_about_a_name_not_in_litellm_list(scripted_server, monkeypatch) -> None:
    from mini_ptx_agent.quickstart.check import check_hosted_model

    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    model = make_model("openai/not-a-served-model", api_base=scripted_server.url + "/v1")
    assert (model.provider, model.listed) == ("openai", False)
    scripted_server.script((404, {"error": {"message": "The model `not-a-served-model` does not exist"}}))
    line = check_hosted_model(model)
    assert not line.ok and "does not exist" in line.detail and "set MODEL_NAME" in line.detail
    (probe,) = scripted_server.chat_requests()
    assert probe["json"]["max_tokens"] == 1  # one cheap request, no retries
    scripted_server.script((200, completion("OK")))
    assert check_hosted_model(model).ok
    listed = make_model("openai/gpt-4o-mini", api_base=scripted_server.url + "/v1")
    scripted_server.script((200, completion("OK")))
    line = check_hosted_model(
        listed
    )  # in litellm's list, and still asked: only the provider can judge the key
    assert line.ok and "key accepted" in line.detail and len(scripted_server.chat_requests()) == 3


def test_check_of_a_listed_model_with_a_refused_key_is_a_fail_quoting_the_provider(
    scripted_server, monkeypatch
) -> None:
    """A key variable that is set proves nothing: the check asks once, and the provider's 401 is a FAIL."""
    from mini_ptx_agent.quickstart.check import check_hosted_model

    monkeypatch.setenv("OPENAI_API_KEY", "sk-bogus-key-0000000000")
    model = make_model("openai/gpt-4o-mini", api_base=scripted_server.url + "/v1")
    assert model.listed  # in litellm's model list: the check used to stop there, "API key variable present"
    refusal = {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
    scripted_server.script((401, refusal))
    line = check_hosted_model(model)
    assert not line.ok and len(scripted_server.chat_requests()) == 1
    assert "refused the API key (HTTP 401)" in line.detail and "Incorrect API key provided" in line.detail
    assert "sk-bogus-key" not in line.detail
