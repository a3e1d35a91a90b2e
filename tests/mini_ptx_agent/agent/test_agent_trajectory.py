"""Trajectories: mini-swe-agent-1.1 JSON that mini-swe-agent's own inspector loads, with no secret in any file."""

import asyncio
import json
from pathlib import Path

import pytest
from mini_ptx_agent.trajectory import (
    REDACTED,
    TRAJECTORY_FORMAT,
    TrajectoryError,
    load_trajectory,
    redact_text,
    scrub,
    secret_values,
    write_json,
)

FAKE_ENV = {
    "OPENAI_API_KEY": "sk-test-openai-0123456789abcdef",
    "ANTHROPIC_API_KEY": "sk-ant-test-fedcba9876543210",
    "FIBSERVE_TOKEN": "fibserve-token-5555aaaa",
    "PATH": "/usr/bin",
    "SHORT_TOKEN": "abc",
}


def test_secret_values_come_from_secret_named_variables_only() -> None:
    values = secret_values(FAKE_ENV)
    assert set(values) == {
        FAKE_ENV["OPENAI_API_KEY"],
        FAKE_ENV["ANTHROPIC_API_KEY"],
        FAKE_ENV["FIBSERVE_TOKEN"],
    }


def test_scrub_redacts_secret_keys_and_values_but_keeps_token_counts() -> None:
    secrets = secret_values(FAKE_ENV)
    data = {
        "model_kwargs": {"api_key": "anything-at-all", "temperature": 0.2, "max_tokens": 4096},
        "usage": {"prompt_tokens": 10, "total_tokens": 20},
        "headers": {"Authorization": "Bearer xyz"},
        "log": f"calling with key {FAKE_ENV['OPENAI_API_KEY']} now",
        "token": None,
    }
    out = scrub(data, secrets)
    assert out["model_kwargs"] == {"api_key": REDACTED, "temperature": 0.2, "max_tokens": 4096}
    assert out["usage"] == {"prompt_tokens": 10, "total_tokens": 20}
    assert out["headers"]["Authorization"] == REDACTED
    assert out["log"] == f"calling with key {REDACTED} now"
    assert out["token"] is None
    assert redact_text("x fibserve-token-5555aaaa y", secrets) == f"x {REDACTED} y"


def test_write_json_scrubs_with_the_live_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_live_secret_value_123")
    path = tmp_path / "t.json"
    write_json(path, {"messages": [{"content": "hf_live_secret_value_123"}]})
    assert "hf_live_secret_value_123" not in path.read_text()


def test_load_rejects_what_is_not_a_trajectory(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("[1, 2]")
    (tmp_path / "b.json").write_text(json.dumps({"messages": [], "trajectory_format": "other"}))
    (tmp_path / "c.json").write_text("{")
    for name in ("a.json", "b.json", "c.json"):
        with pytest.raises(TrajectoryError):
            load_trajectory(tmp_path / name)


def inspect_with_minisweagent(path: Path) -> tuple[int, int, str]:
    """Open ``path`` in mini-swe-agent's own TrajectoryInspector (headless) and step to the last page.

    Returns (messages, steps, title of the last page).
    """
    from minisweagent.run.utilities.inspector import TrajectoryInspector

    app = TrajectoryInspector([path])

    async def browse() -> str:
        async with app.run_test() as pilot:
            await pilot.press("$")
            await pilot.pause()
            return str(app.title)

    title = asyncio.run(browse())
    return len(app.messages), app.n_steps, title


def test_saved_format_is_the_mini_swe_agent_one(tmp_path: Path) -> None:
    path = tmp_path / "exp_000.json"
    write_json(
        path,
        {
            "info": {},
            "messages": [{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}],
            "trajectory_format": TRAJECTORY_FORMAT,
        },
    )
    assert load_trajectory(path)["trajectory_format"] == "mini-swe-agent-1.1"
    n_messages, n_steps, title = inspect_with_minisweagent(path)
    assert (n_messages, n_steps) == (2, 2)
    assert "Step 2/2" in title
