"""The one switch: bubblewrap, or an explicit --unsafe-no-sandbox, or nothing runs (with an install hint)."""

from __future__ import annotations

import pytest
from fibserve import sandbox
from fibserve.sandbox import switch


@pytest.fixture
def fresh_status(monkeypatch: pytest.MonkeyPatch):
    switch.status.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    switch.status.cache_clear()


def test_without_bubblewrap_candidates_are_refused_with_an_install_hint(fresh_status, tmp_path) -> None:
    fresh_status.setenv("PATH", str(tmp_path))  # no bwrap on this PATH
    fresh_status.delenv(switch.UNSAFE_ENV, raising=False)
    current = sandbox.status()
    assert current.mode == "unavailable" and not current.usable
    assert "apt-get install bubblewrap" in current.detail and "--unsafe-no-sandbox" in current.detail
    with pytest.raises(sandbox.SandboxUnavailable, match="bubblewrap"):
        sandbox.require()
    with pytest.raises(sandbox.SandboxUnavailable):
        sandbox.run(["true"], mounts=sandbox.Mounts(), limits=sandbox.Limits(), timeout_s=10)


def test_a_bubblewrap_that_cannot_make_namespaces_is_not_a_sandbox(fresh_status, tmp_path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    fresh_status.setenv("PATH", str(tmp_path))
    fresh_status.delenv(switch.UNSAFE_ENV, raising=False)
    current = sandbox.status()
    assert current.mode == "unavailable" and "No permissions to create new namespace" in current.detail


def test_the_unsafe_switch_is_explicit_and_loud(fresh_status) -> None:
    fresh_status.setenv(switch.UNSAFE_ENV, "1")
    current = sandbox.status()
    assert current.mode == "unsafe-none" and current.usable
    assert current.detail.startswith("UNSAFE")
    done = sandbox.run(
        ["sh", "-c", "echo $HOME"], mounts=sandbox.Mounts(), limits=sandbox.Limits(), timeout_s=30
    )
    assert done.sandbox == "unsafe-none" and done.returncode == 0


def test_bubblewrap_is_used_here() -> None:
    """CI and the GPU runs install bubblewrap: the rest of the suite relies on it."""
    assert sandbox.status().mode == "bwrap", sandbox.status().detail
