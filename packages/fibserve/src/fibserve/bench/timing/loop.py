"""Interleaved timing of one workload (trusted side), after its correctness check.

On a GPU; the CPU tests run the same bookkeeping with ``perf_counter``. ``trials`` trials; in trial ``t`` slot
``s`` holds input set ``(s + t) mod K`` (input rotation: the contents behind each pointer change between
trials; on a GPU there are more slots than input sets, :func:`fibserve.bench.worker.slots.timing_slot_count`);
``warmup`` untimed calls, then ``iterations`` pairs on the slots in turn, each trial's turn starting further
on, of one candidate call and one call of what it is compared with (the baseline Solution, and the reference
as often as its budget allows: :mod:`fibserve.bench.timing.sides`), in alternating order, each with cold L2 and
device-wide synchronisation. All sides are timed the same way, in worker processes of the same construction
(the candidate's sandbox worker and one timing twin per comparator, :mod:`fibserve.bench.timing.twin`): before
each call the trusted side poisons that side's outputs and sends one request. A twin's outputs are poisoned
again after its call, so no comparator's output sits in exported memory while the candidate runs.
``speedup_factor`` is the median of the per-pair ratios ``primary / candidate`` (the baseline when the
definition has one).

The defences on the timed calls (:mod:`fibserve.bench.timing.checks`): right after every candidate reply its
outputs must hold no poison, and a sample drawn then is compared in full; after each trial, for every input
set, the last output of one slot that held it, drawn then, is compared in full; reported times must fit in the
round trip timed here, and the candidate's unexplained round trip must stay close to the twin's.
"""

from __future__ import annotations

import os
import random
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from fibserve.bench.config import EvalConfig
from fibserve.bench.correctness.check import judge
from fibserve.bench.data import variation
from fibserve.bench.data.variation import Variation
from fibserve.bench.failures import CandidateFailure, DeviceShared
from fibserve.bench.timing import checks, guard
from fibserve.bench.timing import statistics as stats
from fibserve.bench.timing.neighbour_bias import neighbour_bias
from fibserve.bench.timing.sides import (
    ReferencePlan,
    Side,
    check_side,
    comparison_extras,
    harness_fault,
    side_times,
)
from fibserve.bench.worker import clock
from fibserve.bench.worker.kernel_span import requested as spans_requested
from fibserve.bench.worker.pool import live_worker_pids
from fibserve.bench.worker.slots import (
    Slots,
    WorkerTimes,
    WorkloadData,
    fill,
    poison,
    scalars,
    sync,
    worker_call,
    worker_spans,
)
from fibserve.trace import EvaluationStatus, Performance, TimingFacts

_UNSEEN = secrets.SystemRandom()
"""Draws what the candidate must not predict from anything it sees (the validated slots)."""


@dataclass
class _Recorded:
    """A timed call request of this trial whose GPU times are still to be read (:meth:`_TimingLoop.read_spans`):
    its times are ``kept[index]`` (``kept`` None for a warm-up, whose times are not kept) and it made ``count``
    calls."""

    kept: list[WorkerTimes] | None
    index: int
    count: int


