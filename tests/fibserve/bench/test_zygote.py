"""Workers forked from one warm zygote are as isolated from each other as fresh sandboxes were.

Each worker used to be a fresh bubblewrap sandbox and a fresh Python; now they are forked from one process that
imported torch once (:mod:`fibserve.bench.worker.zygote`). What the fork shares must not carry anything from one
candidate to the next, and a live worker must not reach its siblings or the zygote: a candidate that could write
into the zygote's memory would run inside every later worker, the reference's timing twin included.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from fibserve.bench import Evaluator
from fibserve.bench.worker import forking
from fibserve.sandbox import status
from fibserve.trace import EvaluationStatus, Solution
from sandbox_probes import wait_until_gone

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(status().mode != "bwrap", reason="worker isolation needs the bubblewrap sandbox"),
]

POISON = """import os, sys
import torch

open("/tmp/fibserve-poison", "w").write("left by the last candidate")
open("/dev/shm/fibserve-poison", "w").write("left by the last candidate")
os.environ["FIBSERVE_POISON"] = "1"
sys.modules["fibserve_poison"] = sys
torch.fibserve_poison = True
torch.add = lambda *args, **kwargs: "poisoned"


def run(x, y, z):
    z.copy_(x + y)
"""

FINDS_POISON = """import os, sys
import torch

found = [
    what
    for what, there in {
        "/tmp file": os.path.exists("/tmp/fibserve-poison"),
        "/dev/shm file": os.path.exists("/dev/shm/fibserve-poison"),
        "environment": "FIBSERVE_POISON" in os.environ,
        "sys.modules": "fibserve_poison" in sys.modules,
        "torch attribute": hasattr(torch, "fibserve_poison"),
        "torch.add": not isinstance(torch.add(torch.ones(1), 1), torch.Tensor),
    }.items()
    if there
]
if found:
    raise RuntimeError(f"ISOLATION BROKEN: the last candidate left {found}")


def run(x, y, z):
    z.copy_(x + y)
"""

REACHES_OUT = """import os, signal

me = os.readlink("/proc/self")
seen, reached = [], []
for name in os.listdir("/proc"):
    if not name.isdigit() or name == me:
        continue
    try:
        with open(f"/proc/{name}/cmdline", "rb") as handle:
            command = handle.read(80).replace(b"\\0", b" ").decode(errors="replace")
        with open(f"/proc/{name}/stat") as handle:
            parent = handle.read().rsplit(")", 1)[1].split()[1]
    except OSError:
        continue
    seen.append(command)
    for what in ("root", "cwd"):  # the zygote's /tmp (the gate kernel's seed among it) through its root or cwd
        try:
            os.listdir(f"/proc/{name}/{what}/")
            reached.append(f"{name}/{what} ({command!r})")
        except OSError:
            pass
    for what in ("mem", "environ", "maps"):
        try:
            handle = os.open(f"/proc/{name}/{what}", os.O_RDONLY)
        except OSError:
            continue
        try:  # a process that exited meanwhile has no memory: its files open (the kernel checks nothing) and read
            reached_it = bool(os.read(handle, 64))  # empty; a live one's maps and environ have lines, its mem
        except OSError:  # fails at address 0 (EIO)
            reached_it = True
        finally:
            os.close(handle)
        if reached_it:
            reached.append(f"{name}/{what} ({command!r}, parent {parent})")
    try:
        if int(name) != os.getpid():  # in a PID namespace of its own, its own number there is not this one
            os.kill(int(name), 0)
            reached.append(f"{name} kill")
    except OSError:
        pass
    try:  # the numbers may be listed (the directory's owner is this user); what they point to must not be
        numbers = os.listdir(f"/proc/{name}/fd")
    except OSError:
        numbers = []
    for number in numbers:
        try:
            os.close(os.open(f"/proc/{name}/fd/{number}", os.O_RDONLY))
            reached.append(f"{name}/fd/{number}")
        except OSError:
            pass
        try:
            os.readlink(f"/proc/{name}/fd/{number}")
            reached.append(f"{name}/fd/{number} link")
        except OSError:
            pass
    try:
        handle = os.open(f"/proc/{name}", os.O_RDONLY | os.O_DIRECTORY)
        try:
            signal.pidfd_send_signal(handle, 0)
            reached.append(f"{name} signal")
        finally:
            os.close(handle)
    except OSError:
        pass
