"""The timing twin (trusted side): a worker process built exactly like the candidate's, loaded with what the
candidate is timed against: the definition's reference (:func:`fibserve.bench.data.reference.reference_solution`)
or its baseline Solution (:mod:`fibserve.bench.timing.comparators`), so that both sides of every timed pair go
through the same process kind, messages and buffers.

Why: timed in the evaluating process, the same cuBLAS GEMM measured 0.6-2.0% slower than in a worker, which
inflated every speedup; two alike workers agreed to 0.04% (benchmarks/timing_symmetry.py on the H200,
docs/gpu-results.md). The twin only times: correctness references are still computed in the trusted process,
and the candidate's worker never sees reference outputs. Any failure of the twin is the harness's, never the
candidate's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from fibserve.bench import candidate as cand
from fibserve.bench.config import EvalConfig
from fibserve.bench.data.reference import reference_solution
from fibserve.bench.worker.pool import WorkerError, WorkerPool, WorkerProcess
from fibserve.bench.worker.protocol import Failed, Loaded, ProtocolViolation, parse_reply
from fibserve.bench.worker.slots import AllocationRefused, Slots, WorkloadData, allocate_slots
from fibserve.trace import Definition, Solution


class TwinError(RuntimeError):
    """The twin could not be prepared, started, loaded or given buffers (a harness problem)."""


class ReferenceTwin:
    """The timing twin of one evaluation: started on first use, discarded at the end of the evaluation.

    Args:
        pool: the Evaluator's pool (the twin is built like every candidate worker).
        definition: whose reference (or baseline) it runs.
        config: the evaluation's config (load and build timeouts).
        arch: CUDA target for the packaging step (unused for Python, passed for uniformity).
        note: called with a line for the report when the twin is replaced after a failure.
        solution: what it runs (trusted code): the definition's baseline Solution, or by default the
            definition's reference as a Solution.
        role: ``reference`` or ``baseline``, for messages.
    """

    def __init__(self, pool: WorkerPool, definition: Definition, config: EvalConfig, *, arch: str,
                 note: Callable[[str], None], solution: Solution | None = None,
                 role: str = "reference"):  # fmt: skip
        self.pool = pool
        self.definition = definition
        self.solution = solution or reference_solution(definition)
        self.role = role
        self.config = config
        self.arch = arch
        self.note = note
        self.worker: WorkerProcess | None = None
        self.start_seconds = 0.0
        """Wall time spent packaging, acquiring and loading the twin (s)."""

    def slots(self, data: WorkloadData, count: int, device: torch.device) -> Slots:
        """Buffers in the twin, laid out like the candidate's ``count`` slots (starting the twin first when
        needed). A twin whose buffers cannot be opened here (:class:`AllocationRefused`) is replaced by a fresh
        one, asked once more (a twin that died or did not answer is not: a candidate that keeps the GPU busy
        would double the wait before the blame probe): on the H100
        (docs/gpu-results.md, twelfth session) a fresh twin's buffers once failed to open in this process
        (``cuIpcOpenMemHandle``, CUresult 201) in 1 of 68 evaluations, and the blame probe that followed found
        the twins working alone and refused the honest candidate beside them.

        Raises:
            TwinError: the twin did not start or load the reference, did not answer its allocation, or two
                twins in a row could not share their buffers.
        """
        first: Exception | None = None
        while True:
            if self.worker is not None and not self.worker.in_step:
                self.discard("a request it left unanswered")
            if self.worker is None or not self.worker.alive:
                self.discard()
                self._start()
            assert self.worker is not None
            try:
                return allocate_slots(self.worker, data, count, device, self.config.timeouts.load)
            except (WorkerError, AllocationRefused, OSError) as exc:
                self.discard(f"a buffer allocation failure ({exc})")
                if first is not None or not isinstance(exc, AllocationRefused):
                    again = f", twice in a row: {first}; then, with a fresh one" if first is not None else ""
                    raise TwinError(
                        f"could not share buffers with the {self.role} timing worker{again}: {exc}"
                    ) from None
                first = exc

    def _start(self) -> None:
        started = time.monotonic()
        timeout = self.config.timeouts.load
        prepared = cand.prepare(
            self.definition,
            self.solution,
            arch=self.arch,
            timeout=self.config.timeouts.build,
        )
        if prepared.load is None:
            raise TwinError(
                f"cannot package the {self.role} {self.solution.name!r} for timing: "
                f"{prepared.task_error or prepared.log}"
            )
        try:
            self.worker = self.pool.acquire(timeout)
        except WorkerError as exc:
            raise TwinError(
                f"the {self.role} timing worker failed to start ({exc}): {exc.log[-2000:]}"
            ) from None
        try:
            reply = parse_reply(self.worker.load({**prepared.load, "cast_outputs": True}, timeout), Loaded)
        except (WorkerError, OSError, ProtocolViolation) as exc:
            self.discard(f"a failed load ({exc})")
            raise TwinError(
                f"the {self.role} timing worker failed to load {self.solution.name!r}: {exc}"
            ) from None
        if isinstance(reply, Failed):
            self.discard("a failed load")
            raise TwinError(
                f"the {self.role} timing worker failed to load {self.solution.name!r}: {reply.error}"
            )
        self.start_seconds += time.monotonic() - started

    def discard(self, reason: str | None = None) -> None:
        """Retire the twin: killed at once after a failure (``reason``, noted in the report), else asked to
        exit gracefully."""
        if self.worker is not None:
            self.worker.kill(graceful=reason is None)
            self.worker = None
            if reason:
                self.note(f"{self.role} timing worker discarded after {reason}")
