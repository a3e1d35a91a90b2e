"""Inputs for the inspector's tests, made by the real agent and the real experiment runner.

- :func:`agent_run`: a run directory of ``ptxbench run``'s layout, written by the kernel agent talking HTTP to
  the scripted model endpoint (tests/mini_ptx_agent/agent/scripted_model.py), four turns: a reply with its
  reasoning in a ``<think>`` block and no kernel (format error), a kernel that does not compile, a wrong one,
  then a correct one timed on an "H200" with evaluator notes;
- :func:`demo_run`: the bundled CUDA demo trajectory replayed (flagged ``demo``), every kernel built but not
  executed, as without a GPU;
- :func:`experiment_dir`: an experiment of four trajectories (two scripted models x two replicas) of which the
  experiment runner ran three, the fourth left pending, with its plan.json and turns.csv;
- :func:`sft_rows`: SFT rows of every shape the reader accepts.

Evaluation is :class:`VerdictBackend`: the service stands in, answering each kernel from its source, as
FIBServe's result objects (``eval_reports``), so what is tested is what the agent and runner wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval_reports import report
from mini_ptx_agent.evaluation import KernelReport, StaticAnalysis, build_report
from mini_ptx_agent.task import TaskConfig
from scripted_kernels import BROKEN_MODEL, GOOD_MODEL, RESPOND
from scripted_model import ScriptedOpenAIServer
from test_agent_loop import BAD_REPLY, FAST_RETRY, GOOD_REPLY, MODEL_ID
from test_turns import CannedBackend

REASONING = "Let me think about coalescing first. The sign of the second load matters."
THINKING_REPLY = f"<think>{REASONING}</think>I will write the kernel next turn."
COMPILE_ERROR_REPLY = GOOD_REPLY.replace("def run(", "def run((")
NEIGHBOUR_NOTE = (
    "workload w1: the baseline ran 1.080x as long right after the candidate's calls (0.1080 ms) as after its "
    "own (0.1000 ms): the speedup may be overstated; from its calls after its own alone it is 0.7407"
)
HOPPER_PTX = ["cp.async.bulk.tensor", "mbarrier", "wgmma"]
HOPPER_SASS = ["HGMMA", "UTMALDG"]


class VerdictBackend(CannedBackend):
    """Answers each kernel from its source, as FIBServe would have: ``def run((`` does not compile, a
    subtracting add is wrong, other Triton kernels pass (1.25x and 0.8x on an H200, with a note), and CUDA
    kernels are built but not executed (no GPU), with the wgmma families when the source uses wgmma."""

    def __init__(self) -> None:
        super().__init__([])

    def evaluate(self, solution: Any, task: TaskConfig) -> KernelReport:
        source = solution.sources[0].content
        if task.language == "cuda":
            wgmma = "wgmma" in source
            analysis = StaticAnalysis(
                compiled=True, target=task.arch, ptx_families=HOPPER_PTX if wgmma else [],
                sass_families=HOPPER_SASS if wgmma else [], architecture_families=["wgmma", "TMA"] if wgmma else [],
                registers=168 if wgmma else 40, shared_memory_bytes=0, spill_bytes=0,
            )  # fmt: skip
            notes = "not executed: no GPU on this machine; the CUDA candidate was built and analysed statically only"
            return build_report(
                task, solution_name=solution.name, traces=[], executed=False, analysis=analysis, notes=notes
            )
        if "def run((" in source:
            failed = report(["COMPILE_ERROR"], target=task.target_speedup)
            analysis = StaticAnalysis(
                compiled=False, compile_log="SyntaxError: invalid syntax (kernel.py, line 13)"
            )
            return failed.model_copy(update={"static_analysis": analysis})
        if "- tl.load(y_ptr" in source:
            return report(["PASSED", "INCORRECT_NUMERICAL"], target=task.target_speedup)
        passed = report(["PASSED", "PASSED"], speedups=[1.25, 0.8], target=task.target_speedup)
        return passed.model_copy(
            update={"notes": NEIGHBOUR_NOTE, "static_analysis": StaticAnalysis(compiled=True)}
        )

    def close(self) -> None:
        pass


def agent_run(root: Path) -> Path:
    """The four-turn run directory described in the module docstring, under ``root/run``."""
    from mini_ptx_agent.models import make_model
    from mini_ptx_agent.runs.directory import RunPlan
    from mini_ptx_agent.runs.launch import run_trajectory

    task = TaskConfig(definition="vector_add_f32", language="triton", target_speedup=1.5)
    plan = RunPlan(
        run_id="inspect-run", created_at="2026-12-03T00:00:00+00:00", task=task, model=MODEL_ID,
        prompt_tag="triton-hopper", num_turns=4, service="test",
    )  # fmt: skip
    replies = [THINKING_REPLY, COMPILE_ERROR_REPLY, BAD_REPLY, GOOD_REPLY]
    with ScriptedOpenAIServer(MODEL_ID, replies) as server:
        model = make_model(MODEL_ID, model_host=server.host_port, retry=FAST_RETRY)
        run_trajectory(plan, root / "run", backend=VerdictBackend(), model=model)
    return root / "run"


def demo_run(root: Path) -> Path:
    """The bundled CUDA demo replayed into ``root/demo-run`` (three kernels, not executed)."""
    from mini_ptx_agent.demo import DEMO_DEFINITION, DEMO_MODEL_NAME, write_demo_trajectory
    from mini_ptx_agent.models.replay import ReplayModel
    from mini_ptx_agent.runs.directory import RunPlan
    from mini_ptx_agent.runs.launch import run_trajectory

    task = TaskConfig(definition=DEMO_DEFINITION, language="cuda", target_speedup=1.0)
    plan = RunPlan(
        run_id="demo-run", created_at="2026-12-03T00:00:00+00:00", task=task, model=DEMO_MODEL_NAME,
        prompt_tag="hopper-no-hint", num_turns=3, service="test",
    )  # fmt: skip
    replay = write_demo_trajectory("cuda", root / "demo.json")
    model = ReplayModel(path=replay, model_name=DEMO_MODEL_NAME, fallback=True)
    run_trajectory(plan, root / "demo-run", backend=VerdictBackend(), model=model)
    return root / "demo-run"


def experiment_dir(root: Path) -> Path:
    """An experiment under ``root/exp``: ``vector_add_f32`` x {good, broken} x 2 replicas, 3 turns each, run by
    the experiment runner except the last trajectory (pending); plan.json and turns.csv as the runner writes."""
    from mini_ptx_agent.experiments.config import ExperimentConfig
    from mini_ptx_agent.experiments.plan import LocalCatalog, expand
    from mini_ptx_agent.experiments.runner import ExperimentRunner, check_models
    from mini_ptx_agent.experiments.table import experiment_rows, write_turns
    from mini_ptx_agent.trajectory import write_json

    config = ExperimentConfig(
        name="inspect", definitions=["vector_add_f32"], workloads=1, languages=["triton"],
        prompt_tags=["triton-hopper"], models=[GOOD_MODEL, BROKEN_MODEL], replicas=2, num_turns=3,
        models_config={"retry": {"max_attempts": 1, "initial_backoff_s": 0.0, "request_timeout_s": 30}},
    )  # fmt: skip
    plan = expand(config, LocalCatalog(), name="inspect-exp")
    exp = root / "exp"
    exp.mkdir()
    write_json(exp / "plan.json", plan.model_dump(mode="json"))

    class Runner(ExperimentRunner):
        def make_backend(self) -> Any:
            return VerdictBackend()

    with ScriptedOpenAIServer(respond=RESPOND) as server:
        checked = check_models(config, server.host_port)
        runner = Runner(
            plan, exp, url="test", token=None, lanes=1, checked=checked, model_host=server.host_port
        )
        for planned in plan.trajectories[:3]:
            runner.run_one(planned)
    write_turns(experiment_rows(plan, exp), exp)
    return exp


def sft_rows() -> list[dict[str, Any]]:
    """Five SFT rows, one per way of marking the trained part, with provenance."""
    system = {"role": "system", "content": "You write Triton kernels for Hopper."}
    user = {"role": "user", "content": "Write vector_add_f32."}
    wrong = {"role": "assistant", "content": "```python\nz = x - y\n```"}
    fixed = {"role": "assistant", "content": "Fixed the sign.\n```python\nz = x + y\n```"}
    feedback = {"role": "user", "content": "INCORRECT_NUMERICAL on workload w1"}
    return [
        {  # a Fixit row: per-message flags, the fix trained
            "messages": [system, user, wrong | {"train": False}, feedback, fixed | {"train": True}],
            "provenance": {
                "pipeline": "fixit",
                "definition": "vector_add_f32",
                "trajectory": "t1",
                "turn": 3,
            },
        },
        {"messages": [system, user, fixed], "loss_mask": [0, 0, 1], "source": "kernelgen", "turn": 1},
        {"messages": [system, user, fixed], "loss_mask": "last_assistant", "source": "kernelgen"},
        {"messages": [system, user, fixed], "loss_mask": [0] * 40 + [1] * 12, "source": "tokenized"},
        {
            "messages": [
                system,
                {"role": "user", "content": [{"type": "text", "text": "parts joined"}]},
                fixed,
            ]
        },
    ]
