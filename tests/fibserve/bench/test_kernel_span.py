"""A call's device time from CUPTI's activity records, and how far the trusted side lets it move a latency.

CPU only: the spans are computed from activity records made up here, the way torch.profiler returns them on a
GPU (name, start and end in us). The GPU half (a short kernel within 15% of its CUPTI time through a real
evaluation) is tests/fibserve/bench/test_gpu_release.py.
"""

from __future__ import annotations

import types

import pytest
import torch
from fibserve.bench.config import EvalConfig
from fibserve.bench.failures import CandidateFailure
from fibserve.bench.timing import checks
from fibserve.bench.timing.loop import _performance, _TimingLoop
from fibserve.bench.timing.sides import Side
from fibserve.bench.worker.clock import OverwritePlan
from fibserve.bench.worker.kernel_span import SpanRecording, call_spans, relative_us
from fibserve.bench.worker.l2_state import GATE_KERNEL
from fibserve.bench.worker.protocol import ProtocolViolation, Spans, parse_reply
from fibserve.bench.worker.slots import WorkerTimes
from fibserve.trace import TimingFacts

GATE = GATE_KERNEL


def test_each_calls_span_is_its_work_between_its_last_gate_pass_and_its_end_mark() -> None:
    events = [
        (GATE, 0.0, 100.0),  # call 1: the overwrite's first pass
        (GATE, 100.5, 205.0),  # its last pass, which waited for the release
        ("add_kernel", 206.0, 207.6),
        (GATE, 230.0, 231.0),  # its end mark, after the device was synchronized
        ("copy_returned", 240.0, 262.0),  # the worker's copy of a returned value: not the call's
        (GATE, 300.0, 400.0),  # call 2
        (GATE, 400.5, 500.0),
        ("add_kernel", 501.0, 502.5),
        (GATE, 520.0, 521.0),
        ("copy_returned", 530.0, 550.0),
    ]
    assert call_spans(events, [1, 1], 2, GATE) == pytest.approx([0.0016, 0.0015])


def test_the_span_runs_from_the_first_start_to_the_last_end_across_streams_and_gaps() -> None:
    events = [
        (GATE, 0.0, 100.0),
        ("side_stream", 99.5, 120.0),  # started as the gate's last blocks left the SMs: still the call's work
        ("main", 101.0, 110.0),
        ("memcpy", 130.0, 140.0),  # after a gap on the host: the gap is part of the call's latency
        (GATE, 150.0, 151.0),
        (GATE, 200.0, 300.0),  # the next call: none of its work is the first call's
        ("main", 301.0, 303.0),
        (GATE, 310.0, 311.0),
    ]
    assert call_spans(events, [1, 1], 1, GATE) == pytest.approx([0.0405, 0.002])


def test_a_call_timed_again_is_its_last_attempt() -> None:
    events = [
        (GATE, 0.0, 150.0),  # the release stalled: the gate ran out its wait
        ("main", 160.0, 170.0),
        (GATE, 180.0, 181.0),
        (GATE, 200.0, 300.0),  # timed again, without the release
        ("main", 340.0, 342.0),
        (GATE, 350.0, 351.0),
        (GATE, 400.0, 500.0),  # the next call
        ("main", 501.0, 502.0),
        (GATE, 510.0, 511.0),
    ]
    assert call_spans(events, [2, 1], 1, GATE) == pytest.approx([0.002, 0.001])


def test_work_that_ended_inside_the_gate_is_not_the_calls() -> None:
    events = [("leftover", 0.0, 50.0), (GATE, 10.0, 100.0), ("main", 101.0, 103.0), (GATE, 110.0, 111.0)]
    assert call_spans(events, [1], 1, GATE) == pytest.approx([0.002])


