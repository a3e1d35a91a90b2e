"""KernelAgent decisions that a CPU-only FIBServe cannot produce: GPU results, resume, failures.

The end-to-end loop runs against a real FIBServe and a scripted HTTP model in test_agent_loop.py. Here the
evaluation answers are GPU results (a target met on an H200) that CI cannot compute, so a backend hands out
prepared FlashInfer Trace reports; the model is mini-swe-agent's own DeterministicModel.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from eval_reports import report
from mini_ptx_agent.agent import KernelAgent, literal_template
from mini_ptx_agent.environment import EvaluationInfrastructureError
from mini_ptx_agent.environment.evaluation import EvaluationEnvironment
from mini_ptx_agent.environment.report import KernelReport
from mini_ptx_agent.runs.directory import RunLayout
from mini_ptx_agent.task import TaskConfig
from mini_ptx_agent.trajectory import load_trajectory
from minisweagent.models.test_models import DeterministicModel

TASK = TaskConfig(definition="vector_add_f32", language="triton", target_speedup=1.0)


class PreparedReports:
    """Evaluation backend that answers each evaluation with the next prepared report (or raises it)."""

    def __init__(self, answers: list[KernelReport | Exception]):
        self.answers = list(answers)
        self.solutions: list = []

    def definition(self, name: str):
        raise AssertionError("not used")

    def workloads(self, name: str) -> list:
        return []

    def describe(self) -> dict:
        return {"backend": "prepared"}

    def evaluate(self, solution, task):
        self.solutions.append(solution)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def reply(text: str) -> dict:
    return {
        "role": "assistant",
        "content": text,
        "extra": {"actions": [], "cost": 0.01, "timestamp": time.time()},
    }


def kernel(tag: str) -> dict:
    return reply(f"Plan.\n```python\n# {tag}\ndef run(x, y, z):\n    pass\n```")


def make_agent(
    tmp_path: Path, outputs: list[dict], backend: PreparedReports, model=None, **config
) -> tuple[KernelAgent, RunLayout]:
    files = RunLayout(tmp_path)
    agent = KernelAgent(
        model or DeterministicModel(outputs=outputs),
        EvaluationEnvironment(backend, TASK),
        files=files,
        task=TASK,
        system_template=literal_template("system {{ not jinja }}"),
        instance_template=literal_template("task"),
        output_path=files.trajectory_path,
        **({"step_limit": 5} | config),
    )
    return agent, files


def test_target_met_on_gpu_submits_with_the_kernel(tmp_path: Path) -> None:
    backend = PreparedReports(
        [report(["PASSED"], speedups=[0.8]), report(["PASSED", "PASSED"], speedups=[1.4, 1.1])]
    )
    agent, files = make_agent(tmp_path, [kernel("slow"), kernel("fast")], backend)
    result = agent.run()
    assert result["exit_status"] == "Submitted"
    assert "# fast" in result["submission"]
    assert agent.messages[-2]["content"].splitlines()[-1].startswith("VERDICT: TARGET MET")
    assert agent.messages[1]["content"] == "task" and agent.messages[0]["content"] == "system {{ not jinja }}"
    assert sorted(p.name for p in files.success_dir.iterdir()) == ["kernel_v1.py", "kernel_v2.py"]
    saved = load_trajectory(files.trajectory_path)
    assert saved["info"]["exit_status"] == "Submitted"
    assert saved["info"]["ptxbench"]["versions"] == [1, 2]
    assert saved["info"]["ptxbench"]["best"]["turn"] == 2
    assert (
        backend.solutions[1].name.endswith("-t002")
        and backend.solutions[1].spec.entry_point == "kernel.py::run"
    )


def test_correct_on_cpu_never_submits(tmp_path: Path) -> None:
    cpu = report(["PASSED"], speedups=[100.0], hardware="cpu")
    agent, _ = make_agent(tmp_path, [kernel("a"), kernel("b")], PreparedReports([cpu, cpu]), step_limit=2)
    assert agent.run()["exit_status"] == "LimitsExceeded"
    assert agent.n_calls == 2


def test_evaluation_service_failure_is_an_infrastructure_error(tmp_path: Path) -> None:
    down = EvaluationInfrastructureError("FIBServe at http://127.0.0.1:9 is unreachable")
    agent, files = make_agent(tmp_path, [kernel("a")], PreparedReports([down]))
    result = agent.run()
    assert result["exit_status"] == "InfrastructureError"
    assert result["infrastructure"]["source"] == "evaluation"
    assert "unreachable" in agent.messages[-1]["content"]
    assert not any("VERDICT" in m.get("content", "") for m in agent.messages)
    assert load_trajectory(files.trajectory_path)["info"]["exit_status"] == "InfrastructureError"


class ModelDownAfterOutputs(DeterministicModel):
    """mini-swe-agent's DeterministicModel whose API "goes down" once its outputs are used up."""

    def query(self, messages, **kwargs):
        if self.current_index + 1 >= len(self.config.outputs):
            raise ConnectionError("connection refused by model host")
        return super().query(messages, **kwargs)


