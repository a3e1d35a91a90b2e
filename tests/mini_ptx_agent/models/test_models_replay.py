"""replay:PATH, the no-model fallback, and compatibility with mini-swe-agent's own DefaultAgent loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mini_ptx_agent.models import ModelConfigError, ReplayExhaustedError, ReplayModel, make_model


def write_trajectory(path: Path, replies: list[str], fmt: str = "mini-swe-agent-1.1") -> Path:
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    for index, reply in enumerate(replies):
        messages.append({"role": "assistant", "content": reply, "extra": {"cost": 0.5}})
        messages.append({"role": "user", "content": f"feedback {index}"})
    messages.append({"role": "exit", "content": "LimitsExceeded", "extra": {"exit_status": "LimitsExceeded"}})
    path.write_text(json.dumps({"info": {"exit_status": "LimitsExceeded"}, "messages": messages,
                                "trajectory_format": fmt}))  # fmt: skip
    return path


def test_replay_returns_assistant_messages_in_order_then_errors(tmp_path: Path) -> None:
    path = write_trajectory(tmp_path / "traj.json", ["first ```cuda\nA\n```", "second ```cuda\nB\n```"])
    model = make_model(f"replay:{path}")
    assert isinstance(model, ReplayModel) and model.config.n_messages == 2
    first, second = model.query([]), model.query([])
    assert first["content"].startswith("first") and second["content"].startswith("second")
    assert first["role"] == "assistant" and first["extra"]["actions"] == [] and first["extra"]["cost"] == 0.0
    assert [first["extra"]["replay_index"], second["extra"]["replay_index"]] == [1, 2]
    with pytest.raises(ReplayExhaustedError, match="has no reply left: its 2 recorded replies were used"):
        model.query([])
    assert model.serialize()["info"]["config"]["model"]["path"] == str(path)
    model.resume_from(1)  # a resumed run: one turn already done
    assert model.query([])["content"].startswith("second")
    with pytest.raises(ValueError, match="cannot resume replay at 3"):
        model.resume_from(3)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (None, "does not exist"),
        ("not json", "not readable JSON"),
        (json.dumps({"messages": [], "trajectory_format": "swe-agent-0.9"}), "trajectory_format 'swe-agent-0.9'"),
        (json.dumps({"messages": [{"role": "user", "content": "x"}], "trajectory_format": "mini-swe-agent-1.1"}),
         "no assistant messages"),
    ],
)  # fmt: skip
def test_bad_replay_files_are_config_errors(tmp_path: Path, content: str | None, match: str) -> None:
    path = tmp_path / "traj.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ModelConfigError, match=match):
        make_model(f"replay:{path}")


def test_no_model_uses_the_fallback_replay_loudly(tmp_path: Path, capsys) -> None:
    path = write_trajectory(tmp_path / "demo.json", ["demo reply"])
    model = make_model(None, fallback_replay=path)
    assert model.config.fallback is True
    assert "NO MODEL CONFIGURED" in capsys.readouterr().err
    assert model.query([])["content"] == "demo reply"


def test_no_model_and_no_fallback_is_a_config_error() -> None:
    with pytest.raises(ModelConfigError, match="no model configured: set MODEL_NAME"):
        make_model(None)


def test_models_drive_mini_swe_agents_default_agent(tmp_path: Path, monkeypatch) -> None:
    """Protocol check with the real mini-swe-agent 2.4.6 loop: query, template vars, serialize, save."""
    monkeypatch.setenv("MSWEA_SILENT_STARTUP", "1")
    monkeypatch.setenv("MSWEA_GLOBAL_CONFIG_DIR", str(tmp_path / "mswea"))
    from minisweagent.agents.default import DefaultAgent

    class NoEnvironment:
        config = None

        def execute(self, action: dict, cwd: str = "") -> dict:
            raise AssertionError("the models return no actions")

        def get_template_vars(self, **kwargs) -> dict:
            return {}

        def serialize(self) -> dict:
            return {}

    model = make_model(f"replay:{write_trajectory(tmp_path / 't.json', ['one', 'two'])}")
    output = tmp_path / "out.json"
    agent = DefaultAgent(model, NoEnvironment(), system_template="model {{ model_name }}",
                         instance_template="{{ task }}", step_limit=2, output_path=output)  # fmt: skip
    result = agent.run("write a kernel")
    assert result["exit_status"] == "LimitsExceeded"
    saved = json.loads(output.read_text())
    assert saved["trajectory_format"] == "mini-swe-agent-1.1"
    assert [m["content"] for m in saved["messages"] if m["role"] == "assistant"] == ["one", "two"]
    assert saved["messages"][0]["content"].startswith("model replay:")
    assert saved["info"]["config"]["model_type"] == "mini_ptx_agent.models.replay.ReplayModel"
    assert saved["info"]["model_usage"]["n_calls"] == 2