if reached:
    raise RuntimeError(f"ISOLATION BROKEN: reached {reached}")
if not any("fibserve.bench.worker.zygote" in line for line in seen):
    raise RuntimeError(f"PROBE NOT REAL: no zygote among the processes seen: {seen}")


def run(x, y, z):
    z.copy_(x + y)
"""


LEAVES_AN_ORPHAN = """import os, sys

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", {marker!r}])
    os._exit(0)
os.wait()


def run(x, y, z):
    z.copy_(x + y)
"""

CUDA_POISON = """import torch

torch.backends.cuda.matmul.allow_tf32 = True
torch.cuda.set_stream(torch.cuda.Stream())
HELD = torch.empty(1 << 28, device="cuda")  # 1 GiB kept in the caching allocator


def run(x, y, z):
    z.copy_(x + y)
"""

CUDA_FINDS_POISON = """import torch

found = [
    what
    for what, there in {
        "TF32 matmul switch": torch.backends.cuda.matmul.allow_tf32,
        "current stream": torch.cuda.current_stream() != torch.cuda.default_stream(),
        "allocations": torch.cuda.memory_allocated() >= 1 << 28,
    }.items()
    if there
]
if found:
    raise RuntimeError(f"ISOLATION BROKEN: the last candidate left {found}")


def run(x, y, z):
    z.copy_(x + y)
"""


def _solution(name: str, source: str, hardware: str = "cpu") -> Solution:
    return Solution.model_validate(
        {
            "name": name,
            "definition": "vector_add_f32",
            "author": "tests",
            "spec": {"language": "python", "target_hardware": [hardware], "entry_point": "kernel.py::run"},
            "sources": [{"path": "kernel.py", "content": source}],
        }
    )


@pytest.fixture(
    scope="module", params=[True, False], ids=["own PID namespace", "zygote's PID namespace (GPU)"]
)
def evaluated(request, trace_set, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Every candidate above evaluated in turn, with each worker in a PID namespace of its own (CPU) and, as a
    GPU worker is, in the zygote's (with its signal filter and as its descendants' reaper)."""
    config = tmp_path_factory.mktemp("config") / "no-policy.yaml"
    config.write_text("defaults:\n  enforce_source_policy: false\n")
    definition = trace_set.definition("vector_add_f32")
    workload = min(trace_set.workloads_for("vector_add_f32"), key=lambda w: w.axes["N"])
    marker = f"fibserve-orphan-{os.getpid()}-{request.param}"
    candidates = {
        "poison": POISON,
        "finds poison": FINDS_POISON,
        "reaches out": REACHES_OUT,
        "leaves an orphan": LEAVES_AN_ORPHAN.format(marker=marker),
    }
    reports = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(forking, "own_pid_namespace", lambda device: request.param)
        # a warm spare: while one candidate runs, its sibling and the zygote are alive beside it
        with Evaluator("cpu", warm_spare=True, config_path=config) as evaluator:
            for name, source in candidates.items():
                reports[name] = evaluator.evaluate(definition, _solution(name, source), [workload])
    reports["orphans"] = wait_until_gone(marker)
    return reports


def _evaluation(report):
    assert report.task_error is None, report.task_error
    return report.traces[0].evaluation


def test_the_poisoning_candidate_itself_passes(evaluated: dict) -> None:
    """Else the next test proves nothing: the poison was laid."""
    evaluation = _evaluation(evaluated["poison"])
    assert evaluation.status is EvaluationStatus.PASSED, evaluation.log


def test_nothing_a_candidate_changes_reaches_the_next_worker(evaluated: dict) -> None:
    evaluation = _evaluation(evaluated["finds poison"])
    assert evaluation.status is EvaluationStatus.PASSED, evaluation.log


def test_a_worker_cannot_trace_or_signal_its_siblings_or_the_zygote(evaluated: dict) -> None:
    evaluation = _evaluation(evaluated["reaches out"])
    assert evaluation.status is EvaluationStatus.PASSED, evaluation.log


def test_the_host_tmp_is_untouched(evaluated: dict) -> None:
    assert not Path("/tmp/fibserve-poison").exists()


