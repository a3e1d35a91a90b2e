"""The runner's bounds without a service: trajectories in flight, trajectories per model, evaluations per lane.

Models and the evaluation answer in-process (a model that records how many of its calls are in flight, the
prepared-report backend of the turn-table tests), so what is tested is the scheduling of the real
:class:`ExperimentRunner` over a real expanded plan and real run directories.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

from eval_reports import report
from mini_ptx_agent.experiments.config import ExperimentConfig
from mini_ptx_agent.experiments.plan import LocalCatalog, expand
from mini_ptx_agent.experiments.runner import ExperimentRunner, ModelChecks
from mini_ptx_agent.models.base import KernelModelBase, ModelUsage
from pydantic import BaseModel
from scripted_kernels import VECTOR_ADD
from test_turns import CannedBackend


class Named(BaseModel):
    model_name: str


class CountingModel(KernelModelBase):
    """Answers a correct kernel at once; counts its model's calls in flight. The unlimited model's calls wait
    (bounded) until a second one has been in flight, so overlap is shown, not hoped for."""

    def __init__(self, name: str, state: dict, lock: threading.Condition):
        self.name, self.state, self.lock = name, state, lock
        self.config = Named(model_name=name)
        self.usage = ModelUsage()

    def query(self, messages, **kwargs) -> dict:
        with self.lock:
            self.state["now"][self.name] += 1
            self.state["max"][self.name] = max(self.state["max"][self.name], self.state["now"][self.name])
            self.lock.notify_all()
            if self.name == "m/free":
                self.lock.wait_for(lambda: self.state["max"]["m/free"] >= 2, timeout=10)
        try:
            return self.assistant_message(f"```python\n{VECTOR_ADD}```", {"cost_usd": None})
        finally:
            with self.lock:
                self.state["now"][self.name] -= 1


class Runner(ExperimentRunner):
    def __init__(self, *args, state, lock, evaluations, **kwargs):
        super().__init__(*args, **kwargs)
        self.state, self.lock, self.evaluations = state, lock, evaluations

    def make_model(self, t):
        return CountingModel(t.model, self.state, self.lock)

    def make_backend(self):
        runner = self

        class Backend(CannedBackend):
            def evaluate(self, solution, task):
                with runner.slots:  # the runner's own slots, as ExperimentBackend takes them
                    with runner.lock:
                        runner.evaluations["now"] += 1
                        runner.evaluations["max"] = max(runner.evaluations["max"], runner.evaluations["now"])
                    try:
                        return report(["PASSED"], target=100.0)
                    finally:
                        with runner.lock:
                            runner.evaluations["now"] -= 1

            def close(self) -> None:
                pass

        return Backend([])


def test_per_model_and_total_bounds_hold(tmp_path: Path) -> None:
    config = ExperimentConfig.model_validate({
        "name": "bounds", "definitions": ["vector_add_f32"], "workloads": 1, "languages": ["triton"],
        "prompt_tags": ["triton-hopper"], "models": [{"name": "m/limited", "concurrency": 1}, "m/free"],
        "replicas": 4, "num_turns": 2, "concurrency": 3,
    })  # fmt: skip
    plan = expand(config, LocalCatalog(), name="bounds")
    lock = threading.Condition()
    state = {"now": Counter(), "max": Counter()}
    evaluations = {"now": 0, "max": 0}
    done: list[str] = []
    runner = Runner(
        plan, tmp_path, url="in-process", token=None, lanes=1, checked=ModelChecks(), state=state, lock=lock,
        evaluations=evaluations, on_done=lambda t, summary: done.append(summary.exit_status),
    )  # fmt: skip
    assert runner.run() == 8
    assert runner.errors == {}  # no trajectory raised
    assert done == ["LimitsExceeded"] * 8
    assert state["max"]["m/limited"] == 1  # its concurrency
    assert state["max"]["m/free"] >= 2  # trajectories of the other model did overlap
    assert sum(state["max"].values()) <= 3  # the experiment's concurrency
    assert evaluations["max"] <= 2  # two evaluations per lane, one lane
    assert runner.todo() == []  # every trajectory finished: a resume has nothing to do
