"""The trusted process reads only the end of a worker's log, however much the candidate printed."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from types import SimpleNamespace

from fibserve.bench.sandbox import WorkerProcess


def test_log_tail_reads_only_the_tail_of_a_large_log(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        out.write(b"candidate noise\n" * (20 * 1024 * 1024 // 16))  # 20 MiB
        out.write(b"Traceback: the last words\n")
    worker = SimpleNamespace(log_path=log)  # log_tail needs only the log's path
    tracemalloc.start()
    try:
        tail = WorkerProcess.log_tail(worker, limit=100)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert tail.endswith("Traceback: the last words\n") and len(tail) == 100
    assert peak < 1024 * 1024  # the whole file would be 20 MiB in memory


def test_log_tail_of_a_missing_log_is_empty(tmp_path: Path) -> None:
    assert WorkerProcess.log_tail(SimpleNamespace(log_path=tmp_path / "gone.log")) == ""
