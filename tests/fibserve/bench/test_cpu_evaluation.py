"""End to end on CPU: real sandbox workers, the Triton interpreter, the bundled float32 definition.

One Evaluator serves all tests in this module, as in the service: a failure of one candidate must not affect
the next evaluation.
"""

from __future__ import annotations

import time

import pytest
from fibserve.bench import Evaluator
from fibserve.trace import EvaluationStatus

pytestmark = pytest.mark.slow

DEFINITION = "vector_add_f32"


@pytest.fixture(scope="module")
def evaluator():
    with Evaluator("cpu") as ev:
        yield ev


@pytest.fixture(scope="module")
def vector_add(trace_set):
    definition = trace_set.definition(DEFINITION)
    workloads = trace_set.workloads_for(DEFINITION)
    small = sorted(workloads, key=lambda w: w.axes["N"])[:2]
    return definition, small


def _run(evaluator, vector_add, make_solution, file, **kw):
    definition, workloads = vector_add
    overrides = kw.pop("overrides", None)
    solution = make_solution(file, DEFINITION, **kw)
    return evaluator.evaluate(definition, solution, workloads, overrides=overrides)


def test_correct_triton_kernel_passes_without_a_gpu_speedup(evaluator, vector_add, make_solution):
    report = _run(evaluator, vector_add, make_solution, "add_correct.py")
    assert report.task_error is None, report.task_error
    assert report.executed and report.all_passed
    for trace in report.traces:
        ev = trace.evaluation
        assert ev.status is EvaluationStatus.PASSED
        assert ev.correctness.max_absolute_error == 0.0
        assert ev.correctness.extra["matched_ratio"] == 1.0
        perf = ev.performance
        assert (perf.latency_ms, perf.reference_latency_ms, perf.speedup_factor) == (None, None, None)
        assert ev.performance.extra["measured_on"] == "cpu" and ev.performance.extra["timed"] is False
        assert ev.environment.hardware == "cpu"
    assert any("CPU mode" in note for note in report.notes)


def test_wrong_kernel_is_incorrect_numerical_with_errors(evaluator, vector_add, make_solution):
    report = _run(evaluator, vector_add, make_solution, "add_wrong.py")
    ev = report.traces[0].evaluation
    assert ev.status is EvaluationStatus.INCORRECT_NUMERICAL
    assert ev.correctness.max_absolute_error > 0.1
    assert ev.correctness.extra["matched_ratio"] < 0.5
    assert report.task_error is None


def test_kernel_that_writes_nothing_is_caught_by_poisoning(evaluator, vector_add, make_solution):
    report = _run(evaluator, vector_add, make_solution, "add_writes_nothing.py")
    ev = report.traces[0].evaluation
    assert ev.status is EvaluationStatus.INCORRECT_NUMERICAL
    assert ev.correctness.extra["outputs_untouched"] == ["z"]
    assert "poison" in ev.log


def test_kernel_that_mutates_its_input_is_caught(evaluator, vector_add, make_solution):
    report = _run(evaluator, vector_add, make_solution, "add_mutates_input.py")
    ev = report.traces[0].evaluation
    assert ev.status is EvaluationStatus.INCORRECT_NUMERICAL
    assert ev.correctness.extra["input_mutated"] == ["x"]


def test_pointer_keyed_cache_is_caught_by_input_rotation(evaluator, vector_add, make_solution):
    report = _run(evaluator, vector_add, make_solution, "add_pointer_cache.py", language="python")
    ev = report.traces[0].evaluation
    assert ev.status is EvaluationStatus.INCORRECT_NUMERICAL
    assert ev.correctness.extra["input_set"] == 1, "set 0 is right, set 1 behind the same pointer is stale"


def test_raising_candidate_is_runtime_error_and_the_evaluator_keeps_working(
    evaluator, vector_add, make_solution
):
    report = _run(evaluator, vector_add, make_solution, "add_raises.py")
    assert report.task_error is None
    assert [t.evaluation.status for t in report.traces] == [EvaluationStatus.RUNTIME_ERROR] * 2
    log = report.traces[0].evaluation.log
    assert "deliberate failure" in log
    assert 'File "kernel.py", line 5, in run' in log and "worker.py" not in log  # the candidate's frames only
    assert _run(evaluator, vector_add, make_solution, "add_correct.py").all_passed


