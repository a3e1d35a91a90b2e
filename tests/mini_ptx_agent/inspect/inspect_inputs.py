"""Inputs for the inspector's tests, made by the real agent and the real experiment runner.

- :func:`agent_run`: a run directory of ``ptxbench run``'s layout, written by the kernel agent talking HTTP to
  the scripted model endpoint (tests/mini_ptx_agent/agent/scripted_model.py), four turns: a reply with its
  reasoning in a ``<think>`` block and no kernel (format error), a kernel that does not compile, a wrong one,
  then a correct one timed on an "H200" with evaluator notes;
- :func:`demo_run`: the bundled CUDA demo trajectory replayed (flagged ``demo``), every kernel built but not
  executed, as without a GPU;
- :func:`experiment_dir`: an experiment of four trajectories (two scripted models x two replicas) of which the
  experiment runner ran three, the fourth left pending, with its plan.json and turns.csv;
- :func:`sft_datasets`: the Fixit and KernelGen SFT datasets (``sft.jsonl`` and ``sft.parquet``) that the data
  pipeline builds from that experiment: its own mining, model calls to the scripted repair and reasoning models
  (tests/mini_ptx_agent/data/scripted_teachers.py), pairs and SFT writer; one fix carries the evaluator's
  roofline flag and is kept with it (``include_flagged``).

Evaluation is :class:`VerdictBackend`: the service stands in, answering each kernel from its source, as
FIBServe's result objects (``eval_reports``), so what is tested is what the agent, the runner and the data
pipeline wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval_reports import report
from mini_ptx_agent.environment.report import KernelReport, StaticAnalysis
from mini_ptx_agent.environment.verdict import build_report
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
        checked = check_models(plan, server.host_port)
        runner = Runner(
            plan, exp, url="test", token=None, lanes=1, checked=checked, model_host=server.host_port
        )
        for planned in plan.trajectories[:3]:
            runner.run_one(planned)
    write_turns(experiment_rows(plan, exp), exp)
    return exp


def sft_datasets(root: Path, experiment: Path) -> dict[str, Path]:
    """The data pipeline's SFT datasets of ``experiment`` (:func:`experiment_dir`) under ``root``: ``fixit`` (two
    rows: the broken model's kernel that does not compile and its wrong one, each repaired by
    ``scripted/repair``; the wrong one's fix flagged ``implausible`` and kept) and ``kernelgen`` (one row, the
    good model's kernel with ``scripted/reasoning``'s reasoning). Returns each dataset's directory.

    The repair step's model call, journal and ``repairs.jsonl`` are the pipeline's; its evaluation is
    :class:`VerdictBackend` in place of the FIBServe that ``repair_failures`` starts (seconds, not tens).
    """
    from mini_ptx_agent.data.calls import Journal, call_model
    from mini_ptx_agent.data.flags import kernel_flags
    from mini_ptx_agent.data.mining import FAILURES_FILE, FailureRecord, mine_failures, mine_kernels
    from mini_ptx_agent.data.pairs import make_pairs
    from mini_ptx_agent.data.reasoning import write_reasoning
    from mini_ptx_agent.data.records import read_jsonl
    from mini_ptx_agent.data.repair import REPAIRS_FILE, RepairEntry, repair_messages
    from mini_ptx_agent.data.sft import build_sft
    from mini_ptx_agent.extraction import extract_kernel
    from mini_ptx_agent.models import make_model
    from scripted_teachers import REASONING_MODEL, REPAIR_MODEL, TEACHERS

    mine_failures([experiment], root / "failures")
    mine_kernels([experiment], root / "kernels")
    failures = read_jsonl(root / "failures" / FAILURES_FILE, FailureRecord)
    journal = Journal(root / "repairs")
    with ScriptedOpenAIServer(respond=TEACHERS) as server:
        repairer = make_model(REPAIR_MODEL, model_host=server.host_port, retry=FAST_RETRY)
        for failure in failures:
            call = call_model(repairer, repair_messages(failure))
            kernel = extract_kernel(call.content, failure.task.language).source
            solution = failure.task.solution(kernel, name=f"fixit-{failure.id}", author=REPAIR_MODEL)
            report = VerdictBackend().evaluate(solution, failure.task)
            if failure.provenance.failure_class == "incorrect":  # as FIBServe flags a time under the roofline
                report.traces[0].evaluation.correctness.extra = {"plausibility": {
                    "device_model": "H200", "floor_ms": 0.01, "latency_ms": 0.001, "flagged": True,
                }}  # fmt: skip
            entry = RepairEntry(
                failure=failure, call=call, kernel=kernel, kernel_hash=solution.hash(), report=report,
                flags=kernel_flags(report),
            )  # fmt: skip
            journal.save(failure.id, entry)
        write_reasoning(
            root / "kernels", root / "reasoning", model=REASONING_MODEL, model_host=server.host_port
        )
    journal.collect([f.id for f in failures], RepairEntry, root / "repairs" / REPAIRS_FILE)
    make_pairs(root / "repairs", root / "pairs")
    build_sft("fixit", root / "pairs", root / "fixit", include_flagged=True)
    build_sft("kernelgen", root / "reasoning", root / "kernelgen")
    return {"fixit": root / "fixit", "kernelgen": root / "kernelgen"}
