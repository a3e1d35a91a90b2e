"""One ``Evaluator.evaluate`` call, phase by phase (trusted side), one method per phase of
:class:`EvaluationSession`: **admit** (the sandbox is usable, the solution and workloads fit the definition),
**analyse** (static analysis and source policy), **build**, then per workload its data (inputs, references), a
worker with the candidate loaded, **correctness**, **timing** against the comparators' twins and **annotate**
(the notes and plausibility facts a reader of the result needs).

Whose fault is it: a problem with the request (solution for another definition, workloads that do not fit) or
the harness (inputs that cannot be generated, a broken reference, a worker that does not start) is a
task-level error; everything the candidate does (does not build, does not load, raises, crashes, hangs,
writes wrong values) is a status on its trace.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import torch

from fibserve.analysis.report import AnalysisUnavailable
from fibserve.bench import candidate as cand
from fibserve.bench.config import EvalConfig
from fibserve.bench.correctness.check import check_correctness, correctness_of
from fibserve.bench.data.degenerate import degeneracy
from fibserve.bench.data.inputs import InputError, generate_inputs, torch_dtype
from fibserve.bench.data.reference import ReferenceCache, ReferenceError, reference_key, run_reference
from fibserve.bench.data.variation import variable_inputs
from fibserve.bench.device import library_versions, snapshot
from fibserve.bench.failures import CandidateFailure, DeviceShared, ReferenceTimingError, limit_failure
from fibserve.bench.report import EvaluationReport
from fibserve.bench.timing.blame import interference_failure, solo_probe
from fibserve.bench.timing.comparators import Comparators
from fibserve.bench.timing.loop import measure, untimed_performance
from fibserve.bench.timing.roofline import check_plausibility
from fibserve.bench.timing.sides import ReferencePlan
from fibserve.bench.timing.twin import TwinError
from fibserve.bench.worker.pool import WorkerError, WorkerPool, WorkerProcess
from fibserve.bench.worker.protocol import Failed, Loaded, ProtocolViolation, parse_reply
from fibserve.bench.worker.slots import (
    AllocationRefused,
    Slots,
    WorkloadData,
    allocate_slots,
    timing_slot_count,
    worker_failure,
)
from fibserve.static_analysis import analyse
from fibserve.trace import (
    Correctness,
    Definition,
    Environment,
    Evaluation,
    EvaluationStatus,
    Performance,
    Solution,
    TimingFacts,
    Trace,
    Workload,
)

Progress = Callable[[str, dict[str, Any]], None]
"""``progress(event, info)``; events: ``build``, ``workload`` (info: index, total, uuid), ``phase`` (uuid,
phase), ``result`` (uuid, status)."""


class _TaskError(Exception):
    """A harness failure for one workload (reported in ``workload_errors``)."""


class _TwinFailed(Exception):
    """A comparator's twin failed during the timing of one workload (``plan``: how the reference was timed):
    whose fault is decided after the candidate's buffers are released
    (:meth:`EvaluationSession._blame_twin_failure`)."""

    def __init__(self, message: str, plan: ReferencePlan | None):
        super().__init__(message)
        self.plan = plan


class LaneEvaluator(Protocol):
    """What an evaluation uses of the lane it runs on (an :class:`fibserve.bench.evaluator.Evaluator`)."""

    device: torch.device
    cpu_mode: bool
    """True without a GPU: nothing is timed, CUDA candidates are built but not run."""
    device_name: str
    """The device's name, e.g. ``NVIDIA H200`` (the trace's hardware, the roofline's device model)."""
    capability: tuple[int, int] | None
    """CUDA compute capability; None on CPU."""
    pool: WorkerPool
    references: ReferenceCache
    secret: bytes
    """Server-side secret mixed into input seeds."""
    roots: list[Path]
    """Trace-set roots for safetensors inputs."""