def test_an_orphan_from_a_setsid_double_fork_dies_with_its_worker(evaluated: dict) -> None:
    evaluation = _evaluation(evaluated["leaves an orphan"])
    assert evaluation.status is EvaluationStatus.PASSED, evaluation.log
    assert evaluated["orphans"] == []


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
def test_nothing_a_candidate_sets_in_its_cuda_context_reaches_the_next(trace_set, tmp_path: Path) -> None:
    config = tmp_path / "no-policy.yaml"
    config.write_text("defaults:\n  enforce_source_policy: false\n")
    definition = trace_set.definition("vector_add_f32")
    workload = min(trace_set.workloads_for("vector_add_f32"), key=lambda w: w.axes["N"])
    with Evaluator("cuda:0", warm_spare=True, config_path=config) as evaluator:
        reports = [
            evaluator.evaluate(definition, _solution(name, source, "sm_90a"), [workload])
            for name, source in (("cuda poison", CUDA_POISON), ("cuda finds poison", CUDA_FINDS_POISON))
        ]
    for report in reports:
        evaluation = _evaluation(report)
        assert evaluation.status is EvaluationStatus.PASSED, evaluation.log


TRITON_CACHE_POISON = """import os

for root, _dirs, names in os.walk(os.environ["TRITON_CACHE_DIR"]):
    for name in names:  # rewritten in place (a copy made by linking would show it); the libraries this worker
        path = os.path.join(root, name)  # has mapped are replaced instead, else its own gate would crash
        if name.endswith(".so"):
            with open(path + ".new", "wb") as handle:
                handle.write(b"planted by the last candidate")
            os.replace(path + ".new", path)
        else:
            with open(path, "r+b") as handle:
                handle.write(b"planted by the last candidate")


def run(x, y, z):
    z.copy_(x + y)
"""

TRITON_CACHE_FINDS_POISON = """import os

files = [os.path.join(root, name) for root, _dirs, names in os.walk(os.environ["TRITON_CACHE_DIR"]) for name in names]
planted = [path for path in files if open(path, "rb").read(8) == b"planted "]
if planted:
    raise RuntimeError(f"ISOLATION BROKEN: the last candidate's cache files reached this worker: {planted}")


def run(x, y, z):
    z.copy_(x + y)
"""


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
def test_every_gpu_worker_takes_the_gate_kernel_from_the_zygotes_seed() -> None:
    from fibserve.bench.worker.pool import WorkerProcess

    for _ in range(3):
        worker = WorkerProcess("cuda:0")
        try:
            ready = worker.wait_ready(300)
        finally:
            worker.kill()
        assert ready["gate_seeded"] is True, ready
        assert set(ready["start_ms"]) >= {"context", "gate"}, ready


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
def test_a_candidate_that_spoils_its_triton_cache_leaves_the_next_workers_intact(
    trace_set, tmp_path: Path
) -> None:
    config = tmp_path / "no-policy.yaml"
    config.write_text("defaults:\n  enforce_source_policy: false\n")
    definition = trace_set.definition("vector_add_f32")
    workload = min(trace_set.workloads_for("vector_add_f32"), key=lambda w: w.axes["N"])
    with Evaluator(
        "cuda:0", warm_spare=False, config_path=config
    ) as evaluator:  # the next worker forked after
        reports = [
            evaluator.evaluate(definition, _solution(name, source, "sm_90a"), [workload])
            for name, source in (
                ("spoils", TRITON_CACHE_POISON),
                ("finds spoiled", TRITON_CACHE_FINDS_POISON),
            )
        ]
    for report in reports:
        evaluation = _evaluation(report)
        assert evaluation.status is EvaluationStatus.PASSED, evaluation.log


