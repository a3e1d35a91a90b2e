"""The candidate attacks the trusted side through what it leaves behind, against a real `fibserve serve`.

The sandbox holds the candidate in; these candidates instead prepare traps for the *service* (docs/security.md,
"What the candidate leaves behind"): symbolic links where the service used to open the buffers it shares
with the worker, and truncation of those buffers while the service has them mapped. The source policy is
switched off by the operator config, so each attack reaches the trusted side's defences themselves.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fibserve.client import FIBServeClient
from serve_helpers import VECTOR_ADD_SMALL, ServerProcess, triton_add_solution

pytestmark = pytest.mark.slow

VECTOR_ADD_LARGE = "55c949d1-0b81-5fe4-ad11-654f2cdd6637"
"""The N=65536 workload of ``vector_add_f32``: a second workload, whose buffers are made after the import."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("trusted-side")
    config = root / "no-policy.yaml"
    config.write_text("defaults:\n  enforce_source_policy: false\n")
    server = ServerProcess(root / "state", ["--devices", "cpu"], env={"FIBSERVE_EVAL_CONFIG": str(config)})
    server.start()
    yield server
    server.kill()


def _python(name: str, body: str) -> dict:
    solution = triton_add_solution(name, body)
    solution["spec"]["language"] = "python"
    return solution


LINKS = """import os

VICTIM = {victim!r}
MISSING = {missing!r}
# Every name the service ever used for a shared buffer or a handed-over build product in this /tmp.
for slot in range(4):
    for direction in ("in", "out"):
        for name in ("x", "y", "z"):
            target = VICTIM if name != "z" else MISSING
            path = f"/tmp/buf-{{slot}}-{{direction}}-{{name}}.bin"
            if not os.path.lexists(path):
                os.symlink(target, path)


def run(x, y, z):
    z.copy_(x + y)
"""


def test_links_planted_by_the_candidate_lead_the_service_nowhere(
    server: ServerProcess, tmp_path: Path
) -> None:
    """Before: the service created and truncated its CPU buffer files through ``/proc/<pid>/root/tmp``, so
    links planted there at import made it write input tensors into any host file (the task store
    included). Now buffers are memfds the service made, and no path in the worker is ever opened."""
    victim = tmp_path / "precious.sqlite3"
    victim.write_bytes(b"precious data" * 100)
    missing = tmp_path / "created-by-the-service"
    body = LINKS.format(victim=str(victim), missing=str(missing))
    with FIBServeClient(server.url) as client:
        answer = client.wait(
            client.submit_evaluate(_python("plants links", body), [VECTOR_ADD_SMALL, VECTOR_ADD_LARGE]),
            timeout=300,
        )
    assert answer.status == "completed", answer.error
    assert [t.evaluation.status.value for t in answer.traces] == ["PASSED", "PASSED"]
    assert victim.read_bytes() == b"precious data" * 100
    assert not missing.exists()


TRUNCATE = """import glob
import os


def run(x, y, z):
    z.copy_(x + y)
    # Shrink every buffer the service may have mapped: by the names it used to give them, by every open
    # descriptor, and through /proc/self/map_files (the memfds this worker mapped).
    for path in glob.glob("/tmp/buf-*.bin"):
        os.truncate(path, 0)
    for fd in os.listdir("/proc/self/fd"):
        try:
            os.ftruncate(int(fd), 0)
        except OSError:
            pass
    for entry in os.listdir("/proc/self/map_files"):
        try:
            with open(f"/proc/self/map_files/{entry}", "r+b") as handle:
                handle.truncate(0)
        except OSError:
            pass
"""