def test_model_exception_is_an_infrastructure_error(tmp_path: Path) -> None:
    model = ModelDownAfterOutputs(outputs=[kernel("a")])
    agent, _ = make_agent(tmp_path, [], PreparedReports([report(["INCORRECT_NUMERICAL"])]), model=model)
    result = agent.run()
    assert result["exit_status"] == "InfrastructureError"
    assert result["infrastructure"]["source"] == "model"
    assert "connection refused by model host" in agent.messages[-1]["content"]
    assert agent.messages[-2]["content"].startswith("Evaluation of your kernel")


def test_model_call_over_the_turn_timeout(tmp_path: Path) -> None:
    slow = reply("x")
    slow["extra"]["actions"] = [{"command": "/sleep 2"}]
    agent, _ = make_agent(tmp_path, [slow, kernel("never")], PreparedReports([]), turn_timeout_s=0.3)
    result = agent.run()
    assert result["exit_status"] == "InfrastructureError"
    assert result["infrastructure"]["kind"] == "timeout"


def test_resume_continues_from_the_last_complete_turn(tmp_path: Path) -> None:
    down = EvaluationInfrastructureError("FIBServe went away")
    first, files = make_agent(
        tmp_path, [kernel("a"), kernel("b")], PreparedReports([report(["INCORRECT_NUMERICAL"]), down])
    )
    assert first.run()["exit_status"] == "InfrastructureError"
    saved = load_trajectory(files.trajectory_path)
    assert [m["role"] for m in saved["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "exit",
    ]

    backend = PreparedReports([report(["PASSED"], speedups=[1.2])])
    second, _ = make_agent(tmp_path, [kernel("b-again")], backend)
    second.resume(saved)
    assert second.run()["exit_status"] == "Submitted"
    roles = [m["role"] for m in second.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user", "exit"]
    assert second.n_calls == 2
    assert "# b-again" in second.messages[4]["content"]
    assert second.versions == [2]
    with pytest.raises(ValueError, match="Submitted"):
        second.resume(load_trajectory(files.trajectory_path))


def test_wall_time_limit(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, [kernel("a")], PreparedReports([]), wall_time_limit_seconds=1)
    agent._start_time -= 5
    assert agent.run()["exit_status"] == "TimeExceeded"


def test_three_format_errors_in_a_row_end_the_run(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, [reply("no code")] * 3, PreparedReports([]))
    assert agent.run()["exit_status"] == "RepeatedFormatError"
    assert sum("FORMAT ERROR" in m.get("content", "") for m in agent.messages) == 3


def test_a_demo_replay_is_flagged_in_the_trajectory_and_summary(tmp_path: Path) -> None:
    from mini_ptx_agent.demo import write_demo_trajectory
    from mini_ptx_agent.models.replay import ReplayModel
    from mini_ptx_agent.runs.summary import summarize

    demo = write_demo_trajectory("triton", tmp_path / "demo.json")
    answers = PreparedReports([report(["INCORRECT_NUMERICAL"])] * 3)
    agent, files = make_agent(tmp_path, [], answers, model=ReplayModel(path=demo))
    result = agent.run()
    saved = load_trajectory(files.trajectory_path)
    assert saved["info"]["ptxbench"]["demo"] is True
    assert summarize("r", result, saved, resumed=False).demo is True
    # A replay of that run's trajectory is a demo too: the flag travels with the replies.
    assert ReplayModel(path=files.trajectory_path).config.demo is True

    agent, files = make_agent(tmp_path / "model", [kernel("a")], PreparedReports([report(["PASSED"])]))
    result = agent.run()
    saved = load_trajectory(files.trajectory_path)
    assert saved["info"]["ptxbench"]["demo"] is False
    assert summarize("r", result, saved, resumed=False).demo is False
    assert ReplayModel(path=files.trajectory_path).config.demo is False
