"""`fibserve serve --ray`: lanes as Ray actors on a real local cluster (two `ray start` nodes, CPU lanes).

One cluster and one Ray-backed server per module: a head node and a second node, each offering one CPU lane
(``fibserve_cpu_lane: 1``), and a plain ``--devices cpu`` server as the reference. The tests run in order:
results identical to the plain service (50 evaluations each); a cancel on a Ray lane ends its task and the
lane serves on; a killed lane actor and a killed node lose no task and run none twice
to completion; a clean shutdown leaves no Ray process. Without ``--ray`` Ray is never imported.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fibserve.api import TaskAnswer
from fibserve.client import FIBServeClient
from fibserve.serve import ServeSettings
from pydantic import ValidationError
from ray_cluster import RayCluster, alive, descendants
from serve_helpers import VECTOR_ADD_SMALL, ServerProcess, free_port, triton_add_solution

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

LANE = {"fibserve_cpu_lane": 1}
PYTHON_ADD = "def run(x, y, z):\n    z.copy_(x + y)\n"


def python_solution(name: str, body: str) -> dict:
    solution = triton_add_solution(name=name, body=body)
    solution["spec"]["language"] = "python"
    return solution


COMPARED = 50
"""Evaluations per service in the comparison (the issue's number)."""


def requests() -> list[dict]:
    """The comparison set of :data:`COMPARED` evaluations: 2 that run (PASSED, INCORRECT_NUMERICAL: each
    starts a sandbox worker, ~3 CPU-s here) and the rest candidates that do not parse (COMPILE_ERROR, no
    worker), so 50 stay within the suite's CPU budget; benchmarks/ray_lanes.py runs 50 real ones (on the
    H200: 50 CUDA evaluations, identical through Ray)."""
    real = [
        python_solution("right", PYTHON_ADD),
        python_solution("wrong", PYTHON_ADD.replace("x + y", "x + y + 1")),
    ]
    broken = [
        triton_add_solution(name=f"broken {i}", body=f"# variant {i}\ndef run(x, y, z:\n")
        for i in range(COMPARED - len(real))
    ]
    return real + broken


def summary(answer: TaskAnswer) -> tuple:
    """What must match between the services: the task's status and error, and per trace the status, the
    largest absolute error (4 digits: inputs are drawn afresh per evaluation, and the wrong candidate is off
    by exactly 1) and the matched ratio."""
    traces = []
    for trace in answer.traces or []:
        evaluation = trace.evaluation
        correctness = evaluation.correctness if evaluation else None
        traces.append(
            (
                trace.workload.uuid,
                evaluation.status.value if evaluation else None,
                None if correctness is None else round(correctness.max_absolute_error, 4),
                None if correctness is None else correctness.extra.get("matched_ratio"),
            )
        )
    return answer.status, answer.solution, answer.error, traces


def run_all(url: str, solutions: list[dict]) -> list[TaskAnswer]:
    with FIBServeClient(url) as client:
        with ThreadPoolExecutor(8) as pool:
            ids = list(
                pool.map(
                    lambda s: client.submit("evaluate", s, workload_uuids=[VECTOR_ADD_SMALL]).task_id,
                    solutions,
                )
            )
        return [client.wait(task_id, timeout=600) for task_id in ids]


def wait_for(check, what: str, timeout_s: float = 300.0, every_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out waiting for {what}")


def healthy_lanes(client: FIBServeClient) -> list:
    return [w for w in client.health().workers if w.healthy]


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    cluster = RayCluster()
    try:
        cluster.add_node(cpus=2, resources=LANE)
        cluster.add_node(cpus=2, resources=LANE)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def ray_server(cluster: RayCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = ServerProcess(
        tmp_path_factory.mktemp("ray") / "state", ["--ray", cluster.address, "--devices", "cpu"]
    )
    server.start(timeout_s=300)
    with FIBServeClient(server.url) as client:
        wait_for(lambda: len(healthy_lanes(client)) == 2, "two healthy Ray lanes")
    cluster.remember()
    yield server
    server.kill()


def test_without_ray_the_server_never_imports_ray() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from fibserve.cli import app\n"
        "import fibserve.serve.app, fibserve.serve.server, fibserve.serve.scheduler, fibserve.serve.work\n"
        "result = CliRunner().invoke(app, ['serve', '--help'])\n"
        "assert result.exit_code == 0 and '--ray' in result.output, result.output\n"
        "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_an_address_where_no_cluster_listens_is_refused_before_the_server_starts(tmp_path) -> None:
    fibserve = str(Path(sys.executable).with_name("fibserve"))
    port = free_port()
    result = subprocess.run(
        [fibserve, "serve", "--ray", f"127.0.0.1:{port}", "--devices", "cpu", "--state-dir", str(tmp_path / "s")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert f"no Ray cluster at '127.0.0.1:{port}'" in result.stderr and "Traceback" not in result.stderr
    help_text = subprocess.run(
        [fibserve, "serve", "--help"], capture_output=True, text=True, timeout=60, env=os.environ | {"COLUMNS": "200"}
    ).stdout  # fmt: skip
    assert "pip install 'fibserve[ray]'" in help_text  # the extra's brackets are not eaten as markup


def test_ray_settings_refuse_devices_the_cluster_cannot_honour() -> None:
    with pytest.raises(ValidationError, match="omit --devices, or give --devices cpu"):
        ServeSettings(ray_address="auto", devices=["cuda:0"])
    with pytest.raises(ValidationError, match="--ray needs an address"):
        ServeSettings(ray_address=" ")
    assert ServeSettings(ray_address="auto", devices=["cpu"]).devices == ["cpu"]


def test_evaluations_through_ray_match_the_plain_service(
    ray_server: ServerProcess, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with FIBServeClient(ray_server.url) as client:
        lanes = client.health().workers
    assert len({lane.node for lane in lanes}) == 2 and all(lane.pid for lane in lanes)
    assert all(re.fullmatch(r"[0-9.]+/[0-9a-f]{8}/cpu#0", lane.device) for lane in lanes), lanes
    through_ray = run_all(ray_server.url, requests())

    plain = ServerProcess(tmp_path_factory.mktemp("plain") / "state", ["--devices", "cpu"])
    plain.start()
    try:
        reference = run_all(plain.url, requests())
    finally:
        plain.kill()
    assert [summary(a) for a in through_ray] == [summary(a) for a in reference]
    statuses = [t[1] for a in through_ray for t in summary(a)[3]]
    assert statuses[:2] == ["PASSED", "INCORRECT_NUMERICAL"]
    assert set(statuses[2:]) == {"COMPILE_ERROR"}
    assert {a.device for a in through_ray} == {lane.device for lane in lanes}, "both nodes served"
    assert all(a.attempts == 1 for a in through_ray)


def test_a_cancel_on_a_ray_lane_ends_the_task_and_the_lane_serves_on(ray_server: ServerProcess) -> None:
    """The cancel is forwarded to the lane's actor, whose Evaluator sees it between phases (after the
    candidate's 5 s import here), as on a local lane."""
    slow = python_solution("to cancel", "import time\n\ntime.sleep(5)\n\n\n" + PYTHON_ADD)
    with FIBServeClient(ray_server.url) as client:
        task_id = client.submit("evaluate", slow, workload_uuids=[VECTOR_ADD_SMALL]).task_id
        wait_for(lambda: client.task(task_id).status == "running", "the task running on a Ray lane")
        client.cancel(task_id)
        answer = client.wait(task_id, timeout=120)
        after = client.wait(
            client.submit("evaluate", python_solution("after", PYTHON_ADD), workload_uuids=[VECTOR_ADD_SMALL])
            .task_id, timeout=300,
        )  # fmt: skip
    assert answer.status == "failed" and answer.error is not None and answer.error.code == "cancelled", answer
    assert after.status == "completed" and after.traces[0].evaluation.status.value == "PASSED"


def test_a_killed_actor_and_a_killed_node_lose_no_task_and_run_none_twice(
    cluster: RayCluster, ray_server: ServerProcess
) -> None:
    slow = "import time\n\ntime.sleep(4)\n\n\n" + PYTHON_ADD
    solutions = [python_solution("slow 0", slow), python_solution("slow 1", slow)]
    solutions += [
        triton_add_solution(name=f"queued {i}", body=f"# {i}\ndef run(x, y, z:\n") for i in range(6)
    ]
    with FIBServeClient(ray_server.url) as client:
        ids = [client.submit("evaluate", s, workload_uuids=[VECTOR_ADD_SMALL]).task_id for s in solutions]
        busy = wait_for(
            lambda: (lambda w: w if len(w) == 2 else None)([w for w in client.health().workers if w.busy]),
            "both lanes busy with the slow tasks",
        )
        cluster.remember()
        second_node = cluster.nodes[1]
        on_second = set(descendants(second_node.pid))
        (head_lane,) = [w for w in busy if w.pid not in on_second]
        os.kill(head_lane.pid, signal.SIGKILL)  # the head's lane: its actor process dies
        cluster.kill_node(second_node)
        answers = [client.wait(task_id, timeout=600) for task_id in ids]
        lanes_after = wait_for(lambda: healthy_lanes(client), "a fresh lane on the head")
    assert [a.status for a in answers] == ["completed"] * len(ids), [a.error for a in answers]
    assert [a.traces[0].evaluation.status.value for a in answers[:2]] == ["PASSED", "PASSED"]
    killed = set(ids[:2])  # the slow tasks both lanes were busy with (/health shows no ids without a token)
    assert {a.task_id for a in answers if a.attempts == 2} == killed
    assert all(a.attempts == 1 for a in answers if a.task_id not in killed)
    log = ray_server.log_path.read_text(errors="replace")
    for task_id in ids:  # recorded exactly once: one "completed" line per task
        assert len(re.findall(rf"task {task_id} completed", log)) == 1, task_id
    assert (
        len(lanes_after) == 1
        and lanes_after[0].node == head_lane.node
        and lanes_after[0].pid != head_lane.pid
    )


def test_clean_shutdown_leaves_no_ray_process(cluster: RayCluster, ray_server: ServerProcess) -> None:
    cluster.remember()
    assert ray_server.terminate() in (0, -15)  # uvicorn re-raises SIGTERM once it has shut down
    assert "Application shutdown complete" in ray_server.log()
    survivors = cluster.stop()
    assert survivors == []
    assert not [proc for proc in cluster.seen if alive(proc)]
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert str(cluster.temp_dir) not in ps