def test_a_call_that_ran_no_work_has_no_span() -> None:
    events = [
        (GATE, 0.0, 100.0),
        (GATE, 110.0, 111.0),
        (GATE, 200.0, 300.0),
        ("main", 301.0, 303.0),
        (GATE, 310.0, 311.0),
    ]
    assert call_spans(events, [1, 1], 1, GATE) == [None, pytest.approx(0.002)]


@pytest.mark.parametrize(
    ("events", "attempts"),
    [
        ([("main", 0.0, 1.0)], [1]),
        ([(GATE, 0.0, 100.0), ("main", 101.0, 102.0), (GATE, 110.0, 111.0)], [1, 1]),
        ([(GATE, 0.0, 100.0), ("main", 101.0, 102.0), (GATE, 102.5, 102.9), (GATE, 110.0, 111.0)], [1]),
    ],
    ids=["no gate", "a gate record lost", "a candidate's kernel named like the gate"],
)
def test_gates_that_do_not_match_the_calls_give_no_spans(events: list, attempts: list) -> None:
    assert call_spans(events, attempts, 1, GATE) == [None] * len(attempts)


def test_spans_keep_nanoseconds_of_epoch_timestamps() -> None:
    """libkineto's timestamps are ns since the epoch; as float us they are multiples of 0.25 us."""
    t0 = 1_764_944_000_123_456_789  # 2025-12-05 in ns
    records = [(GATE, t0, t0 + 1_000), ("add", t0 + 2_000, t0 + 3_410), (GATE, t0 + 9_000, t0 + 9_500)]
    assert call_spans(relative_us(records), [1], 1, GATE) == [pytest.approx(0.00141, abs=1e-9)]
    naive = [(name, start / 1e3, end / 1e3) for name, start, end in records]
    assert call_spans(naive, [1], 1, GATE) in ([0.00125], [0.0015])  # what the float conversion gave
    assert relative_us([]) == []


def test_a_recording_that_does_not_run_counts_no_calls_and_reads_none() -> None:
    recording = SpanRecording()
    recording.add(1)  # not started: a call the trusted side did not ask spans for
    assert recording.attempts == []
    assert recording.finish(GATE) == []


def test_a_comparators_span_stands_below_events_that_hold_host_time_and_is_held_at_the_bound() -> None:
    # a 26.8 us GEMM whose events ran 63.5 us past its span (H200, eleventh session); a span above its bound
    bound = [0.0890, 0.0310]
    assert checks.comparator_device_times(bound, [0.0268, 0.0400]) == pytest.approx([0.0268, 0.0310])


def test_a_candidates_span_counts_only_down_to_its_events_less_what_they_add_to_the_twins() -> None:
    # torch.matmul at M=70 (H200): 30.0 us of events, the twin's events add 2.5 us to its spans. An honest span
    # (26.8 us) stands; a span forged lower counts as 30.0 - 2.5 us less the tolerance at most; a span above the
    # bound is held at it
    ms, bound = [0.0300, 0.0300, 0.0300], [0.0310, 0.0310, 0.0310]
    times = checks.device_times(ms, bound, [0.0268, 0.0001, 0.0400], 0.0025 + checks.SPAN_TOLERANCE_MS)
    assert times == pytest.approx([0.0268, 0.0300 - 0.0025 - checks.SPAN_TOLERANCE_MS, 0.0310])
    # a one-element add: what the events add is most of its time, so the floor holds it
    assert checks.device_times([0.0033], [0.0035], [0.0], 0.0024 + checks.SPAN_TOLERANCE_MS) == pytest.approx(
        [checks.DEVICE_FLOOR * 0.0033]
    )


