"""The per-turn table: every evaluator status has exactly one failure class, policy refusals are told apart from
compile errors, and the rows of a run directory the agent really wrote (a scripted model endpoint on 127.0.0.1,
prepared KernelReports) follow its turns."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fibserve.trace import EvaluationStatus
from mini_ptx_agent.environment.report import NotEvaluated
from mini_ptx_agent.runs.turns import FailureClass, TurnRow, failure_class

# eval_reports (tests/mini_ptx_agent/eval): KernelReports as the service returns them.
sys.path.insert(0, str(Path(__file__).parents[1] / "eval"))


@pytest.mark.parametrize("status", [*EvaluationStatus, *NotEvaluated])
def test_every_status_has_a_failure_class(status) -> None:
    assert failure_class(status.value) in FailureClass.__args__


def test_classes_that_reports_count_apart() -> None:
    assert failure_class("PASSED") == "PASSED"
    assert failure_class("INCORRECT_NUMERICAL") == failure_class("INCORRECT_SHAPE") == "incorrect"
    assert failure_class("COMPILE_ERROR") == "compile"
    assert failure_class("COMPILE_ERROR", policy_violations=True) == "policy"
    assert failure_class("SANITIZER_FAILED") == "runtime"
    assert failure_class("INFRASTRUCTURE_ERROR") == "infrastructure"


def test_an_unknown_status_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="PASSED"):
        failure_class("MAYBE")


def test_a_row_refuses_an_unknown_column() -> None:
    row = dict(experiment="e", trajectory="t0", model="m", definition="d", language="triton", arch="sm_90a",
               prompt_tag="p", replica=0, turn=1, failure_class="format", status="FORMAT_ERROR", target_speedup=1.0)  # fmt: skip
    assert TurnRow(**row).min_speedup is None
    with pytest.raises(ValueError):
        TurnRow(**row, speedup=2.0)


# -- turn_rows: the rows of a run directory the agent really wrote -------------------------------------------


class CannedBackend:
    """An evaluation backend that answers each kernel with the next prepared KernelReport (the bundled
    definition, no service): what is tested here is how the rows are read back from the files the agent writes."""

    def __init__(self, reports: list):
        from fibserve.datasets import default_root
        from fibserve.trace import TraceSet

        self.traces = TraceSet.load(default_root())
        self.reports = list(reports)

    def definition(self, name: str):
        return self.traces.definition(name)

    def workloads(self, name: str):
        return self.traces.workloads_for(name)

    def evaluate(self, solution, task):
        if not self.reports:
            from mini_ptx_agent.environment import EvaluationInfrastructureError

            raise EvaluationInfrastructureError("service went away")
        return self.reports.pop(0)

    def describe(self) -> dict:
        return {"backend": "canned"}


def run_directory(tmp_path, replies: list[str], reports: list, num_turns: int):
    from mini_ptx_agent.models import make_model
    from mini_ptx_agent.runs.directory import RunPlan
    from mini_ptx_agent.runs.launch import run_trajectory
    from mini_ptx_agent.task import TaskConfig
    from scripted_model import ScriptedOpenAIServer
    from test_agent_loop import FAST_RETRY, MODEL_ID

    task = TaskConfig(definition="vector_add_f32", language="triton", target_speedup=1.5)
    plan = RunPlan(
        run_id="traj-7", created_at="2026-12-02T00:00:00+00:00", task=task, model=MODEL_ID,
        prompt_tag="triton-hopper", num_turns=num_turns, service="test",
    )  # fmt: skip
    run_dir = tmp_path / "run"
    with ScriptedOpenAIServer(MODEL_ID, replies) as server:
        model = make_model(MODEL_ID, model_host=server.host_port, retry=FAST_RETRY)
        summary = run_trajectory(plan, run_dir, backend=CannedBackend(reports), model=model)
    return run_dir, summary


def test_rows_of_a_run_directory_follow_its_turns(tmp_path) -> None:
    from eval_reports import report
    from mini_ptx_agent.runs.turns import turn_rows
    from test_agent_loop import BAD_REPLY, GOOD_REPLY, NO_CODE

    passing = report(["PASSED", "PASSED"], speedups=[1.25, 0.8], hardware="NVIDIA H200")
    failing = report(["PASSED", "INCORRECT_NUMERICAL"])
    run_dir, summary = run_directory(tmp_path, [NO_CODE, BAD_REPLY, GOOD_REPLY], [failing, passing], 3)
    assert summary.exit_status == "LimitsExceeded"

    rows = turn_rows(run_dir, experiment="exp-a", trajectory="t0001", replica=2)
    assert [(r.turn, r.failure_class, r.status) for r in rows] == [
        (1, "format", "FORMAT_ERROR"), (2, "incorrect", "INCORRECT_NUMERICAL"), (3, "PASSED", "PASSED"),
    ]  # fmt: skip
    first, second, third = rows
    assert {(r.experiment, r.trajectory, r.replica, r.prompt_tag, r.language) for r in rows} == {
        ("exp-a", "t0001", 2, "triton-hopper", "triton")
    }
    assert first.speedups == {} and first.min_speedup is None
    assert second.speedups == {"w0": 1.0, "w1": None} and second.min_speedup is None
    assert third.speedups == {"w0": 1.25, "w1": 0.8} and third.min_speedup == 0.8
    assert third.latency_ms == 1.0 / 0.8 and third.executed_on_gpu and not third.target_met
    assert third.target_speedup == 1.5 and not third.demo
    # The scripted endpoint reports tokens (chars / 4) and the model has no price: cost unknown, not zero.
    assert all(
        r.tokens_in and r.tokens_out == len(reply) // 4
        for r, reply in zip(rows, [NO_CODE, BAD_REPLY, GOOD_REPLY], strict=True)
    )
    assert all(r.cost_usd is None and r.seconds is not None and r.seconds >= 0 for r in rows)
    # Defaults: the directory's name and the plan's run id.
    assert {(r.experiment, r.trajectory) for r in turn_rows(run_dir)} == {("run", "traj-7")}


def test_a_turn_that_the_service_failed_is_an_infrastructure_row_and_a_crash_leaves_none(tmp_path) -> None:
    from eval_reports import report
    from mini_ptx_agent.runs.directory import RunLayout
    from mini_ptx_agent.runs.turns import turn_rows
    from mini_ptx_agent.trajectory import load_trajectory, write_json
    from test_agent_loop import GOOD_REPLY

    run_dir, summary = run_directory(tmp_path, [GOOD_REPLY, GOOD_REPLY], [report(["PASSED"], target=2.0)], 3)
    assert summary.exit_status == "InfrastructureError"
    rows = turn_rows(run_dir)
    assert [(r.turn, r.failure_class) for r in rows] == [(1, "PASSED"), (2, "infrastructure")]
    assert rows[1].status == "INFRASTRUCTURE_ERROR" and rows[1].tokens_out is not None

    # A process killed during turn 2's evaluation leaves the reply without feedback or exit: no row for it.
    layout = RunLayout(run_dir)
    trajectory = load_trajectory(layout.trajectory_path)
    trajectory["messages"] = trajectory["messages"][:-1]
    write_json(layout.trajectory_path, trajectory)
    assert [r.turn for r in turn_rows(run_dir)] == [1]


def test_a_directory_without_a_plan_is_refused(tmp_path) -> None:
    from mini_ptx_agent.runs.turns import turn_rows

    with pytest.raises(FileNotFoundError, match=r"plan\.json"):
        turn_rows(tmp_path)