class EvaluationSession:
    """The state of one ``evaluate`` call (kept off the Evaluator so calls cannot leak into each other)."""

    def __init__(self, lane: LaneEvaluator, report: EvaluationReport, definition: Definition, solution: Solution,
                 workloads: list[Workload], progress: Progress | None, roots: Sequence[Path] | None,
                 baseline: Solution | None = None):  # fmt: skip
        self.lane = lane
        self.report = report
        self.config: EvalConfig = report.config
        self.definition = definition
        self.solution = solution
        self.workloads = workloads
        self.progress = progress or (lambda event, info: None)
        self.roots = list(roots) if roots is not None else lane.roots
        self.language = solution.spec.language.value
        self.compiled = self.language in ("cuda", "cpp")
        """CUDA/C++: statically analysed, and built by nvcc."""
        self.arch = cand.cuda_arch(lane.capability)
        self.worker: WorkerProcess | None = None
        self._loading: WorkerProcess | None = None
        """The worker loading the candidate, until it has loaded it (``worker`` then)."""
        self.load: dict[str, Any] | None = None
        self.build: Any = None
        """The ``BuildResult``: its lease keeps the build in the cache while workers may still load it."""
        self._current: str | None = None
        """The uuid of the workload being evaluated."""
        self.twins = Comparators(
            lane.pool,
            definition,
            baseline,
            self.config,
            arch=self.arch,
            note=report.notes.append,
        )
        """The baseline's and the reference's timing twins (GPU only; started on first use)."""
        self.environment = Environment(hardware=lane.device_name, libs=library_versions())

    def _time(self, key: str, seconds: float) -> None:
        self.report.timings_s[key] = self.report.timings_s.get(key, 0.0) + seconds

    def _trace(self, workload: Workload, evaluation: Evaluation | None) -> None:
        self.report.traces.append(
            Trace(
                definition=self.definition.name,
                workload=workload,
                solution=self.solution.name,
                evaluation=evaluation,
            )
        )
        if evaluation is not None:
            self.progress("result", {"uuid": workload.uuid, "status": evaluation.status.value})

    def _evaluation(
        self, status: EvaluationStatus, log: str = "", correctness=None, performance=None
    ) -> Evaluation:
        return Evaluation(
            status=status,
            environment=self.environment,
            timestamp=datetime.now(UTC).isoformat(),
            log=log[-20000:],
            correctness=correctness,
            performance=performance,
        )

    def _fail_all(self, status: EvaluationStatus, log: str) -> None:
        for workload in self.workloads:
            self._trace(workload, self._evaluation(status, log))

    def execute(self) -> None:
        """Run the phases in order (admit, analyse, build, then per workload correctness, timing and
        annotate); each phase that ends the evaluation early has already written why into the report."""
        if not self._admit() or not self._analyse() or not self._runs_here():
            return
        load = self._build()
        if load is None or not self._executes():
            return
        self.load = load
        self._run_workloads()

    def _admit(self) -> bool:
        """Whether the request can be evaluated at all: the sandbox is usable, the solution is a candidate
        for the definition and some workloads fit it (those that do not are reported and dropped)."""
        report, definition = self.report, self.definition
        if not self.lane.pool.status.usable:  # nothing of a candidate is compiled or run unconfined
            report.task_error = self.lane.pool.status.detail
            return False
        problem = cand.check_solution(definition, self.solution)
        if problem:
            report.task_error = problem
            return False
        bad = {w.uuid: "; ".join(p) for w in self.workloads if (p := definition.check_workload(w))}
        if bad:
            report.workload_errors.update(bad)
            report.task_error = f"{len(bad)} workload(s) do not fit {definition.name!r}: " + "; ".join(
                bad.values()
            )
            self.workloads = [w for w in self.workloads if w.uuid not in bad]
        if not self.workloads and not bad:
            report.task_error = f"no workloads given for {definition.name!r}"
            return False
        return True

    def _analyse(self) -> bool:
        """Static analysis of a compiled candidate, then the source policy; False (every workload a
        COMPILE_ERROR) when the policy rejects it, or (a task error: nothing of the candidate runs, and nothing
        is blamed on it) when the analysis that a compiled candidate's policy is read from failed."""
        if self.compiled:
            t0 = time.monotonic()
            self.report.analysis = analyse(
                self.solution, self.definition, self.arch, self.config.timeouts.build
            )
            self._time("analysis", time.monotonic() - t0)
            if self.config.enforce_source_policy and isinstance(self.report.analysis, AnalysisUnavailable):
                self.report.task_error = (
                    f"not run: {self.report.analysis.error}; a CUDA/C++ candidate's source and binary policy "
                    "are read from that analysis, so it cannot be checked (the candidate is not blamed)"
                )
                return False
        rejected = (
            cand.policy_problems(self.solution, self.report.analysis)
            if self.config.enforce_source_policy
            else []
        )
        if rejected:
            self._fail_all(
                EvaluationStatus.COMPILE_ERROR, "source policy / ABI check failed:\n" + "\n".join(rejected)
            )
            return False
        return True

    def _runs_here(self) -> bool:
        """False (a task error) for a Triton candidate on CPU whose floating-point tensors are not all
        float32: the Triton interpreter gets the others wrong."""
        if not (self.lane.cpu_mode and self.language == "triton"):
            return True
        definition = self.definition
        unsupported = sorted(
            {
                s.dtype.value
                for s in [*definition.inputs.values(), *definition.outputs.values()]
                if s.dtype.is_floating_point and s.dtype.value != "float32"
            }
        )
        if not unsupported:
            return True
        self.report.task_error = (
            f"CPU mode cannot evaluate this Triton candidate: the Triton interpreter computes only float32 "
            f"correctly (bfloat16 tl.dot gives wrong results) and {definition.name!r} uses {unsupported}; "
            "evaluate it on a GPU"
        )
        self.report.notes.append("not executed: unsupported dtype for the Triton CPU interpreter")
        return False

    def _build(self) -> dict[str, Any] | None:
        """Build or package the candidate; the worker's load request, or None when the build failed (a
        COMPILE_ERROR or TIMEOUT on every workload, or a task error when the build infrastructure failed)."""
        report, solution = self.report, self.solution
        self.progress("build", {"language": self.language})
        prepared = cand.prepare(self.definition, solution, arch=self.arch, timeout=self.config.timeouts.build)
        self._time("build", prepared.seconds)
        report.build = prepared.summary
        self.build = prepared.result
        if prepared.task_error:
            report.task_error = prepared.task_error
            return None
        if prepared.status is not None:
            self._fail_all(prepared.status, prepared.log)
            return None
        return prepared.load

    def _executes(self) -> bool:
        """Whether the built candidate runs here: a CUDA/C++ candidate on CPU does not (null evaluations)."""
        if self.compiled and self.lane.cpu_mode:
            self.report.executed = False
            self.report.notes.append(
                "not executed: no GPU on this machine; the CUDA candidate was built and analysed statically only "
                "(evaluation is null for every workload, and no status is claimed)"
            )
            for workload in self.workloads:
                self._trace(workload, None)
            return False
        if self.lane.cpu_mode:
            self.report.notes.append(
                "CPU mode: correctness only (Triton under TRITON_INTERPRET=1); nothing is timed and no speedup is reported"
            )
        return True

    def _run_workloads(self) -> None:
        """Evaluate each workload in turn (a harness failure on one is reported and the next goes on)."""
        report = self.report
        try:
            for index, workload in enumerate(self.workloads):
                self.progress(
                    "workload", {"index": index, "total": len(self.workloads), "uuid": workload.uuid}
                )
                try:
                    evaluation = self._workload(workload)
                except _TaskError as exc:
                    report.workload_errors[workload.uuid] = str(exc)
                    self._trace(workload, None)
                    continue
                self._trace(workload, evaluation)
        finally:
            self._discard()
            self.twins.discard()
            if self.build is not None:
                self.build.release()
            if self.twins.start_seconds:
                self._time("reference_worker", self.twins.start_seconds)
        if report.workload_errors and report.task_error is None:
            report.task_error = "; ".join(f"{u}: {m}" for u, m in report.workload_errors.items())

    def stop_now(self) -> None:
        """Kill the candidate's and the twins' process trees at once, from any thread: a cancel reaches a call
        that is still running (the lane's thread then sees the workers die and stops at its next check)."""
        for worker in (self.worker, self._loading):
            if worker is not None:
                worker.sandbox.stop()
        self.twins.stop_now()

    def _discard(self, reason: str | None = None) -> None:
        """Retire the worker: killed at once after a failure (``reason``), else asked to exit gracefully."""
        if self.worker is not None:
            self.worker.kill(graceful=reason is None)
            self.worker = None
            if reason:
                self.report.notes.append(f"worker replaced after {reason}")

    def _limit_evaluation(self, failure: CandidateFailure) -> Evaluation:
        if failure.limit is not None and self._current is not None:
            self.report.limits_hit[self._current] = failure.limit.sentence()
        return self._evaluation(failure.status, failure.log)

    def _ensure_worker(self) -> WorkerProcess | Evaluation:
        """A worker with the candidate loaded, or the Evaluation that loading produced (candidate's fault).

        Raises:
            _TaskError: the worker did not start (infrastructure).
        """
        if self.worker is not None and self.worker.alive and self.worker.in_step:
            return self.worker
        self._discard()
        t0 = time.monotonic()
        try:
            worker = self.lane.pool.acquire(self.config.timeouts.load)
        except WorkerError as exc:
            raise _TaskError(f"sandbox worker failed to start ({exc}): {exc.log[-2000:]}") from None
        self._time("worker_start", time.monotonic() - t0)
        t0 = time.monotonic()
        self.report.executed = True
        self._loading = worker  # a cancel kills it while the candidate's imports run
        try:
            message = worker.load(self.load or {}, self.config.timeouts.load)
        except WorkerError as exc:
            worker.kill()
            if exc.limit is not None:
                return self._limit_evaluation(limit_failure(exc.limit, "loading the candidate", exc.log))
            status = EvaluationStatus.TIMEOUT if exc.kind == "timeout" else EvaluationStatus.RUNTIME_ERROR
            return self._evaluation(status, f"loading the candidate: {exc}\n{exc.log}")
        except OSError as exc:
            worker.kill()
            raise _TaskError(f"could not hand the build products to the worker: {exc}") from None
        finally:
            self._loading = None
            self._time("load", time.monotonic() - t0)
        try:
            reply = parse_reply(message, Loaded)
        except ProtocolViolation as exc:
            worker.kill()
            return self._evaluation(EvaluationStatus.RUNTIME_ERROR, f"loading the candidate: {exc}")
        if isinstance(reply, Failed):
            worker.kill()
            return self._evaluation(
                EvaluationStatus.COMPILE_ERROR, f"loading the candidate failed: {reply.error}"
            )
        self.worker = worker
        return worker

    def _data(self, workload: Workload) -> WorkloadData:
        definition, device = self.definition, self.lane.device
        t0 = time.monotonic()
        try:
            sets = [
                generate_inputs(
                    definition, workload, k, secret=self.lane.secret, device=device, roots=self.roots
                )
                for k in range(self.config.num_input_sets)
            ]
        except InputError as exc:
            raise _TaskError(f"cannot generate inputs: {exc}") from None
        self._time("inputs", time.monotonic() - t0)
        axes = definition.axis_values(workload.axes)
        shapes = {n: definition.resolve_shape(n, axes) or () for n in definition.outputs}
        t0 = time.monotonic()
        refs = []
        keys = []
        for k, inputs in enumerate(sets):
            key = (reference_key(definition), workload.uuid, str(k), str(device), self.lane.secret.hex()[:8])
            keys.append(key)
            cached = self.lane.references.get(key)
            if cached is None:
                started = time.perf_counter()
                try:
                    cached = run_reference(definition, inputs, shapes)
                except ReferenceError as exc:
                    raise _TaskError(str(exc)) from None
                if device.type == "cuda":
                    torch.cuda.synchronize(device)  # the call's time, not its launches'
                self.lane.references.put(key, cached, call_ms=(time.perf_counter() - started) * 1e3)
            refs.append(cached)
        self._time("reference", time.monotonic() - t0)
        call_ms = [self.lane.references.call_ms(k) for k in keys]
        degenerate = degeneracy(refs, atol=self.config.atol, rtol=self.config.rtol)
        refusal = degenerate.refusal(list(definition.outputs), self.config.atol, self.config.rtol)
        if refusal:
            raise _TaskError(refusal)
        return WorkloadData(
            degenerate=degenerate,
            inputs=sets,
            references=refs,
            reference_call_ms=min((ms for ms in call_ms if ms is not None), default=None),
            output_shapes=shapes,
            output_dtypes={n: torch_dtype(s.dtype) for n, s in definition.outputs.items()},
            scalar_positions={
                n: i for i, n in enumerate(definition.inputs) if not isinstance(sets[0][n], torch.Tensor)
            },
            varied=variable_inputs(definition, workload) if self.config.vary_inputs else [],
            reference=lambda inputs: run_reference(definition, inputs, shapes),
        )

    def _workload(self, workload: Workload) -> Evaluation:
        """One workload: its data, a worker with the candidate, shared slots, then correctness, timing and
        the notes on the result.

        Raises:
            _TaskError: a harness failure (inputs, reference, worker start, buffers, a comparator).
        """
        self._current = workload.uuid
        data = self._data(workload)
        loaded = self._ensure_worker()
        if isinstance(loaded, Evaluation):
            return loaded
        slot_count = timing_slot_count(
            data,
            self.lane.device,
            self.config.num_input_sets,
            self.config.timing_slots,
            self.config.timing_slot_bytes,
            self.config.iterations,
        )
        try:
            slots = allocate_slots(loaded, data, slot_count, self.lane.device, self.config.timeouts.load)
        except OSError as exc:  # this process could not make the buffers: nobody's fault but the machine's
            self._discard(f"a buffer allocation failure ({exc})")
            raise _TaskError(f"could not make buffers for the worker: {exc}") from None
        except (WorkerError, AllocationRefused) as exc:  # the loaded candidate's worker answered (or not)
            self._discard(f"a buffer allocation failure ({exc})")
            failure = (
                worker_failure(exc, "sharing buffers", self.config.timeouts.load)
                if isinstance(exc, WorkerError)
                else CandidateFailure(EvaluationStatus.RUNTIME_ERROR, f"sharing buffers: {exc}")
            )
            return self._limit_evaluation(failure)
        try:
            correctness, call_ms = self._correctness(workload, loaded, slots, data)
            if self.lane.cpu_mode:
                performance = untimed_performance("CPU mode: nothing is timed without a GPU", call_ms)
                return self._evaluation(
                    EvaluationStatus.PASSED, correctness=correctness, performance=performance
                )
            performance, validated = self._timing(workload, slots, data, slot_count)
            self._annotate(workload, data, performance, correctness, validated)
            return self._evaluation(EvaluationStatus.PASSED, correctness=correctness, performance=performance)
        except CandidateFailure as failure:
            # keep only the facts: the exception's traceback holds the worker's buffers (IPC mappings)
            outcome = (failure.status, failure.log, failure.correctness, failure.worker_dead)
            if failure.limit is not None:
                self.report.limits_hit[workload.uuid] = failure.limit.sentence()
        except _TwinFailed as failed:
            outcome, failed_twin = None, failed
        finally:
            del slots
        if outcome is None:  # the candidate's buffers are released: its worker can go before the probe
            return self._blame_twin_failure(workload, data, slot_count, failed_twin.plan, str(failed_twin))
        status, log, failed_correctness, worker_dead = outcome
        if worker_dead:  # its buffers are released here, so the worker can be killed
            self._discard(f"{status.value} on workload {workload.uuid}")
        return self._evaluation(status, log, correctness=failed_correctness)

    def _blame_twin_failure(
        self, workload: Workload, data: WorkloadData, count: int, plan: ReferencePlan | None, failure: str
    ) -> Evaluation:
        """A comparator's twin failed next to the candidate: kill the candidate's worker and try the twins
        alone (:func:`fibserve.bench.timing.blame.solo_probe`). Working alone, the failure is the candidate's
        (RUNTIME_ERROR); failing alone too, the harness's.

        Raises:
            _TaskError: the twins fail without the candidate too.
        """
        self._discard(f"a timing twin failed next to it on workload {workload.uuid}")
        self.twins.discard(failure[:200])
        problem = solo_probe(self.twins, data, count, self.lane.device, plan, self.config)
        if problem is not None:
            raise _TaskError(f"{failure}; alone, with the candidate's worker gone, it failed too: {problem}")
        self.report.notes.append(
            f"workload {workload.uuid}: a timing twin failed next to the candidate and worked alone; the "
            "candidate is blamed (RUNTIME_ERROR)"
        )
        interference = interference_failure(failure)
        return self._evaluation(interference.status, interference.log)

    def _correctness(
        self, workload: Workload, worker: WorkerProcess, slots: Slots, data: WorkloadData
    ) -> tuple[Correctness, float]:
        """Every input set through slot 0, judged; the Correctness and the last call's wall time (ms).

        Raises:
            CandidateFailure: the candidate failed or computed wrong values.
        """
        self.progress("phase", {"uuid": workload.uuid, "phase": "correctness"})
        t0 = time.monotonic()
        audit = self.language == "triton" and self.config.enforce_source_policy
        result, call_ms = check_correctness(
            worker, slots, data, self.config, self.lane.device, audit_torch=audit
        )
        self._time("correctness", time.monotonic() - t0)
        extra = {"input_sets": len(data.inputs), "degenerate": data.degenerate.as_dict()}
        return correctness_of(result, self.config, extra), call_ms

    def _timing(
        self, workload: Workload, slots: Slots, data: WorkloadData, slot_count: int
    ) -> tuple[Performance, int]:
        """Interleaved timing against the comparators' twins, with the device's state before and after in
        ``performance.extra``; returns the performance and the number of timed outputs validated.

        Raises:
            CandidateFailure: the candidate failed while timed.
            _TwinFailed: a comparator's twin did not start or failed (whose fault is decided after the
                candidate's buffers are released, :meth:`_blame_twin_failure`).
            _TaskError: another process outside this service kept the device busy.
        """
        device = self.lane.device
        self.progress("phase", {"uuid": workload.uuid, "phase": "timing"})
        plan = self.twins.plan(data.reference_call_ms)
        try:
            sides = self.twins.sides(data, slot_count, device, plan)
        except TwinError as exc:
            raise _TwinFailed(str(exc), plan) from None
        t0 = time.monotonic()
        before = snapshot(device)
        twin_failure: str | None = None
        try:
            performance, validated = measure(
                slots, sides, data, self.config, device, plan, self.definition.name
            )
        except DeviceShared as exc:
            raise _TaskError(str(exc)) from None  # another tenant: nobody here is to blame
        except ReferenceTimingError as exc:
            twin_failure = str(exc)  # only the text: the exception's traceback holds the twins' buffers
        finally:
            del sides  # close the IPC mappings before a twin can be killed
        if twin_failure is not None:
            raise _TwinFailed(twin_failure, plan)
        after = snapshot(device)
        self._time("timing", time.monotonic() - t0)
        facts = TimingFacts.of(performance)
        for key, side in (("gpu_timed", facts.candidate_ms), ("gpu_timed_reference", facts.reference_ms)):
            if side is not None:
                self._time(key, side.mean * side.count / 1e3)
        facts.device_start = before.model_dump()
        facts.device_end = after.model_dump()
        performance.extra = facts.to_extra()
        return performance, validated

    def _annotate(
        self,
        workload: Workload,
        data: WorkloadData,
        performance: Performance,
        correctness: Correctness,
        validated: int,
    ) -> None:
        """What a reader of a timed result must know: timed outputs validated, the timing basis, a suspect
        L2 overwrite and the roofline check (notes in the report, facts in ``extra``)."""
        facts = TimingFacts.of(performance)
        correctness.extra["timed_outputs_validated"] = validated
        if facts.timing_basis == "device-synchronized":
            self.report.notes.append(
                f"workload {workload.uuid}: the candidate's work outlived its end event by "
                f"{facts.hidden_work_ms or 0:.3f} ms (work on another stream?); both sides were timed "
                "by the device-synchronized bound instead"
            )
        bias = facts.neighbour_bias
        if bias is not None and bias.flagged:
            self.report.notes.append(
                f"workload {workload.uuid}: the {facts.speedup_basis} ran {bias.ratio:.3f}x as long right after "
                f"the candidate's calls ({bias.after_candidate_ms:.4f} ms) as after its own "
                f"({bias.after_itself_ms:.4f} ms): "
                + (
                    f"beyond its own spread, so the speedup reported ({bias.speedup_after_itself:.4g}) and the "
                    f"{facts.speedup_basis}'s latency are from its calls after its own alone"
                    if bias.applied
                    else f"within its own spread; from its calls after its own alone the speedup is "
                    f"{bias.speedup_after_itself:.4g}"
                )
            )
        if facts.persisting_l2 is not None and facts.persisting_l2.candidate_max_bytes:
            self.report.notes.append(
                f"workload {workload.uuid}: the candidate set aside {facts.persisting_l2.candidate_max_bytes} "
                "bytes of L2 for persisting accesses; the carve-out and its lines were reset before every timed "
                "call, so nothing of it survived the cold-L2 overwrite"
            )
        if facts.l2_overwrite is not None and facts.l2_overwrite.flagged:
            self.report.notes.append(
                f"workload {workload.uuid}: the cold-L2 overwrite before each call ran "
                f"{facts.l2_overwrite.excess_ms:.4f} ms longer next to the candidate than next to the reference: "
                "work on another stream may have run before the start event and not been timed (launch on "
                "the harness's stream)"
            )
        axes = self.definition.axis_values(workload.axes)
        verdict = check_plausibility(
            self.lane.device_name,
            performance.latency_ms,
            self.definition,
            axes,
            data.inputs[0],
            data.references[0],
        )
        facts.roofline = verdict.roofline() if verdict is not None else None
        performance.extra = facts.to_extra()
        if self.config.plausibility and verdict is not None:
            correctness.extra["plausibility"] = verdict.model_dump(mode="json")
            if verdict.flagged:
                self.report.notes.append(
                    f"workload {workload.uuid}: {performance.latency_ms:.4g} ms is faster than the "
                    f"{verdict.device_model} roofline floor {verdict.floor_ms:.4g} ms: implausible, check the kernel"
                )
