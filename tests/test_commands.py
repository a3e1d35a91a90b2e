"""The console scripts exist and explain themselves."""

import subprocess
import sys

import pytest

COMMANDS = [
    ("fibserve", "FlashInfer Trace"),
    ("ptxbench", "kernel agents"),
    ("ptxbench-inspect", "trajectories"),
]


@pytest.mark.parametrize(("command", "phrase"), COMMANDS)
def test_help_describes_the_command(command: str, phrase: str) -> None:
    bindir = __import__("pathlib").Path(sys.executable).parent
    result = subprocess.run([str(bindir / command), "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert phrase in " ".join(result.stdout.split())