@dataclass
class _TimingLoop:
    """The state of one :func:`measure` call: what is timed, the time limit spent so far, the calls timed and
    the outputs checked (one object instead of counters shared by closures)."""

    slots: Slots
    sides: list[Side]
    data: WorkloadData
    config: EvalConfig
    device: torch.device
    l2_plan: clock.OverwritePlan | None
    used_s: float = 0.0
    """Wall time of the candidate's timed calls so far (s), against ``config.timeouts.timing``."""
    validated: int = 0
    """Timed outputs compared in full with the reference."""
    checked: int = 0
    """Timed candidate calls whose outputs were checked for poison right after the reply."""
    candidate_calls: list[WorkerTimes] = field(default_factory=list)
    candidate_wall_ms: list[float] = field(default_factory=list)
    """Round trip of each candidate call request here, per repeat (ms)."""
    unchecked: set[int] = field(default_factory=set)
    """Sides whose outputs are still to be checked against the reference in this trial."""
    probe: guard.BusyProbe | None = None
    """The device probe timed before each comparator call (:mod:`fibserve.bench.timing.guard`)."""
    candidate_pids: list[int] = field(default_factory=list)
    """Host pids of the candidate's sandbox, paused during comparator calls (refreshed every trial)."""
    twin_pids: list[int] = field(default_factory=list)
    """Host pids of the twins' sandboxes, paused during candidate calls alike."""
    previous: int | None = None
    """Who made the last timed call of the trial (-1: the candidate; :mod:`fibserve.bench.timing.neighbour_bias`)."""
    called: set[int] = field(default_factory=set)
    """Slots the candidate was called on in the current trial (its warm-up included)."""
    holding: dict[int, Variation] = field(default_factory=dict)
    """Slot -> the inputs the candidate's last call on it had (:mod:`fibserve.bench.data.variation`)."""
    rng: random.Random = field(default_factory=lambda: random.Random(secrets.randbits(64)))
    """Draws each call's variation: unpredictable to the candidate (its worker never sees this process)."""

    kernel_span: bool = False
    """Whether the workers also record each call's CUPTI span (:mod:`fibserve.bench.worker.kernel_span`)."""
    recorded: dict[int, list[_Recorded]] = field(default_factory=dict)
    """Who (-1: the candidate, else a side's index) -> its timed call requests of this trial, in order."""

    def __post_init__(self) -> None:
        self.probe = guard.BusyProbe(self.device)
        self.kernel_span = bool(self.l2_plan is not None and self.l2_plan.gate and spans_requested())

    def fresh(self, input_set: int) -> Variation:
        """Inputs never seen before in this evaluation, made from input set ``input_set``."""
        return variation.draw(self.data.varied, self.data.inputs[input_set], input_set, self.rng)

    def references(self, varied: Variation) -> dict[str, torch.Tensor]:
        """The reference outputs of a call with inputs ``varied`` (computed now, outside any timed call)."""
        if not varied.shifts:
            return self.data.references[varied.input_set]
        assert self.data.reference is not None, "varied inputs need WorkloadData.reference"
        outputs = self.data.reference(varied.inputs(self.data.inputs[varied.input_set]))
        sync(self.device)
        return outputs

    def _vary(self, slots: Slots, slot: int, varied: Variation) -> None:
        slots.require_alive()
        varied.write(slots.inputs[slot], self.data.inputs[varied.input_set])
        sync(self.device)

    @property
    def budget_s(self) -> float:
        return self.config.timeouts.timing

    def request(self, slot: int, input_set: int, repeat: int, warmup: bool = False) -> dict[str, Any]:
        """The timed call request for ``slot`` holding ``input_set``, ``repeat`` calls in a row (``warmup``:
        their stalls do not turn the release off, :func:`fibserve.bench.worker.clock.time_call`)."""
        return {
            "slot": slot,
            "scalars": scalars(self.data, input_set),
            "timed": True,
            "cold_l2": self.config.cold_l2,
            "l2_plan": list(self.l2_plan) if self.l2_plan else None,
            "kernel_span": self.kernel_span,
            "repeat": repeat,
            "warmup": warmup,
        }

    def candidate(self, slot: int, varied: Variation, warmup: bool = False) -> WorkerTimes:
        """One timed call of the candidate on ``slot`` with the inputs ``varied`` (written into the slot first),
        then the poison check and a sampled comparison.

        Raises:
            CandidateFailure: the time limit is spent, the call failed, or its outputs are wrong.
        """
        remaining = self.budget_s - self.used_s
        if remaining <= 0:
            raise CandidateFailure(
                EvaluationStatus.TIMEOUT, f"timing: candidate calls exceeded the {self.budget_s:.0f} s limit"
            )
        input_set = varied.input_set
        self._vary(self.slots, slot, varied)
        self.holding[slot] = varied
        self.called.add(slot)
        poison(self.slots, slot, self.device)
        with guard.paused(self.twin_pids):  # both sides reach their calls alike: each was paused before
            started = time.perf_counter()
            result = worker_call(
                self.slots.worker,  # type: ignore[arg-type]
                self.request(slot, input_set, 1, warmup),
                remaining,
                f"timed call, input set {input_set}",
            )
        elapsed = time.perf_counter() - started
        if self.l2_plan is not None and self.l2_plan.gate and result.gated is False:
            raise CandidateFailure(
                EvaluationStatus.RUNTIME_ERROR,
                f"timed call, input set {input_set}: the cold-L2 overwrite in the candidate's worker ran without "
                "its gate kernel (compiled at the worker's start, before the candidate loaded), so work on "
                "another stream could have finished inside it untimed; its timings cannot be trusted",
            )
        self.used_s += elapsed
        self.candidate_wall_ms.append(elapsed * 1e3)
        # Right after the reply, before anything else runs: outputs still poisoned mean the call replied
        # before its work was done (work hidden from the timer); a sample drawn only now, which the
        # candidate cannot predict, is compared in full.
        self.slots.require_alive()
        left = checks.poison_left(self.slots.outputs[slot])
        self.checked += 1
        call = f"timed call {len(self.candidate_calls) + 1} (slot {slot}, input set {input_set})"
        if left:
            try:  # the full comparison gives the result its errors (an INCORRECT_NUMERICAL carries them)
                judge(self.slots, slot, self.data, input_set, self.config, call, self.references(varied))
            except CandidateFailure as failure:
                raise CandidateFailure(
                    failure.status,
                    f"{call}: outputs {left} still held the poison when the worker replied (work finished after "
                    f"the reply is not timed)\n{failure.log}",
                    failure.correctness,
                ) from None
            raise CandidateFailure(  # poison left, yet every element matched: only an all-NaN reference does
                EvaluationStatus.RUNTIME_ERROR,
                f"{call}: outputs {left} still held the poison when the worker replied",
            )
        if secrets.randbelow(checks.SAMPLE_DENOMINATOR) == 0:
            judge(
                self.slots,
                slot,
                self.data,
                input_set,
                self.config,
                f"{call} (sampled)",
                self.references(varied),
            )
            self.validated += 1
        return result

    def compared(
        self, side_index: int, slot: int, varied: Variation, repeat: int = 1, warmup: bool = False
    ) -> WorkerTimes:
        """One timed call request to a comparator's twin on ``slot`` with the same inputs as the candidate's
        call it is paired with (``varied``); its first call of a trial is checked (baseline).

        Raises:
            ReferenceTimingError: the twin failed or disagrees with the reference (never the candidate's fault).
        """
        side = self.sides[side_index]
        input_set = varied.input_set
        with harness_fault(side):
            self._vary(side.slots, slot, varied)
        # the candidate's sandbox is stopped while what it is compared with runs (timing.guard)
        with guard.paused(self.candidate_pids), harness_fault(side):
            poison(side.slots, slot, self.device)
            assert self.probe is not None
            self.probe.wait_idle()  # nothing the candidate left queued may run beside the comparator
            result = worker_call(
                side.slots.worker,  # type: ignore[arg-type]
                self.request(slot, input_set, repeat, warmup),
                self.budget_s,
                f"timed {side.role} call",
                discount_post=True,
            )
        if side_index in self.unchecked:
            self.unchecked.discard(side_index)
            check_side(side, slot, self.references(varied), self.data.output_dtypes, input_set, self.config)
        # a twin's buffers are exported: never leave a comparator's output in them while a candidate runs
        with harness_fault(side):
            poison(side.slots, slot, self.device)
        return result

    def trial(self, trial: int) -> None:
        """Rotate the inputs, warm up, time ``iterations`` interleaved pairs, validate the last outputs."""
        holds = self._rotate(trial)
        # once per trial: processes started since are paused too. GPU only: pausing guards GPU time, and on a
        # loaded 2-core CPU machine a continued Triton-interpreter worker took ~8 ms longer to answer than
        # its twin, more than the CPU allowance of the round-trip check
        if self.device.type == "cuda":
            if self.slots.worker is not None:
                self.candidate_pids[:] = guard.sandbox_pids(self.slots.worker.proc.pid)
            self.twin_pids[:] = [
                pid
                for side in self.sides
                if side.slots.worker
                for pid in guard.sandbox_pids(side.slots.worker.proc.pid)
            ]
        self.previous = None
        self.called = set()
        self._warm_up(trial, holds)
        self._interleave(trial, holds)
        self.read_spans()
        if self.config.validate_timed_outputs:
            for s in self._validated_slots(holds):
                judge(
                    self.slots,
                    s,
                    self.data,
                    holds[s],
                    self.config,
                    f"timing trial {trial} (last timed call on slot {s})",
                    self.references(self.holding[s]),
                )
                self.validated += 1

    def _validated_slots(self, holds: list[int]) -> list[int]:
        """The slots whose last outputs are compared with the reference after a trial (``holds``: slot -> the
        input set it held): for each input set, one of the slots called with it in this trial, drawn now, after
        the calls, from the operating system's randomness (the loop's own generator also makes the variations
        the candidate reads), so the candidate cannot know which of its calls will be read."""
        called = sorted(self.called)
        return [
            _UNSEEN.choice([s for s in called if holds[s] == k]) for k in sorted({holds[s] for s in called})
        ]

    def _rotate(self, trial: int) -> list[int]:
        """Fill every slot of every side with the input set it holds in ``trial``; returns slot -> input set."""
        count = len(self.slots.inputs)
        holds = [(s + trial) % len(self.data.inputs) for s in range(count)]
        self.unchecked.update(i for i, side in enumerate(self.sides) if side.check)
        for s in range(count):
            fill(self.slots, s, self.data.inputs[holds[s]], self.device)
            for side in self.sides:
                with harness_fault(side):
                    fill(side.slots, s, self.data.inputs[holds[s]], self.device)
        return holds

    def _warm_up(self, trial: int, holds: list[int]) -> None:
        for _ in range(self.config.warmup):  # one request per call: each gets inputs of its own
            self._keep(-1, None, self.candidate(0, self.fresh(holds[0]), warmup=True))
        for k, side in enumerate(self.sides):
            if side.warmup(trial, self.config):
                self._keep(
                    k,
                    None,
                    self.compared(
                        k, 0, self.fresh(holds[0]), repeat=side.warmup(trial, self.config), warmup=True
                    ),
                )

    def _interleave(self, trial: int, holds: list[int]) -> None:
        """``iterations`` pairs on the slots in turn, candidate first on even iterations and last on odd ones.
        Each trial's turn starts ``iterations + 1`` slots after the last one's, so that the slots a trial visits
        once more than the others differ from trial to trial, and a comparator timed on every other pair
        (:meth:`Side.due`) meets odd slots as well as even ones."""
        count = len(holds)
        start = trial * (self.config.iterations + 1)
        for i in range(self.config.iterations):
            s = (start + i) % count
            index = len(self.candidate_calls)
            order = [-1] + [k for k, side in enumerate(self.sides) if side.due(index)]
            varied = self.fresh(holds[s])  # both sides of the pair get the same fresh inputs
            for who in order if i % 2 == 0 else reversed(order):
                if who < 0:
                    self._keep(who, self.candidate_calls, self.candidate(s, varied))
                else:
                    self._keep(who, self.sides[who].calls, self.compared(who, s, varied))
                    self.sides[who].paired.append(index)
                    self.sides[who].after_candidate.append(self.previous == -1)
                self.previous = who

    def _keep(self, who: int, kept: list[WorkerTimes] | None, times: WorkerTimes) -> None:
        """Append ``times`` (a request of ``who``: -1 the candidate, else a side's index) to ``kept`` (None: a
        warm-up's, not kept) and note it for :meth:`read_spans`."""
        if kept is not None:
            kept.append(times)
        if self.kernel_span:
            index = len(kept) - 1 if kept is not None else -1
            self.recorded.setdefault(who, []).append(_Recorded(kept, index, len(times.ms)))

    def read_spans(self) -> None:
        """Ask each worker for the GPU times (CUPTI spans) of its timed calls of this trial and put them in the
        kept times (:attr:`WorkerTimes.device`). A worker whose spans do not match its calls in number, or a
        request with a call of no span, leaves those times without: the latencies then stay on CUDA events
        (:func:`_performance`).

        Raises:
            CandidateFailure: the candidate's worker failed or broke the protocol.
            ReferenceTimingError: a comparator's did.
        """
        recorded, self.recorded = self.recorded, {}
        for who, requests in recorded.items():
            spans = self._spans(who)
            if len(spans) != sum(r.count for r in requests):
                continue
            read = iter(spans)
            for r in requests:
                mine = [next(read) for _ in range(r.count)]
                if r.kept is not None and all(m is not None for m in mine):
                    r.kept[r.index] = r.kept[r.index]._replace(device=mine)

    def forget_spans(self) -> None:
        """Read and drop what every worker recorded before this evaluation's timing (an evaluation that ended
        early leaves its twins' recording running), so that the first trial's spans match its calls."""
        if self.kernel_span:
            for who in range(-1, len(self.sides)):
                if (self.slots if who < 0 else self.sides[who].slots).worker is not None:
                    self._spans(who)

    def _spans(self, who: int) -> list[float | None]:
        """The spans ``who`` recorded (-1: the candidate, whose failure here is its own). A comparator's twin
        that cannot give them gives none (its calls stay on CUDA events): a failure there must not end in the
        solo probe, which does not record and would find nothing wrong but the candidate."""
        what = "reading the GPU times of the timed calls"
        if who < 0:
            return worker_spans(self.slots.worker, self.config.timeouts.correctness, what)  # type: ignore[arg-type]
        twin = self.sides[who].slots.worker
        try:
            return worker_spans(twin, self.config.timeouts.correctness, what)  # type: ignore[arg-type]
        except CandidateFailure:
            # a late reply is dropped here, so that the twin's next call reads its own (a twin still out of
            # step fails that call as the twin's own failure)
            twin.resync(self.config.timeouts.correctness)  # type: ignore[union-attr]
            return []


