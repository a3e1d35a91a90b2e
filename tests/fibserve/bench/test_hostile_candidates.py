"""The attacks of issue 14, made by candidates through the Evaluator on CPU, each failing in the sandbox.

``kernels/hostile_probe.py`` tries every attack from inside its worker against the bait of
``sandbox_probes.planted`` and raises with what it found (so anything it could read comes back in its trace
log, as in the issue); one evaluation serves the first tests, each asserting one attack. The source policy is switched off for it: the sandbox must hold on its own. The
limit tests run candidates that each exceed one limit of a second Evaluator with small limits.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fibserve.bench import Evaluator
from fibserve.sandbox import Limits
from fibserve.trace import EvaluationStatus, Solution
from sandbox_probes import escaped_writes, findings_of, planted, python_probe, wait_until_gone

pytestmark = pytest.mark.slow

DEFINITION = "vector_add_f32"
MiB = 1 << 20


@pytest.fixture(scope="module")
def no_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An operator config that switches the source policy off (only an operator can)."""
    path = tmp_path_factory.mktemp("config") / "no-policy.yaml"
    path.write_text("defaults:\n  enforce_source_policy: false\n")
    return path


def _python(name: str, source: str) -> Solution:
    return Solution.model_validate(
        {
            "name": name,
            "definition": DEFINITION,
            "author": "fibserve tests",
            "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "kernel.py::run"},
            "sources": [{"path": "kernel.py", "content": source}],
        }
    )


@pytest.fixture(scope="module")
def vector_add(trace_set):
    definition = trace_set.definition(DEFINITION)
    return definition, sorted(trace_set.workloads_for(DEFINITION), key=lambda w: w.axes["N"])[:1]


@pytest.fixture(scope="module")
def attack(vector_add, no_policy: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Plant the bait (``sandbox_probes.planted``) and evaluate the hostile probe once."""
    definition, workloads = vector_add
    with planted(tmp_path_factory.mktemp("attack")) as bait:
        with Evaluator("cpu", warm_spare=False, config_path=no_policy) as evaluator:
            report = evaluator.evaluate(definition, _python("hostile", python_probe(bait)), workloads)
        orphans = wait_until_gone(bait.marker)
        written = bait.written()
    findings = findings_of(report.traces[0].evaluation.log)
    return {
        "report": report,
        "findings": findings,
        "token": bait.token,
        "orphans": orphans,
        "written": written,
    }


def test_the_probe_ran_inside_the_sandbox(attack: dict) -> None:
    assert attack["report"].sandbox == "bwrap"
    assert attack["report"].traces[0].evaluation.status is EvaluationStatus.RUNTIME_ERROR


def test_etc_shadow_is_not_readable(attack: dict) -> None:
    assert attack["findings"]["readable"]["/etc/shadow"] is False


def test_no_host_process_is_visible(attack: dict) -> None:
    """Only its sandbox's: bubblewrap's init, the zygote it was forked from and the zygote's other children (docs/
    security.md, "Workers forked from a zygote"); not the test process, its server or any other host process."""
    commands = attack["findings"]["processes"]
    ours = [c for c in commands if c.split()[0].endswith("bwrap") or "fibserve.bench.worker.zygote" in c]
    assert commands and ours == commands, commands


def test_the_servers_token_and_the_agents_keys_cannot_be_read(attack: dict) -> None:
    assert attack["findings"]["token"] == [] and attack["findings"]["environment"] is False
    assert attack["token"] not in attack["report"].model_dump_json()


def test_the_checkout_the_state_dir_and_the_build_cache_are_not_there(attack: dict) -> None:
    found = attack["findings"]
    assert not any(found["readable"].values()) and not any(found["exists"].values()), found
    assert escaped_writes(found["writable"]) == [] and attack["written"] == []


def test_no_network_not_even_loopback(attack: dict) -> None:
    assert attack["findings"]["network"] is False


def test_the_hosts_dev_shm_is_not_shared_with_a_cpu_worker(attack: dict) -> None:
    shm = next(p for p in attack["findings"]["readable"] if p.startswith("/dev/shm/"))
    assert attack["findings"]["readable"][shm] is False  # the host's file is not in its /dev/shm


def test_an_orphan_from_a_setsid_double_fork_dies_with_the_worker(attack: dict) -> None:
    assert attack["orphans"] == []


def test_the_worker_runs_as_an_unprivileged_uid(attack: dict) -> None:
    assert attack["findings"]["uid"] == 65534


LIMITED = Limits(
    memory_bytes=768 * MiB, processes=128, file_bytes=32 * MiB, disk_bytes=256 * MiB, output_bytes=1 * MiB
)

OVER_THE_LIMIT = {
    "memory": "def run(x, y, z):\n    hog = bytearray(3 << 30)\n    z.copy_(x + y)\n",
    "processes": (
        "import os, time\n"
        "def run(x, y, z):\n"
        "    for _ in range(400):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "    z.copy_(x + y)\n"
    ),
    "file_size": "def run(x, y, z):\n    open('/tmp/big', 'wb').write(b'x' * (64 << 20))\n    z.copy_(x + y)\n",
    "output": "import sys\ndef run(x, y, z):\n    while True:\n        sys.stdout.write('x' * 65536)\n",
}


@pytest.fixture(scope="module")
def limited(no_policy: Path):
    with Evaluator("cpu", limits=LIMITED, config_path=no_policy) as evaluator:
        yield evaluator


@pytest.mark.parametrize("limit", list(OVER_THE_LIMIT))
def test_a_candidate_over_a_limit_gets_a_status_naming_it(limited, vector_add, limit: str) -> None:
    definition, workloads = vector_add
    report = limited.evaluate(definition, _python(limit, OVER_THE_LIMIT[limit]), workloads)
    evaluation = report.traces[0].evaluation
    assert evaluation.status is EvaluationStatus.RUNTIME_ERROR, evaluation.log[:500]
    assert evaluation.log.startswith(f"limit exceeded: {limit} ("), evaluation.log[:500]
    assert report.limits_hit[workloads[0].uuid].startswith(f"limit exceeded: {limit}")
    assert report.task_error is None


def test_running_out_of_cpu_time_is_a_timeout_naming_the_limit() -> None:
    from fibserve.bench.failures import limit_failure
    from fibserve.sandbox import LimitHit, LimitName

    failure = limit_failure(LimitHit(LimitName.CPU_TIME, "10 CPU s per process"), "correctness call", "")
    assert failure.status is EvaluationStatus.TIMEOUT and failure.log.startswith("limit exceeded: cpu_time")