def test_infinite_loop_times_out_within_the_limit_and_the_worker_is_replaced(
    evaluator, vector_add, make_solution
):
    started_before = evaluator.pool.started_count
    t0 = time.monotonic()
    report = _run(
        evaluator, vector_add, make_solution, "add_hangs.py", overrides={"timeouts": {"correctness": 1}}
    )
    elapsed = time.monotonic() - t0
    statuses = [t.evaluation.status for t in report.traces]
    assert statuses == [EvaluationStatus.TIMEOUT] * 2
    assert (
        report.config.timeouts.correctness == 1 and report.config.origin["timeouts.correctness"] == "request"
    )
    assert any("worker replaced" in note for note in report.notes)
    assert evaluator.pool.started_count > started_before + 1
    # two workloads, each 1 s plus a (warm) worker start and load on a 2-core machine
    assert elapsed < 2 * 1 + 60
    assert _run(evaluator, vector_add, make_solution, "add_correct.py").all_passed


def test_value_returning_python_solution_runs_on_cpu(evaluator, vector_add, make_solution):
    report = _run(
        evaluator, vector_add, make_solution, "add_torch_returning.py", language="python", dps=False
    )
    assert report.all_passed, report.model_dump_json(indent=1)[:2000]


def test_solution_for_another_definition_is_a_task_error(evaluator, vector_add, make_solution):
    definition, workloads = vector_add
    other = make_solution("add_correct.py", "rmsnorm_f32")
    report = evaluator.evaluate(definition, other, workloads)
    assert "rmsnorm_f32" in report.task_error and not report.traces and not report.executed


def test_missing_entry_point_is_compile_error(evaluator, vector_add, make_solution):
    definition, workloads = vector_add
    solution = make_solution("add_correct.py", DEFINITION)
    solution = solution.model_copy(
        update={"spec": solution.spec.model_copy(update={"entry_point": "kernel.py::nope"})}
    )
    report = evaluator.evaluate(definition, solution, workloads)
    ev = report.traces[0].evaluation
    assert ev.status is EvaluationStatus.COMPILE_ERROR and "nope" in ev.log


def test_wrong_number_of_arguments_is_compile_error(evaluator, vector_add, make_solution):
    report = _run(evaluator, vector_add, make_solution, "add_torch_returning.py", language="python", dps=True)
    ev = report.traces[0].evaluation
    assert ev.status is EvaluationStatus.COMPILE_ERROR
    assert "takes 2 positional arguments but the definition passes 3" in ev.log


def test_bfloat16_triton_on_cpu_is_refused_with_a_reason(evaluator, trace_set, make_solution):
    definition = trace_set.definition("gemm_n128_k2048")
    workloads = trace_set.workloads_for("gemm_n128_k2048")[:1]
    report = evaluator.evaluate(definition, make_solution("add_correct.py", "gemm_n128_k2048"), workloads)
    assert report.task_error and "bfloat16" in report.task_error and "float32" in report.task_error
    assert not report.executed and not report.traces


def test_workload_of_another_definition_is_named(evaluator, vector_add, trace_set, make_solution):
    definition, _ = vector_add
    foreign = trace_set.workloads_for("rmsnorm_f32")[:1]
    report = evaluator.evaluate(definition, make_solution("add_correct.py", DEFINITION), foreign)
    assert foreign[0].uuid in report.task_error


def test_a_kernel_writing_zeros_under_a_lax_atol_is_caught_by_the_relative_norm(
    evaluator, vector_add, make_solution
):
    # atol 100 exceeds every output of x + y (randn inputs), so zeros pass elementwise: the workload is
    # near-constant and the relative-norm check decides
    report = _run(evaluator, vector_add, make_solution, "add_writes_zeros.py", overrides={"atol": 100.0})
    assert report.task_error is None, report.task_error
    ev = report.traces[0].evaluation
    assert ev.status is EvaluationStatus.INCORRECT_NUMERICAL, ev.log
    assert ev.correctness.extra["degenerate"] == {"z": "near_constant"}
    assert ev.correctness.extra["outputs"]["z"]["decided_by"] == "elementwise+relative_norm"
    assert "relative L2 error 1" in ev.log


def test_a_workload_whose_outputs_are_all_constant_is_refused_before_the_candidate_runs(
    evaluator, vector_add, make_solution
):
    report = _run(evaluator, vector_add, make_solution, "add_writes_zeros.py",
                  overrides={"atol": 100.0, "rtol": 100.0})  # fmt: skip
    assert not report.traces or all(t.evaluation is None for t in report.traces)
    assert "degenerate workload" in report.task_error and not report.executed