def measure(
    slots: Slots, sides: list[Side], data: WorkloadData, config: EvalConfig, device: torch.device,
    reference_plan: ReferencePlan | None = None, definition: str = "",
) -> tuple[Performance, int]:  # fmt: skip
    """Interleaved timing with input rotation and validation (GPU; on CPU the same bookkeeping runs with
    ``perf_counter``). ``slots`` belong to the candidate's worker; each of ``sides`` (same slot layout) to a
    twin worker running what the candidate is compared with (:mod:`fibserve.bench.timing.sides`; the first is the
    primary: the speedup and the timing checks are against it). ``reference_plan`` says why the reference is
    sampled or missing. Returns the performance and the number of validated timed outputs.

    Raises:
        CandidateFailure: TIMEOUT, RUNTIME_ERROR or INCORRECT_* of the candidate, or GPU work of the candidate
            that kept the device busy while a comparator was timed (:func:`fibserve.bench.timing.guard.busy_verdict`).
        DeviceShared: another process outside this service kept the device busy (a task-level error).
        ReferenceTimingError: a comparator's worker failed, or the baseline disagrees with the reference
            (a harness problem).
    """
    l2_plan = clock.overwrite_plan(str(device)) if config.cold_l2 and device.type == "cuda" else None
    loop = _TimingLoop(slots, sides, data, config, device, l2_plan)
    loop.forget_spans()
    for trial in range(config.trials):
        loop.trial(trial)
    assert loop.probe is not None
    busy = guard.busy_verdict(loop.probe, device, loop.candidate_pids, [os.getpid(), *live_worker_pids()])
    if busy is not None and busy.startswith("environment: "):
        raise DeviceShared(f"timing: {busy.removeprefix('environment: ')}")
    if busy is not None:
        raise CandidateFailure(EvaluationStatus.RUNTIME_ERROR, f"timing: {busy.removeprefix('candidate: ')}")
    return _performance(loop, reference_plan, definition), loop.validated


