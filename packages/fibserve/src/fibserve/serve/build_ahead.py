"""The build-ahead pool: queued CUDA/C++ candidates are compiled on a few CPU threads before a lane takes them.

A lane that claims a CUDA candidate first runs its static analysis and build (nvcc, seconds each) and only then
uses its device. Here a bounded pool (``fibserve serve --build-workers``, default half the cores) runs the same
static analysis (:func:`fibserve.static_analysis.analyse`: policy, nvcc build, PTX/SASS reading) for queued
evaluations while the lanes work on others. Both go through the build cache, keyed by the sources, the
architecture, the flags and the toolchain, and shared through file locks, so the lane's own analysis and build
of a task built ahead are cache hits, and a lane that claims a task still being built waits for that build
instead of starting a second one. Compile errors are cached like builds; a build that timed out is not, and the
lane tries it again under its own limit.

The store keeps each task's state (:class:`fibserve.serve.queue_order.Prebuild`); a lane takes built work first
and the pool builds in the lanes' fair order (:mod:`fibserve.serve.queue_order`), so a lane waits for nvcc only
when nothing built is queued. Triton and Python candidates have nothing to build ahead: their package is
written in milliseconds, and Triton's JIT compiles inside the sandboxed worker at the first launch, for
argument types and constants known only then.

Only lanes of this process use it: under ``serve --ray`` each lane builds on its own node, into that node's
cache. The pool's builds are not ``POST /compile``'s: those have their own fair slots
(:mod:`fibserve.serve.compile_slots`), so queued work cannot hold up a client waiting for an analysis.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from fibserve.api import BuildAheadInfo, EvaluateRequest
from fibserve.datasets.catalog import Catalog
from fibserve.sandbox import status as sandbox_status
from fibserve.trace import Solution

from .queue_order import Prebuild
from .store import TaskRecord, TaskStore

log = logging.getLogger("fibserve.serve")

COMPILED_LANGUAGES = ("cuda", "cpp")
"""Languages whose candidates are built ahead (nvcc with the tvm-ffi binding)."""


def builds_ahead(kind: str, solution: Solution) -> bool:
    """Whether a task of ``kind`` for ``solution`` is built ahead: an evaluation of a CUDA/C++ candidate."""
    return kind == "evaluate" and solution.spec.language.value in COMPILED_LANGUAGES


def lane_archs(devices: Sequence[str]) -> list[str]:
    """The nvcc targets the lanes of ``devices`` build for, as their Evaluators choose them
    (:func:`fibserve.bench.candidate.cuda_arch`: ``sm_90a`` on Hopper and on a CPU lane, ``sm_100a`` on
    Blackwell), each once."""
    from fibserve.bench.candidate import cuda_arch

    archs = []
    for device in devices:
        capability = None
        if device.startswith("cuda"):
            import torch

            capability = torch.cuda.get_device_capability(torch.device(device))
        archs.append(cuda_arch(capability))
    return sorted(set(archs))


class BuildAhead:
    """``workers`` threads that build queued tasks marked for it (:meth:`TaskStore.claim_build`).

    Args:
        store: the task queue.
        catalog: definitions, to resolve each task's evaluation config (its build time limit).
        archs: nvcc targets to build for (:func:`lane_archs`).
        workers: builds at the same time.
        eval_config: the operator's evaluation config (``fibserve serve --config``), as the lanes read it.
        idle_poll_s: how often an idle worker looks at the queue without a wake-up (seconds).
    """

    def __init__(
        self,
        store: TaskStore,
        catalog: Catalog,
        archs: list[str],
        *,
        workers: int,
        eval_config: Any = None,
        idle_poll_s: float = 2.0,
    ) -> None:
        self.store = store
        self.catalog = catalog
        self.archs = archs
        self.workers = workers
        self.eval_config = eval_config
        self.idle_poll_s = idle_poll_s
        self.stopping = threading.Event()
        self.wakeup = threading.Condition()
        self._threads = [
            threading.Thread(target=self._loop, name=f"fibserve-build-{i}", daemon=True)
            for i in range(workers)
        ]

    def start(self) -> None:
        """Start the worker threads."""
        for thread in self._threads:
            thread.start()

    def notify(self) -> None:
        """Wake idle workers (call after a submission)."""
        with self.wakeup:
            self.wakeup.notify_all()

    def stop(self, join_timeout_s: float = 5.0) -> None:
        """Take no more builds; wait briefly for the running ones (a build is bounded by its time limit, and
        one cut short by the server's exit is built again by the lane that takes its task)."""
        self.stopping.set()
        self.notify()
        for thread in self._threads:
            thread.join(timeout=join_timeout_s / max(1, len(self._threads)))

    def info(self) -> BuildAheadInfo:
        """What ``/health`` shows of the pool."""
        counts = self.store.prebuild_counts()
        return BuildAheadInfo(
            workers=self.workers,
            waiting=counts[Prebuild.WAITING],
            building=counts[Prebuild.BUILDING],
            built=counts[Prebuild.BUILT],
        )

    def _loop(self) -> None:
        while not self.stopping.is_set():
            try:
                task = self.store.claim_build()
            except Exception:  # a store hiccup (disk full, locked): the lanes build for themselves meanwhile
                log.exception("the build-ahead pool could not read the queue; retrying")
                self.stopping.wait(self.idle_poll_s)
                continue
            if task is None:
                with self.wakeup:
                    if not self.stopping.is_set():
                        self.wakeup.wait(timeout=self.idle_poll_s)
                continue
            try:
                self.build(task)
            except Exception:  # never the task's failure: its lane analyses and builds it again
                log.exception("building task %s ahead failed", task.id)
            finally:
                try:
                    self.store.build_done(task.id)
                except Exception:
                    log.exception("could not record the build-ahead of task %s", task.id)

    def build(self, task: TaskRecord) -> None:
        """Run the static analysis of ``task``'s candidate, as its lane will, for every target in ``archs``; the
        build cache keeps what it made (compile errors included)."""
        from fibserve.bench.config import resolve_config
        from fibserve.static_analysis import analyse

        from .work import request_overrides

        if not sandbox_status().usable:  # nothing of a candidate is compiled unconfined; the lane says why
            return
        request = EvaluateRequest.model_validate(task.request)
        definition = self.catalog.definition(task.definition)
        config = resolve_config(definition, request_overrides(request), self.eval_config)
        for arch in self.archs:
            analysis = analyse(request.solution, definition, arch, config.timeouts.build)
            build = getattr(analysis, "build", None)
            if build is not None:
                build.release()  # the lane takes its own lease when it reads the build
            log.info(
                "task %s built ahead for %s: %s", task.id, arch, getattr(analysis, "status", "no analysis")
            )