@pytest.mark.usefixtures("no_device_query")
@pytest.mark.parametrize(
    ("forged", "why"),
    [
        (0.0001, "far below"),
        (0.0043 - 0.0026 - 0.0009, "0.9 us under its events less the twin's figure"),
        (None, "spoiled"),
    ],
)
def test_forged_or_spoiled_spans_gain_the_candidate_at_most_the_tolerance(
    forged: float | None, why: str
) -> None:
    # the twin: 4.10 us of events, 1.5 us spans (2.6 us added); the candidate honestly 4.35 us and 1.75 us
    honest = _performance(_loop(0.00175, 0.0015), None, "vector_add")  # type: ignore[arg-type]
    cheat = _loop(0.0, 0.0015)
    cheat.candidate_calls = [_times(0.00435, forged) for _ in range(10)]
    cheated = _performance(cheat, None, "vector_add")  # type: ignore[arg-type]
    facts = TimingFacts.of(cheated)
    assert facts.timing_basis == "device"
    assert facts.events_over_span_ms["reference"] == pytest.approx(0.0026)
    # at worst its events less the twin's 2.6 us less the tolerance, or the floor, whichever is more: 0.87 us
    worst = max(0.00435 - 0.0026 - checks.SPAN_TOLERANCE_MS, checks.DEVICE_FLOOR * 0.00435)
    assert cheated.latency_ms >= worst - 1e-12, why
    assert cheated.speedup_factor <= honest.speedup_factor * 2.02, why  # 1.75 us -> 0.87 us at worst


def test_a_twin_that_cannot_give_its_spans_gives_none_and_is_not_blamed_on_anyone() -> None:
    from fibserve.bench.worker.pool import WorkerError

    class Dead:
        def request(self, message: dict, timeout: float) -> dict:
            raise WorkerError("died", "the worker exited", "")

        def log_tail(self) -> str:
            return ""

        def resync(self, timeout: float) -> bool:
            return False

    loop = types.SimpleNamespace(
        slots=types.SimpleNamespace(worker=Dead()),
        sides=[types.SimpleNamespace(slots=types.SimpleNamespace(worker=Dead()))],
        config=EvalConfig(),
    )
    assert _TimingLoop._spans(loop, 0) == []  # type: ignore[arg-type]
    with pytest.raises(CandidateFailure):  # the candidate's own worker: its failure is its own
        _TimingLoop._spans(loop, -1)  # type: ignore[arg-type]


def test_a_worker_whose_reply_came_too_late_answers_nothing_more() -> None:
    """A twin that times out on ``spans`` answers later; that reply must not be read as its next call's."""
    import time

    from fibserve.bench.worker.pool import WorkerError, WorkerProcess
    from fibserve.sandbox import SandboxUnavailable

    try:
        worker = WorkerProcess("cpu")
    except SandboxUnavailable as exc:
        pytest.skip(f"needs the sandbox: {exc}")
    try:
        worker.wait_ready(60)
        with pytest.raises(WorkerError, match="no answer"):
            worker.request({"op": "spans"}, 0)
        time.sleep(0.5)  # its reply arrives now, unread
        assert not worker.in_step
        with pytest.raises(WorkerError, match="out of step") as caught:
            # read in step, this request gets an error reply; read out of step, the spans reply
            worker.request({"op": "no such op"}, 10)
        assert caught.value.kind == "protocol"
        assert worker.resync(10) and worker.in_step  # the late spans reply read and dropped
        assert worker.request({"op": "spans"}, 10) == {"ok": True, "device_ms": []}
    finally:
        worker.kill()


def test_a_spans_reply_must_be_durations() -> None:
    assert Spans.model_validate({"ok": True, "device_ms": [0.008, None]}).device_ms == [0.008, None]
    for forged in ([-0.001], [float("nan")], ["fast"]):
        with pytest.raises(ProtocolViolation):
            parse_reply({"ok": True, "device_ms": forged}, Spans)


