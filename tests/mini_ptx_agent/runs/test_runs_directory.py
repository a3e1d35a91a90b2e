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


def _trajectory(path: Path) -> Path:
    from mini_ptx_agent.trajectory import TRAJECTORY_FORMAT, write_json

    write_json(path, {"info": {}, "messages": [], "trajectory_format": TRAJECTORY_FORMAT})
    return path


def test_mini_swe_agents_inspector_finds_the_trajectories_of_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`mini-extra inspector DIR` opens every ``*.traj.json`` below DIR: a run's trajectory is named so."""
    from mini_ptx_agent.runs.directory import RunLayout
    from minisweagent.run.utilities import inspector
    from typer.testing import CliRunner

    runs = [RunLayout(tmp_path / name) for name in ("run-a", "run-b")]
    for layout in runs:
        _trajectory(layout.trajectory_path)
    opened: list[list[Path]] = []
    # The inspector's terminal UI cannot run here; what it would open is what it was given.
    monkeypatch.setattr(
        inspector.TrajectoryInspector, "run", lambda self: opened.append(self.trajectory_files)
    )
    done = CliRunner().invoke(inspector.app, [str(tmp_path)])
    assert done.exit_code == 0, done.output
    assert opened == [[layout.trajectory_path for layout in runs]]


def test_a_run_made_before_the_rename_keeps_its_trajectory_file(tmp_path: Path) -> None:
    from mini_ptx_agent.runs.directory import RunLayout

    layout = RunLayout(tmp_path)
    assert layout.trajectory_path == tmp_path / "trajectories" / "exp_000.traj.json"
    older = _trajectory(tmp_path / "trajectories" / "exp_000.json")
    assert layout.trajectory_path == older  # resumed and reported where it is