def _record_sandboxes(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every sandbox :mod:`fibserve.bench.worker.forking` starts from now on, in a list."""
    started, sandbox = [], forking.Sandbox

    def recorded(*args, **kwargs):
        started.append(sandbox(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(forking, "Sandbox", recorded)
    return started


def test_a_zygote_that_does_not_answer_in_time_is_not_left_running(monkeypatch: pytest.MonkeyPatch) -> None:
    from fibserve.sandbox import WORKER_LIMITS

    started = _record_sandboxes(monkeypatch)
    with pytest.raises(forking.ZygoteError, match="did not answer"):
        forking.Zygote(
            "cpu", interpret_triton=False, limits=WORKER_LIMITS, timeout=0.05
        )  # it imports torch first
    assert len(started) == 1 and not started[0].alive


def test_a_zygote_outlives_the_thread_that_asked_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bubblewrap dies with the thread that forked it: a zygote that a pool's spare thread started used to die when
    that pool closed, under the next pool of the process (a fresh clone's run lost a test to it)."""
    import threading
    import time

    from fibserve.bench.worker.pool import WorkerProcess
    from fibserve.sandbox import WORKER_LIMITS

    monkeypatch.setattr(forking, "_ZYGOTES", {})  # a zygote of this test's own
    started: dict = {}

    def ask() -> None:
        try:
            started["zygote"] = forking.zygote_for("cpu", interpret_triton=False, limits=WORKER_LIMITS)
        except BaseException as exc:  # shown by the assertion below, not lost in the thread
            started["error"] = exc

    thread = threading.Thread(target=ask)
    thread.start()
    thread.join()
    assert "zygote" in started, started.get("error")
    try:
        time.sleep(1.0)
        assert started["zygote"].alive
        worker = WorkerProcess("cpu")
        try:
            assert worker.wait_ready(60)["ready"]
        finally:
            worker.kill()
        assert forking._ZYGOTES[("cpu", False)] is started["zygote"]  # the same one: it was not restarted
    finally:
        started["zygote"].close()


def test_a_forked_child_starts_a_zygote_of_its_own_and_leaves_its_parents_alone() -> None:
    """After a fork the parent's zygotes are not the child's: the zygote thread does not exist there (a start
    would wait for it for ever), and closing a copy would kill the parent's zygote through its cgroup."""
    from fibserve.bench.worker.pool import WorkerProcess
    from fibserve.sandbox import WORKER_LIMITS

    parents = forking.zygote_for("cpu", interpret_triton=False, limits=WORKER_LIMITS)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child exits without returning
        code = 1
        try:
            import signal

            signal.alarm(120)  # a hang ends the child, and the test with its exit code
            worker = WorkerProcess("cpu")
            worker.wait_ready(60)
            worker.kill()
            mine = forking.zygote_for("cpu", interpret_triton=False, limits=WORKER_LIMITS)
            code = 0 if mine is not parents else 2
            mine.close()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert (
        parents.alive and forking.zygote_for("cpu", interpret_triton=False, limits=WORKER_LIMITS) is parents
    )


def test_a_zygote_that_says_something_else_than_ready_is_not_left_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fibserve.sandbox import WORKER_LIMITS

    started = _record_sandboxes(monkeypatch)
    monkeypatch.setattr(forking.Zygote, "_read", lambda self, timeout: ["not", "a", "message"])
    with pytest.raises(forking.ZygoteError, match="instead of ready"):
        forking.Zygote("cpu", interpret_triton=False, limits=WORKER_LIMITS)
    assert len(started) == 1 and not started[0].alive


def test_a_zygote_whose_caller_stopped_waiting_is_closed_once_it_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An interrupt (Ctrl-C) while the zygote thread starts one must not leave it running unheld."""
    from concurrent.futures import Future

    from fibserve.sandbox import WORKER_LIMITS

    class Interrupted(Future):
        waited = False

        def result(self, timeout=None):
            if not self.waited:  # the caller's wait is interrupted; the callback reads the result later
                self.waited = True
                raise KeyboardInterrupt
            return super().result(timeout)

    class Started:
        closed = False

        def close(self) -> None:
            self.closed = True

    pending = Interrupted()
    monkeypatch.setattr(forking, "_ZYGOTES", {})
    monkeypatch.setattr(
        forking, "_ZYGOTE_THREAD", type("Thread", (), {"start": lambda self, *a, **k: pending})()
    )
    with pytest.raises(KeyboardInterrupt):
        forking.zygote_for("cpu", interpret_triton=False, limits=WORKER_LIMITS)
    zygote = Started()
    pending.set_result(zygote)  # it started after all
    assert zygote.closed and forking._ZYGOTES == {}