def test_the_twins_release_wait_gives_a_forging_candidate_no_room() -> None:
    cuda = torch.device("cuda")
    # the twin's host needed 0.24 ms per call to queue behind the gate's release (under RELEASE_HOST_MS): that
    # time is in its round trip but in none of its reported times. Both workers spend 0.16 ms on the round
    # trip besides. A candidate whose calls take 1.0 ms, but which reports 0.3 ms, hid behind the twin's wait
    # when the check compared raw round trips.
    cand_trip, cand_bound = [1.0 + 0.16] * 9, [0.3] * 9
    ref_trip, ref_bound, ref_waited = [1.0 + 0.16 + 0.24] * 9, [1.0] * 9, [0.24] * 9
    unchecked = checks.unexplained_round_trip(cand_trip, cand_bound, ref_trip, ref_bound, cuda)
    assert unchecked <= checks.UNEXPLAINED_MS["cuda"]  # the defence failing without the twin's wait
    with pytest.raises(CandidateFailure, match="do not account for its calls"):
        checks.unexplained_round_trip(cand_trip, cand_bound, ref_trip, ref_bound, cuda, ref_waited)


def _times(ms: float, device: float | None) -> WorkerTimes:
    return WorkerTimes(
        [ms],
        [ms + 0.0005],
        ms + 0.2,
        [0.1],
        gated=True,
        released=True,
        device=None if device is None else [device],
    )


def _loop(cand_device: float | None, ref_device: float | None) -> types.SimpleNamespace:
    """What :func:`_performance` reads of a finished timing loop: 10 interleaved pairs of a 4.35 us candidate
    and a 4.10 us baseline (CUDA events), with their CUPTI spans."""
    side = Side("baseline", "torch_add", None)  # type: ignore[arg-type]
    side.calls = [_times(0.00410, ref_device) for _ in range(10)]
    side.paired = list(range(10))
    side.after_candidate = [i % 2 == 0 for i in range(10)]
    return types.SimpleNamespace(
        config=EvalConfig(),
        device=torch.device("cuda"),
        sides=[side],
        l2_plan=OverwritePlan(1, 0.1, True, True),
        candidate_calls=[_times(0.00435, cand_device) for _ in range(10)],
        candidate_wall_ms=[0.3] * 10,
        data=types.SimpleNamespace(inputs=[{}]),
        slots=types.SimpleNamespace(inputs=[{}]),
        validated=0,
        checked=10,
        probe=None,
    )


