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


def test_run_help_says_what_the_target_is_against_and_how_to_run_without_a_key() -> None:
    bindir = __import__("pathlib").Path(sys.executable).parent
    result = subprocess.run(
        [str(bindir / "ptxbench"), "run", "--help"], capture_output=True, text=True, timeout=60,
        env={**__import__("os").environ, "COLUMNS": "200"},
    )  # fmt: skip
    text = " ".join(result.stdout.replace("│", " ").split())
    assert result.returncode == 0, result.stderr
    assert "over the reference" not in text  # speed is judged against the baseline Solution
    assert (
        "Minimum speedup against the definition's baseline Solution (its reference where it has none)" in text
    )
    assert "--definition vector_add_f32 --language triton --model demo" in text