def test_buffers_truncated_by_the_candidate_cannot_kill_the_service(server: ServerProcess) -> None:
    """Before: the service mapped the same tmpfs files as the worker, and a candidate that truncated them
    after writing its outputs killed the whole service with SIGBUS (exit 135) when it read them. Now the
    service's memfds are size-sealed: truncation fails, and the service answers and serves on."""
    with FIBServeClient(server.url) as client:
        answer = client.wait(
            client.submit_evaluate(_python("truncates", TRUNCATE), [VECTOR_ADD_SMALL]), timeout=300
        )
        honest = client.wait(client.submit_evaluate(triton_add_solution(), [VECTOR_ADD_SMALL]), timeout=300)
    assert server.proc is not None and server.proc.poll() is None, server.log()
    assert answer.status == "completed", answer.error
    assert answer.traces[0].evaluation.status.value == "PASSED"  # nothing shrank: the outputs stayed readable
    assert honest.status == "completed" and honest.traces[0].evaluation.status.value == "PASSED"
    assert httpx.get(server.url + "/health", timeout=10).status_code == 200


SLEEPS_IN_ITS_CALL = "import time\n\n\ndef run(x, y, z):\n    time.sleep(120)\n"
SLEEPS_AT_IMPORT = "import time\n\ntime.sleep(120)\n\n\ndef run(x, y, z):\n    z.copy_(x + y)\n"


@pytest.mark.parametrize(
    "source",
    [SLEEPS_IN_ITS_CALL, SLEEPS_AT_IMPORT],
    ids=["in its call", "while the worker loads it"],
)
def test_a_cancel_stops_a_candidate_that_is_still_running(server: ServerProcess, source: str) -> None:
    """Before: a cancel flagged the task and waited for the candidate's call to return (up to its 60 s
    correctness limit), and one still importing the candidate for the load's limit (53 s seen). Now the
    evaluation's workers are killed at once, the one loading the candidate included."""
    import time

    with FIBServeClient(server.url) as client:
        task_id = client.submit_evaluate(_python("sleeps", source), [VECTOR_ADD_SMALL])
        deadline = time.monotonic() + 120
        while client.task(task_id).status != "running" and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(12)  # the worker has started and is sleeping in the candidate's import or call now
        started = time.monotonic()
        client.cancel(task_id)
        answer = client.wait(task_id, timeout=120)
        took = time.monotonic() - started
    assert answer.status == "failed" and answer.error is not None and answer.error.code == "cancelled"
    assert took < 15, f"the cancel took {took:.1f} s"


def test_a_timeout_beyond_the_servers_limit_is_refused(server: ServerProcess) -> None:
    body = {"solution": triton_add_solution(), "workload_uuids": [VECTOR_ADD_SMALL], "timeout": 3600}
    answer = httpx.post(server.url + "/evaluate", json=body, timeout=30)
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert (
        error["code"] == "timeout_too_long"
        and "600 s" in error["message"]
        and "--max-timeout" in error["message"]
    )
    accepted = httpx.post(server.url + "/evaluate", json={**body, "timeout": 60}, timeout=30)
    assert accepted.status_code == 202


TOKEN = "fibserve-trusted-side-token-9c1e"


def test_health_names_running_tasks_only_to_a_request_with_the_token(start_server, tmp_path: Path) -> None:
    """A task id is a capability (read the answer, cancel the task): the unauthenticated /health used to list
    every running one."""
    import time

    for args in ((), ("--token", TOKEN)):
        server = start_server("--devices", "cpu", *args, state_dir=tmp_path / f"state{len(args)}")
        with FIBServeClient(server.url, token=TOKEN if args else None) as client:
            task_id = client.submit_evaluate(_python("sleeps", SLEEPS_IN_ITS_CALL), [VECTOR_ADD_SMALL])
            deadline, seen = time.monotonic() + 120, {}
            while time.monotonic() < deadline and len(seen) < 2:
                for name, headers in (
                    ("anonymous", {}),
                    ("with the token", {"Authorization": f"Bearer {TOKEN}"}),
                ):
                    workers = httpx.get(server.url + "/health", headers=headers, timeout=10).json()["workers"]
                    for worker in (w for w in workers if w["busy"]):
                        seen[name] = worker["task_id"]
                time.sleep(0.2)
            client.cancel(task_id)
        server.kill()
        expected = {"anonymous": None, "with the token": task_id if args else None}
        assert seen == expected, (args, seen)