def _performance(loop: _TimingLoop, reference_plan: ReferencePlan | None, definition: str) -> Performance:
    """The Performance of a finished timing loop: latencies and speedup on the basis the timing checks
    allow, and the timing facts in ``extra``."""
    config, device, primary, plan = loop.config, loop.device, loop.sides[0], loop.l2_plan
    calls = loop.candidate_calls
    cand_ms, cand_bound = [c.ms[0] for c in calls], [c.bound[0] for c in calls]
    ref_ms, ref_bound = side_times(primary, "events"), side_times(primary, "bound")
    unexplained_ms = checks.unexplained_round_trip(
        [c.wall_ms for c in calls], cand_bound, [r.wall_ms for r in primary.calls], ref_bound, device,
        [sum(r.waited) for r in primary.calls],
    )  # fmt: skip
    basis, hidden_ms = checks.timing_basis(cand_ms, cand_bound, ref_ms, ref_bound)
    over_span = None
    if (
        basis == "events"
        and calls
        and primary.calls
        and all(c.device for side in loop.sides for c in side.calls)
    ):
        # the twins' spans are trusted (no candidate code runs there); the candidate's only count above what
        # its events less the twin's own events-over-span give (checks.device_times)
        ref_span = [r.device[0] for r in primary.calls]  # type: ignore[index]
        over_span = {"reference": checks.events_over_span(ref_ms, ref_span), "candidate": None}
        if all(c.device for c in calls):
            over_span["candidate"] = checks.events_over_span(cand_ms, [c.device[0] for c in calls])  # type: ignore[index]
        cand_span = [c.device[0] if c.device else 0.0 for c in calls]
        below = over_span["reference"] + checks.SPAN_TOLERANCE_MS
        cand_ms = checks.device_times(cand_ms, cand_bound, cand_span, below)
        basis = "device"
        ref_ms = side_times(primary, basis)
    overwrite = checks.overwrite_excess(
        [c.overwrite[0] for c in calls], [r.overwrite[0] for r in primary.calls]
    )
    if basis == "device-synchronized":
        cand_ms, ref_ms = cand_bound, ref_bound
    cand = stats.summarize(cand_ms)
    ref = stats.summarize(ref_ms)
    ratios = sorted(r / c for c, r in zip(cand_ms, ref_ms, strict=True) if c > 0)
    bias = neighbour_bias(
        side_times(primary, basis), primary.after_candidate, [cand_ms[i] for i in primary.paired]
    )
    facts = TimingFacts.model_validate(
        {
            "measured_on": "gpu" if device.type == "cuda" else "cpu",
            "method": "interleaved pairs, both sides in worker processes of the same construction, "
            f"speedup = median({primary.role}_ms / candidate_ms)",
            **comparison_extras(loop.sides, cand_ms, basis, reference_plan, definition),
            "timing_basis": basis,
            "events_over_span_ms": over_span,
            "hidden_work_ms": hidden_ms,
            "unexplained_round_trip_ms": unexplained_ms,
            "l2_overwrite": {
                "passes": plan.passes,
                "solo_ms": plan.solo_ms,
                "gate": plan.gate,
                "release": plan.release,
                "candidate_released": all(c.released for c in calls) if plan.release else None,
                "reference_released": all(r.released for r in primary.calls) if plan.release else None,
                **overwrite,
            }
            if plan
            else None,
            "comparator_overwrite_ungated": any(c.gated is False for side in loop.sides for c in side.calls),
            "persisting_l2": {
                "reset_before_each_timed_call": True,
                "candidate_max_bytes": max((b for c in calls for b in c.persisting_l2), default=0),
            }
            if plan
            else None,
            "candidate_ms": cand.model_dump(),
            "reference_ms": ref.model_dump(),
            "speedup_p10": stats.percentile(ratios, 10),
            "speedup_p90": stats.percentile(ratios, 90),
            "pairs": len(ratios),
            "candidate_wall_ms_median": stats.summarize(loop.candidate_wall_ms).median,
            "warmup": config.warmup,
            "iterations": config.iterations,
            "trials": config.trials,
            "input_sets": len(loop.data.inputs),
            "slots": len(loop.slots.inputs),
            "cold_l2": config.cold_l2,
            "l2_flush_bytes": clock.cold_l2_bytes(device) if config.cold_l2 else 0,
            "timed_outputs_validated": loop.validated,
            "timed_outputs_checked_for_poison": loop.checked,
            "comparators_timed_with_candidate_paused": device.type == "cuda",
            "busy_probe_ms": stats.summarize(loop.probe.samples).model_dump()
            if loop.probe and loop.probe.samples
            else None,
            "idle_wait_ms": stats.summarize(loop.probe.waits).model_dump()
            if loop.probe and loop.probe.waits
            else None,
            "neighbour_bias": bias,
        }
    )
    retimed = bias is not None and bias["applied"]
    return Performance(
        latency_ms=cand.median,
        reference_latency_ms=bias["after_itself_ms"] if retimed else ref.median,
        speedup_factor=bias["speedup_after_itself"] if retimed else stats.pair_speedup(cand_ms, ref_ms),
        extra=facts.to_extra(),
    )


def untimed_performance(reason: str, call_ms: float | None = None) -> Performance:
    """The Performance of a run without GPU timing: latencies and speedup null (not measured), marked
    ``measured_on: cpu``, ``timed: false`` with the reason."""
    facts = TimingFacts(measured_on="cpu", timed=False, reason=reason)
    if call_ms is not None:
        facts.cpu_call_wall_ms = call_ms
    return Performance(extra=facts.to_extra())
