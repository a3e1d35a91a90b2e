"""Sampling settings per family, the bundled models.yaml, retry backoff, and the cheap import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pydantic
import pytest
from mini_ptx_agent.models.config import RetryPolicy, load_models_config


def test_bundled_config_loads_and_matches_families_in_order() -> None:
    config = load_models_config()
    assert config.family_for("Qwen/Qwen3-Coder-480B-A35B-Instruct").name == "qwen3-coder"
    assert config.family_for("Qwen/Qwen3-32B").name == "qwen3"
    assert config.family_for("anthropic/claude-sonnet-4-5").name == "claude"
    assert config.sampling_for("anthropic/claude-sonnet-4-5").top_p is None
    assert config.family_for("openai/gpt-5").name == "openai-reasoning"
    assert config.sampling_for("openai/o3").request_params() == {}
    assert config.family_for("my-finetune") is None
    assert config.sampling_for("my-finetune") == config.default_sampling


def test_config_from_a_yaml_file_rejects_unknown_keys(tmp_path: Path) -> None:
    good = tmp_path / "models.yaml"
    good.write_text("families:\n  - name: mine\n    match: ['my-*']\n    sampling: {temperature: 0.1}\n")
    assert load_models_config(good).sampling_for("my-model").temperature == 0.1
    bad = tmp_path / "bad.yaml"
    bad.write_text("families:\n  - name: mine\n    match: ['my-*']\n    sampling: {temprature: 0.1}\n")
    with pytest.raises(pydantic.ValidationError, match="temprature"):
        load_models_config(bad)
    with pytest.raises(FileNotFoundError):
        load_models_config(tmp_path / "missing.yaml")


def test_backoff_grows_exponentially_and_is_capped() -> None:
    policy = RetryPolicy(initial_backoff_s=1.0, multiplier=2.0, max_backoff_s=5.0)
    assert [policy.backoff_s(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]
    assert policy.backoff_s(1, retry_after_s=30) == 5.0  # Retry-After is honoured but capped


def test_importing_the_model_and_prompt_modules_does_not_import_litellm() -> None:
    code = (
        "import sys, mini_ptx_agent.models, mini_ptx_agent.prompts\n"
        "heavy = [m for m in ('litellm', 'minisweagent', 'torch', 'openai', 'httpx') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "import os; assert os.environ['LITELLM_LOCAL_MODEL_COST_MAP'] == 'True'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
