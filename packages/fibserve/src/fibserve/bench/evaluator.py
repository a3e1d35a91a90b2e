"""The Evaluator: one per device lane; builds, loads, checks and times candidates (trusted side).

``Evaluator(device).evaluate(definition, solution, workloads)`` returns an :class:`EvaluationReport` and never
raises for anything a candidate does: candidate failures become statuses, harness failures become
``task_error``. The candidate only ever runs in a sandbox worker (:mod:`fibserve.bench.worker.pool`); a worker
serves one candidate, is replaced after a crash, a timeout or a CUDA error, and warm spares are kept ready
(six on a GPU: the baseline and the reference are timed in workers of the same construction too, see
:mod:`fibserve.bench.timing.comparators`).

CPU mode (``device="cpu"``): CUDA/C++ candidates are built and analysed (the static pipeline) but not
executed (traces with null evaluation, ``executed=False``); Triton candidates run under ``TRITON_INTERPRET=1``
only when every floating-point input and output is float32 (the interpreter gets bfloat16 ``tl.dot`` wrong);
Python candidates run on CPU tensors. Nothing is timed on CPU: PASSED results carry null latencies and a
null ``speedup_factor`` (not measured) marked ``measured_on: cpu``, so no target speedup is ever met without a GPU.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from fibserve.bench.config import resolve_config
from fibserve.bench.data.reference import ReferenceCache
from fibserve.bench.device import snapshot
from fibserve.bench.report import DeviceInfo, EvaluationReport
from fibserve.bench.session import EvaluationSession, Progress
from fibserve.bench.timing.guard import idle_round_trip_ms
from fibserve.bench.worker import clock
from fibserve.bench.worker.pool import WorkerPool
from fibserve.sandbox import WORKER_LIMITS, Limits
from fibserve.trace import Definition, Solution, Workload

SECRET_ENV = "FIBSERVE_INPUT_SECRET"
"""Hex string used as the input-seed secret when none is passed (a random one per process otherwise)."""


_ACCELERATOR_ERRORS: tuple[type[BaseException], ...] = tuple(
    t for t in (getattr(torch, "AcceleratorError", None),) if isinstance(t, type)
)
"""Exception types of a failed CUDA context (torch >= 2.8 raises ``torch.AcceleratorError``)."""


class Evaluator:
    """Evaluates candidates on one device, one at a time (thread-safe: calls are serialised).

    Args:
        device: ``cuda:N`` or ``cpu``.
        secret: server-side secret mixed into input seeds (default: ``$FIBSERVE_INPUT_SECRET`` hex, else
            32 random bytes for this process).
        warm_spare: keep spare workers started on a GPU: six, two evaluations' worth (each takes the
            candidate's worker and the timing twins of the baseline and the reference). With two spares,
            back-to-back cheap evaluations on the H200 took 3.2 s each while their own phases took under 1 s:
            the rest was waiting for workers to start (Python, torch, a CUDA context, inside bubblewrap).
            On CPU one: a fork of the process's warm zygote (:mod:`fibserve.bench.worker.forking`), about
            50 ms of CPU (``benchmarks/worker_start.py``); the zygote's own start (a Python importing torch,
            about 2 CPU-s) is paid once per process, in the background.
        config_path: operator YAML for :func:`resolve_config`.
        roots: trace-set roots for safetensors inputs.
        limits: resource limits of every worker (:class:`fibserve.sandbox.Limits`).

    Candidates run only where :func:`fibserve.sandbox.status` allows (bubblewrap, or
    ``--unsafe-no-sandbox``); elsewhere every evaluation is a task error saying how to install bubblewrap.

    Raises:
        RuntimeError: a CUDA device was requested but torch sees no GPU.
    """

    def __init__(
        self,
        device: str = "cuda:0",
        *,
        secret: bytes | None = None,
        warm_spare: bool = True,
        config_path: str | Path | None = None,
        roots: Sequence[Path] = (),
        limits: Limits = WORKER_LIMITS,
    ):
        self.device = torch.device(device)
        if self.device.type == "cuda":
            if not torch.cuda.is_available():
                raise RuntimeError(f"device {device} requested but torch sees no CUDA GPU; use device='cpu'")
            if self.device.index is None:
                self.device = torch.device("cuda", torch.cuda.current_device())
            torch.cuda.set_device(self.device)
            # measured now, before any worker of this evaluator (or its candidates) is alive on the GPU
            clock.overwrite_plan(str(self.device))
            idle_round_trip_ms(self.device)
        env_secret = os.environ.get(SECRET_ENV)
        self.secret = secret or (bytes.fromhex(env_secret) if env_secret else os.urandom(32))
        self.config_path = config_path
        self.roots = [Path(r) for r in roots]
        self.cpu_mode = self.device.type != "cuda"
        self.pool = WorkerPool(
            str(self.device),
            interpret_triton=self.cpu_mode,
            spares=(1 if self.cpu_mode else 6) if warm_spare else 0,
            limits=limits,
        )
        self.references = ReferenceCache(resolve_config(None, config_path=config_path).reference_cache_bytes)
        self._lock = threading.Lock()
        self._session: EvaluationSession | None = None
        self.healthy = True
        """False once the trusted process's own CUDA context failed: the owner must replace this Evaluator."""
        self.device_name = snapshot(self.device).name
        self.capability = None if self.cpu_mode else torch.cuda.get_device_capability(self.device)

    def close(self) -> None:
        """Stop the spare workers and drop the cached reference outputs."""
        self.pool.close()
        self.references.clear()

    def cancel(self) -> None:
        """Stop the running evaluation now, from another thread: its workers are killed in the middle of a call
        (a candidate's call could otherwise run until its timeout). The evaluation then ends at its next check
        of ``progress``; nothing happens when none is running."""
        if (session := self._session) is not None:
            session.stop_now()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def evaluate(
        self,
        definition: Definition,
        solution: Solution,
        workloads: Sequence[Workload],
        *,
        overrides: dict[str, Any] | None = None,
        progress: Progress | None = None,
        roots: Sequence[Path] | None = None,
        baseline: Solution | None = None,
    ) -> EvaluationReport:
        """Evaluate ``solution`` on each workload of ``definition``.

        Args:
            overrides: request-level :class:`EvalConfig` keys (highest precedence).
            progress: optional callback for progress events.
            roots: trace-set roots for safetensors inputs (default: the evaluator's).
            baseline: the definition's baseline Solution (trusted; ``TraceSet.baseline_for``): timed next to
                every candidate call, and ``speedup_factor`` is against it. None: against the reference, and
                every result says that no baseline was given.

        Returns:
            The report; it never raises for candidate behaviour or harness failures (see ``task_error``).
        """
        with self._lock:
            started = time.monotonic()
            try:
                config = resolve_config(definition, overrides, self.config_path)
                bad_config = None
            except ValueError as exc:
                config, bad_config = resolve_config(None), str(exc)
            start = snapshot(self.device)
            report = EvaluationReport(
                definition=definition.name,
                solution=solution.name,
                config=config,
                device_info=DeviceInfo(
                    device=str(self.device), name=start.name, driver=start.driver, start=start
                ),
                sandbox=self.pool.mode,
            )
            try:
                if bad_config:
                    report.task_error = bad_config
                else:
                    # references may allocate on "the current device": make it ours in whatever thread calls us
                    scope = torch.cuda.device(self.device) if not self.cpu_mode else contextlib.nullcontext()
                    with scope:
                        self._session = EvaluationSession(
                            self, report, definition, solution, list(workloads), progress, roots, baseline
                        )
                        self._session.execute()
            except Exception as exc:  # the serving process never dies from an evaluation
                report.task_error = f"internal error in the evaluator: {exc!r}"
                if isinstance(exc, _ACCELERATOR_ERRORS):
                    self.healthy = False
                    report.notes.append(
                        "the evaluator's own CUDA context failed; this lane must be restarted (Evaluator.healthy is False)"
                    )
            finally:
                self._session = None
            report.notes.extend(n for n in self.pool.notes if n not in report.notes)
            report.device_info.end = snapshot(self.device)
            report.timings_s["total"] = time.monotonic() - started
            return report


def evaluate(
    definition: Definition,
    solution: Solution,
    workloads: Sequence[Workload],
    *,
    device: str | None = None,
    overrides: dict[str, Any] | None = None,
    roots: Sequence[Path] = (),
    baseline: Solution | None = None,
) -> EvaluationReport:
    """One-shot convenience: a fresh :class:`Evaluator` (``cuda:0`` when a GPU is visible, else ``cpu``),
    one evaluation (against ``baseline``, see :meth:`Evaluator.evaluate`), then close. Services should keep an
    Evaluator per device instead (warm spare)."""
    device = device or ("cuda:0" if torch.cuda.is_available() else "cpu")
    with Evaluator(device, warm_spare=False, roots=roots) as evaluator:
        return evaluator.evaluate(definition, solution, workloads, overrides=overrides, baseline=baseline)
