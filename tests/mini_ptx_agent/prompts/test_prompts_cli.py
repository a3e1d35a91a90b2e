"""`ptxbench prompts list` and `show`, and the offline token count behind the listing."""

from __future__ import annotations

import json
import socket

import pytest
from mini_ptx_agent.cli import app
from mini_ptx_agent.prompts import compose_system_prompt, get_prompt_tag, list_prompt_tags
from mini_ptx_agent.prompts.tokens import TOKENIZER, count_tokens
from typer.testing import CliRunner


def test_tokens_are_counted_offline_with_cl100k(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise OSError("network disabled by the test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    assert TOKENIZER == "cl100k_base"
    assert count_tokens("hello world") == 2  # cl100k_base: "hello", " world"
    assert count_tokens("<|endoftext|>") > 1  # special-token text in a prompt is ordinary text
    assert count_tokens(compose_system_prompt("hopper-abi-only")) > 1000


def test_list_reports_every_tag_with_its_size_and_the_tokenizer() -> None:
    result = CliRunner().invoke(app, ["prompts", "list", "--json"])
    assert result.exit_code == 0, result.output
    listing = json.loads(result.output)
    assert listing["tokenizer"] == "cl100k_base" and "litellm" in listing["tokenizer_description"]
    rows = {row["name"]: row for row in listing["tags"]}
    assert sorted(rows) == list_prompt_tags()
    for name, row in rows.items():
        text = compose_system_prompt(name)
        assert row["chars"] == len(text)
        assert row["tokens"] == count_tokens(text)
        assert row["target"] == get_prompt_tag(name).target
    assert rows["hopper-fa3-forward"]["parts"] == ["hopper-no-hint", "patterns/fa3_forward"]
    plain = CliRunner().invoke(app, ["prompts", "list"])
    assert plain.exit_code == 0
    assert "tiktoken cl100k_base" in plain.output
    assert "hopper-no-hint + patterns/fa3_forward" in plain.output


def test_show_prints_the_composed_prompt_exactly() -> None:
    result = CliRunner().invoke(app, ["prompts", "show", "blackwell-fa4-forward"])
    assert result.exit_code == 0
    assert result.output == compose_system_prompt("blackwell-fa4-forward")
    fragments = CliRunner().invoke(app, ["prompts", "show", "hopper-tma-store", "--fragments"])
    assert fragments.output.split() == list(get_prompt_tag("hopper-tma-store").fragments)


def test_show_refuses_an_unknown_tag_with_close_matches() -> None:
    result = CliRunner().invoke(app, ["prompts", "show", "hopper-fa3-fwd"])
    assert result.exit_code == 2
    assert "unknown prompt tag 'hopper-fa3-fwd'; did you mean hopper-fa3-forward" in result.output
    assert result.stdout == ""  # the error goes to stderr, nothing that looks like a prompt to stdout


def test_registering_the_commands_does_not_load_the_registry() -> None:
    """`ptxbench --help` imports the CLI; the prompts package loads its registry (and pydantic) on first use."""
    import subprocess
    import sys

    code = "import sys, mini_ptx_agent.cli; print('mini_ptx_agent.prompts.registry' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr
