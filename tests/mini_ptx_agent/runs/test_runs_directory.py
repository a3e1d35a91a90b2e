"""Where run directories go: one rule for `ptxbench run` and the quickstart."""

from __future__ import annotations

from pathlib import Path

import pytest
from mini_ptx_agent.quickstart.settings import QuickstartSettings
from mini_ptx_agent.runs.directory import default_output_root


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, Path("data/eval_runs")),
        ({"PTXBENCH_ROOT": "/checkout"}, Path("/checkout/data/eval_runs")),
        ({"PTXBENCH_ROOT": "/checkout", "PTXBENCH_DATA_ROOT": "/data"}, Path("/data/eval_runs")),
        ({"PTXBENCH_ROOT": "", "PTXBENCH_DATA_ROOT": ""}, Path("data/eval_runs")),
    ],
)
def test_data_root_then_checkout_then_working_directory(environ: dict[str, str], expected: Path) -> None:
    assert default_output_root(environ) == expected
    assert QuickstartSettings.resolve(environ=environ).output_root == expected


def test_the_process_environment_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PTXBENCH_DATA_ROOT", raising=False)
    monkeypatch.setenv("PTXBENCH_ROOT", "/checkout")
    assert default_output_root() == Path("/checkout/data/eval_runs")