@pytest.fixture
def no_device_query(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cold-L2 size is read from the device's properties: there is no device here."""
    monkeypatch.setattr("fibserve.bench.worker.clock.cold_l2_bytes", lambda device: 100 << 20)


@pytest.mark.usefixtures("no_device_query")
def test_both_sides_are_timed_by_their_spans_when_every_call_has_one() -> None:
    performance = _performance(_loop(0.0016, 0.0014), None, "vector_add")  # type: ignore[arg-type]
    facts = TimingFacts.of(performance)
    assert facts.timing_basis == "device"
    assert performance.latency_ms == pytest.approx(0.0016)
    assert performance.reference_latency_ms == pytest.approx(0.0014)
    assert performance.speedup_factor == pytest.approx(0.0014 / 0.0016)


@pytest.mark.usefixtures("no_device_query")
def test_without_a_span_on_either_side_both_stay_on_events() -> None:
    performance = _performance(_loop(0.0016, None), None, "vector_add")  # type: ignore[arg-type]
    assert TimingFacts.of(performance).timing_basis == "events"
    assert performance.latency_ms == pytest.approx(0.00435)
    assert performance.reference_latency_ms == pytest.approx(0.00410)


class _Trial:
    """What :meth:`_TimingLoop.read_spans` reads of a trial: the requests noted by ``_keep`` and each worker's
    answer to ``spans`` (canned here: the worker's half is :func:`call_spans` above)."""

    def __init__(self, answers: dict[int, list[float | None]]):
        self.kernel_span, self.recorded, self.answers = True, {}, answers
        self.asked: list[int] = []

    def _spans(self, who: int) -> list[float | None]:
        self.asked.append(who)
        return self.answers[who]

    _keep = _TimingLoop._keep
    read_spans = _TimingLoop.read_spans


def test_a_trials_spans_go_to_its_kept_calls_and_not_to_its_warm_ups() -> None:
    trial = _Trial({-1: [0.0009, 0.0016, 0.0017], 0: [0.0011, 0.0012, 0.0014, 0.0015]})
    candidate: list[WorkerTimes] = []
    baseline: list[WorkerTimes] = []
    trial._keep(-1, None, _times(0.004, None))  # the candidate's warm-up call
    trial._keep(0, None, WorkerTimes([0.004, 0.004], [0.005, 0.005], 0.5, [0.1, 0.1]))  # the twin's, repeat 2
    for _ in range(2):
        trial._keep(-1, candidate, _times(0.0043, None))
        trial._keep(0, baseline, _times(0.0041, None))
    trial.read_spans()
    assert sorted(trial.asked) == [-1, 0] and trial.recorded == {}
    assert [c.device for c in candidate] == [[0.0016], [0.0017]]
    assert [c.device for c in baseline] == [[0.0014], [0.0015]]


def test_spans_that_do_not_match_the_calls_leave_them_on_events() -> None:
    # a worker that answers one span too few (or too many: a candidate forging its reply) gets none at all,
    # and its calls keep their CUDA-event times; a call without a span (None) keeps them alike
    trial = _Trial({-1: [0.0016], 0: [0.0014, None]})
    candidate: list[WorkerTimes] = []
    baseline: list[WorkerTimes] = []
    for _ in range(2):
        trial._keep(-1, candidate, _times(0.0043, None))
        trial._keep(0, baseline, _times(0.0041, None))
    trial.read_spans()
    assert [c.device for c in candidate] == [None, None]
    assert [c.device for c in baseline] == [[0.0014], None]


def test_warming_cupti_leaves_no_recording_running_and_no_calls_counted() -> None:
    """A worker told to warm CUPTI (``SpanRecording.warm``) starts and stops an empty recording before it says it
    is ready; its first timed call then starts a recording of its own, as before."""
    recording = SpanRecording()
    recording.warm()
    assert not recording.on and recording.attempts == []
    recording.start(2)
    recording.add(1)
    assert recording.finish(GATE) in ([None], [])  # no GPU here: nothing recorded, or no recording at all
    assert not recording.on


@pytest.mark.parametrize(
    ("device", "env", "warm"), [("cuda:0", "1", True), ("cuda:0", "0", False), ("cpu", "1", False)]
)
def test_a_gpu_worker_is_told_to_load_cupti_as_it_starts_only_when_spans_are_asked_for(
    device: str, env: str, warm: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fibserve.bench.worker.forking import fork_request
    from fibserve.bench.worker.kernel_span import KERNEL_SPAN_ENV
    from fibserve.sandbox import WORKER_LIMITS

    monkeypatch.setenv(KERNEL_SPAN_ENV, env)
    assert fork_request(device, WORKER_LIMITS)["warm_spans"] is warm


def test_the_worker_tells_its_clock_which_calls_are_warm_ups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Warm-up stalls must not turn the gate's release off (clock.time_call); the flag travels from the request
    to the clock here, which no CPU timing shows (the clock looks at the gate only on a GPU)."""
    from fibserve.bench.worker import entry
    from fibserve.bench.worker.clock import Timed

    seen = []

    def clock(fn, device, flush, mark=False, warmup=False):
        fn()
        seen.append(warmup)
        return Timed(0.01, 0.01, 0.0)

    monkeypatch.setattr(entry, "time_call", clock)
    worker = entry.Worker("cpu")
    worker.fn = lambda: None
    worker.slots = [{"inputs": [], "outputs": []}]
    for flag in (True, False, None):
        request = {"op": "call", "slot": 0, "scalars": {}, "timed": True, "repeat": 2}
        if flag is not None:
            request["warmup"] = flag
        assert worker.call(request)["ok"]  # type: ignore[arg-type]
    assert seen == [True, True, False, False, False, False]
