"""A retired worker's files are removed from the host's /dev/shm by what the kernel says, never by what the
worker shows (:mod:`fibserve.bench.worker.shm_cleanup`).

A GPU worker shares the host's /dev/shm; a CPU worker has its own. The cleanup used to match the name and
inode a worker's /proc showed against the host's /dev/shm, so a CPU worker that made a file of the host file's
name in its private /dev/shm, and stepped its tmpfs's inode counter to the host file's number, got the host
file unlinked.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fibserve.bench import Evaluator
from fibserve.bench.worker.shm_cleanup import held_files, remove_left_behind, snapshot
from fibserve.trace import Solution

SHM = Path("/dev/shm")
needs_shm = pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm on this machine")


@pytest.fixture
def shm_files():
    """Factory for files in the host's /dev/shm, removed afterwards."""
    made: list[Path] = []

    def make(name: str, data: bytes = b"x") -> Path:
        path = SHM / name
        path.write_bytes(data)
        made.append(path)
        return path

    yield make
    for path in made:
        path.unlink(missing_ok=True)


@needs_shm
def test_only_files_made_after_the_start_and_still_the_same_are_removed(shm_files) -> None:
    tag = os.getpid()
    before = shm_files(f"torch_{tag}_before")  # existed when the worker started: someone else's
    existed = snapshot()
    made = shm_files(f"torch_{tag}_made")
    replaced = shm_files(f"cuda.shm.{tag}.replaced")
    foreign = shm_files(f"fibserve-{tag}-not-a-driver-name")
    with open(before, "rb"), open(made, "rb"), open(replaced, "rb"), open(foreign, "rb"):
        held = held_files([os.getpid()])
    assert set(held.values()) >= {before.name, made.name, replaced.name, foreign.name}
    replaced.unlink()
    replaced.write_bytes(b"a new file under the same name belongs to someone else now")
    live = {identity for identity, name in held.items() if name == made.name}
    assert remove_left_behind(held, existed, keep=live) == []  # a live worker holds it
    assert remove_left_behind(held, existed) == [made.name]
    assert before.exists() and replaced.exists() and foreign.exists() and not made.exists()


@needs_shm
def test_a_held_file_already_unlinked_is_not_listed(shm_files) -> None:
    """A POSIX semaphore (``sem.*``) is unlinked while held: /proc says ``(deleted)`` and nothing is left to remove
    (a CI run listed one a multiprocessing test had left in the process)."""
    gone = shm_files(f"torch_{os.getpid()}_unlinked")
    with open(gone, "rb"):
        gone.unlink()
        assert gone.name not in held_files([os.getpid()]).values()


STEP_TO_HOST_INODE = """import os

TARGET_NAME = {name!r}
TARGET_INODE = {inode}
HELD = []


def run(x, y, z):
    z.copy_(x + y)
    # Step this private tmpfs's inode counter up to the host file's number, under the host file's name.
    for i in range(100000):
        path = f"/dev/shm/step-{{i}}"
        with open(path, "wb"):
            pass
        inode = os.stat(path).st_ino
        os.unlink(path)
        if inode + 1 >= TARGET_INODE:
            break
    handle = open("/dev/shm/" + TARGET_NAME, "wb")
    HELD.append(handle)
    raise RuntimeError(f"holding {{TARGET_NAME}} as inode {{os.fstat(handle.fileno()).st_ino}} of {{TARGET_INODE}}")
"""


@needs_shm
@pytest.mark.slow
def test_a_cpu_worker_cannot_get_a_host_file_removed_by_copying_its_name_and_inode(
    trace_set, shm_files, tmp_path: Path
) -> None:
    for i in range(64):  # a host inode number the worker's fresh tmpfs can reach from below
        shm_files(f"fibserve-{os.getpid()}-pad-{i}")
    victim = shm_files(f"torch_{os.getpid()}_victim", b"another process's segment")
    config = tmp_path / "no-policy.yaml"
    config.write_text("defaults:\n  enforce_source_policy: false\n")
    solution = Solution.model_validate(
        {
            "name": "steps its inode counter",
            "definition": "vector_add_f32",
            "author": "tests",
            "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "kernel.py::run"},
            "sources": [
                {
                    "path": "kernel.py",
                    "content": STEP_TO_HOST_INODE.format(name=victim.name, inode=victim.stat().st_ino),
                }
            ],
        }
    )
    definition = trace_set.definition("vector_add_f32")
    workload = min(trace_set.workloads_for("vector_add_f32"), key=lambda w: w.axes["N"])
    with Evaluator("cpu", warm_spare=False, config_path=config) as evaluator:
        report = evaluator.evaluate(definition, solution, [workload])
    inode = victim.stat().st_ino
    assert (
        f"holding {victim.name} as inode {inode} of {inode}" in report.traces[0].evaluation.log
    )  # the attack's setup
    assert victim.exists() and victim.read_bytes() == b"another process's segment"
