"""Tasks through a real server and the real Evaluator (CPU mode): evaluation end to end, 50 concurrent
submissions, and no accepted task lost across SIGKILL or a graceful SIGTERM shutdown."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from fibserve.client import FIBServeClient
from fibserve.trace import EvaluationStatus
from serve_helpers import VECTOR_ADD_SMALL, triton_add_solution

pytestmark = pytest.mark.slow

PYTHON_ADD = "def run(x, y, z):\n    z.copy_(x + y)\n"


def python_add(name: str = "python add") -> dict:
    """A Python (destination passing) solution of vector_add_f32: correct, and cheap to run on CPU."""
    solution = triton_add_solution(name=name, body=PYTHON_ADD)
    solution["spec"]["language"] = "python"
    return solution


def slow_python_add(name: str) -> dict:
    """:func:`python_add` whose import takes 5 s, so a test can act while it surely runs (with a warm spare
    worker an ordinary evaluation can finish in under a second, before a cancel or a 1 s long poll)."""
    solution = python_add(name)
    solution["sources"][0]["content"] = "import time\n\ntime.sleep(5)\n\n\n" + PYTHON_ADD
    return solution


def broken(i: int) -> dict:
    """A Triton solution that does not parse: the Evaluator answers COMPILE_ERROR without starting a worker."""
    return triton_add_solution(name=f"broken {i}", body=f"# variant {i}\ndef run(x, y, z:\n")


def _wait_running(client: FIBServeClient, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if client.health().running:
            return
        time.sleep(0.05)
    raise AssertionError("no task started running")


def test_evaluate_a_float32_triton_solution_end_to_end_on_cpu(shared_server) -> None:
    with FIBServeClient(shared_server.url) as client:
        submitted = client.submit(
            "evaluate", triton_add_solution(name="triton add/v1"), workload_uuids=[VECTOR_ADD_SMALL]
        )
        answer = client.wait(submitted.task_id, timeout=240)
    assert submitted.normalized_solution_name == "triton_add_v1"
    assert answer.status == "completed", answer.error
    assert answer.kind == "evaluate" and answer.device == "cpu" and answer.executed is True
    assert answer.solution == "triton_add_v1" and answer.definition == "vector_add_f32"
    (trace,) = answer.traces or []
    assert trace.workload.uuid == VECTOR_ADD_SMALL and trace.solution == "triton_add_v1"
    assert trace.evaluation is not None and trace.evaluation.status is EvaluationStatus.PASSED
    assert trace.evaluation.correctness is not None and trace.evaluation.correctness.max_absolute_error == 0.0
    # CPU mode never presents a speedup: not measured is null, never 0.
    performance = trace.evaluation.performance
    assert performance is not None and performance.extra["timed"] is False
    assert (performance.latency_ms, performance.reference_latency_ms, performance.speedup_factor) == (
        None,
    ) * 3
    assert answer.config is not None and answer.config.atol >= 0
    assert answer.logs and "CPU mode" in answer.logs


def test_a_wrong_candidate_is_a_completed_task_with_its_status(shared_server) -> None:
    wrong = triton_add_solution(name="wrong", body=PYTHON_ADD.replace("x + y", "x - y"))
    wrong["spec"]["language"] = "python"
    with FIBServeClient(shared_server.url) as client:
        answer = client.evaluate(wrong, [VECTOR_ADD_SMALL], wait_timeout=240, atol=0.0, rtol=0.0)
    assert answer.status == "completed" and answer.error is None
    (trace,) = answer.traces or []
    assert trace.evaluation is not None and trace.evaluation.status is EvaluationStatus.INCORRECT_NUMERICAL
    assert answer.config is not None and answer.config.origin.get("atol") == "request"


def test_fifty_concurrent_submissions_all_complete(start_server) -> None:
    """48 cheap evaluations (COMPILE_ERROR) and 2 real ones, submitted from 50 threads at once, plus
    concurrent /compile calls of a Python solution; every task ends completed with the right status."""
    server = start_server("--devices", "cpu")
    solutions = [python_add(f"good {i}") if i in (10, 40) else broken(i) for i in range(50)]
    with FIBServeClient(server.url, timeout=60) as client, ThreadPoolExecutor(max_workers=50) as pool:
        started = time.monotonic()
        submitted = list(
            pool.map(lambda s: client.submit("evaluate", s, workload_uuids=[VECTOR_ADD_SMALL]), solutions)
        )
        compiled = list(pool.map(lambda i: client.compile(python_add(f"compile {i}")), range(10)))
        ids = [s.task_id for s in submitted]
        assert len(set(ids)) == 50
        answers = client.batch(ids, timeout=0)
        while any(a.status not in ("completed", "failed") for a in answers):
            assert time.monotonic() - started < 240, [a.status for a in answers]
            answers = client.batch(ids, timeout=30)
        health = client.health()
    assert [a.task_id for a in answers] == ids  # batch keeps the order
    for solution, answer in zip(solutions, answers, strict=True):
        assert answer.status == "completed", answer.error
        status = answer.traces[0].evaluation.status if answer.traces and answer.traces[0].evaluation else None
        expected = (
            EvaluationStatus.PASSED if solution["name"].startswith("good") else EvaluationStatus.COMPILE_ERROR
        )
        assert status is expected, (solution["name"], answer.traces)
    assert all(_analysis_ok(c) for c in compiled)
    assert health.queue_size == 0 and health.running == 0


def _analysis_ok(analysis: object) -> bool:
    data = analysis.model_dump(mode="json") if hasattr(analysis, "model_dump") else analysis
    return isinstance(data, dict) and data.get("definition") == "vector_add_f32"


def test_no_accepted_task_is_lost_when_the_server_is_killed_mid_queue(start_server, tmp_path) -> None:
    state = tmp_path / "kill-state"
    server = start_server("--devices", "cpu", state_dir=state)
    with FIBServeClient(server.url) as client:
        first = client.submit("evaluate", python_add("first"), workload_uuids=[VECTOR_ADD_SMALL]).task_id
        rest = [
            client.submit("evaluate", broken(i), workload_uuids=[VECTOR_ADD_SMALL]).task_id for i in range(8)
        ]
        _wait_running(client)
    server.kill()  # SIGKILL: no shutdown code runs
    with pytest.raises(httpx.TransportError):
        httpx.get(server.url + "/health", timeout=2)
    server.start()
    with FIBServeClient(server.url) as client:
        answers = [client.wait(task_id, timeout=240) for task_id in [first, *rest]]
    assert all(a.status == "completed" for a in answers), [(a.status, a.error) for a in answers]
    assert answers[0].traces and answers[0].traces[0].evaluation.status is EvaluationStatus.PASSED
    assert answers[0].attempts >= 1
    assert all(
        a.traces and a.traces[0].evaluation.status is EvaluationStatus.COMPILE_ERROR for a in answers[1:]
    )


def test_graceful_shutdown_requeues_running_work_and_finished_answers_survive(start_server, tmp_path) -> None:
    state = tmp_path / "term-state"
    server = start_server("--devices", "cpu", state_dir=state)
    with FIBServeClient(server.url) as client:
        done = client.evaluate(broken(99), [VECTOR_ADD_SMALL], wait_timeout=120)
        assert done.status == "completed"
        running = client.submit(
            "evaluate", python_add("interrupted"), workload_uuids=[VECTOR_ADD_SMALL]
        ).task_id
        _wait_running(client)
    # uvicorn re-raises SIGTERM after its graceful shutdown, so the status is -15 (or 0 on older versions).
    assert server.terminate() in (0, -15)
    assert "shutdown: re-queued running tasks" in server.log()
    server.start()
    with FIBServeClient(server.url) as client:
        again = client.task(done.task_id)
        answer = client.wait(running, timeout=240)
    assert again.status == "completed" and again.traces == done.traces  # completed answers still answer
    assert answer.status == "completed" and answer.attempts == 2  # re-queued by the shutdown, run again


def test_cancel_stops_a_running_evaluation(shared_server) -> None:
    with FIBServeClient(shared_server.url) as client:
        task_id = client.submit(
            "evaluate", slow_python_add("to cancel"), workload_uuids=[VECTOR_ADD_SMALL]
        ).task_id
        _wait_running(client)
        client.cancel(task_id)
        answer = client.wait(task_id, timeout=120)
    # The evaluator reports progress between phases, so the cancel lands after the load.
    assert answer.status == "failed", answer.traces
    assert answer.error is not None and answer.error.code == "cancelled"


def test_long_polls_return_at_the_deadline_or_as_soon_as_the_task_finishes(shared_server) -> None:
    with FIBServeClient(shared_server.url) as client:
        slow = client.submit("evaluate", slow_python_add("slow"), workload_uuids=[VECTOR_ADD_SMALL]).task_id
        fast = client.submit("evaluate", broken(7), workload_uuids=[VECTOR_ADD_SMALL]).task_id
        started = time.monotonic()
        early = client.task(slow, timeout=1.0)
        waited = time.monotonic() - started
        assert early.status in ("pending", "running") and 0.9 <= waited < 5
        started = time.monotonic()
        done = client.task(fast, timeout=110)  # queued behind `slow`: answers when it finishes, not at 110 s
        assert done.status == "completed" and time.monotonic() - started < 100
        assert client.task(slow).status == "completed"  # one lane: `slow` ran first
