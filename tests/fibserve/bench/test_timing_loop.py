"""The timing loop (interleaving, input rotation, validation of timed outputs) driven on CPU.

On a GPU the same code times CUDA calls; here the workers time with perf_counter, which is enough to check the
bookkeeping, the reference's timing twin and the rotation defence without a GPU.
"""

from __future__ import annotations

import pytest
import torch
from fibserve.bench.config import resolve_config
from fibserve.bench.correctness.check import check_correctness
from fibserve.bench.failures import CandidateFailure, ReferenceTimingError
from fibserve.bench.timing.loop import measure
from fibserve.bench.timing.sides import Side
from fibserve.bench.timing.twin import ReferenceTwin, TwinError
from fibserve.bench.worker.pool import WorkerPool
from fibserve.bench.worker.slots import WorkloadData
from fibserve.trace import Environment, Evaluation, EvaluationStatus
from timing_helpers import CPU, setup_vector_add

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pool():
    pool = WorkerPool("cpu", spares=2, interpret_triton=True)
    yield pool
    pool.close()


def _reference_twin(pool, definition, data, count=3):
    """The reference's timing twin as the evaluator builds it, with ``count`` slots laid out like the
    candidate's."""
    twin = ReferenceTwin(pool, definition, resolve_config(definition), arch="sm_90a", note=print)
    return twin, twin.slots(data, count, CPU)


def _reference_side(twin, twin_slots):
    """The reference as the only (primary) side, as the evaluator times a definition without a baseline."""
    return [Side("reference", twin.solution.name, twin_slots)]


def _measured_requests(pool, trace_set, make_solution, monkeypatch, overrides, count=3):
    """``add_correct.py`` timed against the reference's twin, both with ``count`` slots; returns the
    performance, the validated outputs and every request sent, as ``(to the candidate, request)``."""
    from fibserve.bench.timing import loop as loop_module

    definition, worker, data, slots = setup_vector_add(
        pool, trace_set, make_solution, "add_correct.py", slots=count
    )
    twin, twin_slots = _reference_twin(pool, definition, data, count=count)
    real, sent = loop_module.worker_call, []

    def recorded(target, request, *args, **kwargs):
        sent.append((target is worker, request))
        return real(target, request, *args, **kwargs)

    monkeypatch.setattr(loop_module, "worker_call", recorded)
    try:
        performance, validated = measure(
            slots, _reference_side(twin, twin_slots), data, resolve_config(definition, overrides), CPU
        )
    finally:
        worker.kill()
        twin.discard()
    return performance, validated, sent


def _timing_failure(pool, trace_set, make_solution, kernel, overrides, *, correctness_first=False):
    """Run ``kernel`` through the timing loop against the reference's twin; returns the CandidateFailure it
    must end in (the test fails when it ends in none)."""
    definition, worker, data, slots = setup_vector_add(pool, trace_set, make_solution, kernel)
    twin, twin_slots = _reference_twin(pool, definition, data)
    config = resolve_config(definition, overrides)
    try:
        if correctness_first:
            check_correctness(worker, slots, data, config, CPU)
        with pytest.raises(CandidateFailure) as caught:
            measure(slots, _reference_side(twin, twin_slots), data, config, CPU)
    finally:
        worker.kill()
        twin.discard()
    # whatever the failure, it becomes the candidate's Evaluation as the session makes it (an INCORRECT_NUMERICAL
    # without correctness once crashed the evaluator: "status INCORRECT_NUMERICAL requires correctness")
    Evaluation(
        status=caught.value.status,
        environment=Environment(hardware="cpu"),
        timestamp="2026-12-03T00:00:00+00:00",
        log=caught.value.log,
        correctness=caught.value.correctness,
    )
    return caught.value


def test_interleaved_timing_bookkeeping(pool, trace_set, make_solution, tmp_path):
    definition, worker, data, slots = setup_vector_add(
        pool, trace_set, make_solution, "add_correct.py", "triton"
    )
    twin, twin_slots = _reference_twin(pool, definition, data)
    config = resolve_config(definition, {"warmup": 1, "iterations": 6, "trials": 2})
    try:
        check_correctness(worker, slots, data, config, CPU)
        performance, validated = measure(slots, _reference_side(twin, twin_slots), data, config, CPU)
        # the twin's buffers are exported: after each reference call its outputs are poisoned again
        assert all(bool(torch.isnan(slot["z"]).all()) for slot in twin_slots.outputs)
    finally:
        worker.kill()
        twin.discard()
    extra = performance.extra
    assert extra["pairs"] == 12 and validated >= 2 * 3  # one slot per input set and trial, plus samples
    assert extra["candidate_ms"]["count"] == 12 and extra["reference_ms"]["count"] == 12
    assert extra["timing_basis"] == "events"
    assert extra["timed_outputs_checked_for_poison"] == 2 * (1 + 6)  # every candidate reply, warmup included
    assert performance.speedup_factor > 0
    assert abs(extra["unexplained_round_trip_ms"]) < 5.0  # two alike workers: about the same round trip


def test_more_slots_than_input_sets_are_all_timed_and_one_slot_per_input_set_validated(
    pool, trace_set, make_solution, monkeypatch
):
    """On a GPU each side rotates over up to ``timing_slots`` buffer slots (placements), more than its input
    sets: every slot is timed as often as the others, and after each trial, for every input set, the last
    output of one slot that held it is compared in full, the slot drawn from the operating system's randomness
    (the loop's own generator makes the variations the candidate reads)."""
    import random

    import fibserve.bench.timing.checks as checks
    from fibserve.bench.timing import loop as loop_module

    class Drawn(random.Random):
        draws = 0

        def choice(self, seq):
            Drawn.draws += 1
            return super().choice(seq)

    monkeypatch.setattr(checks, "SAMPLE_DENOMINATOR", 10**9)  # only the validations after each trial
    monkeypatch.setattr(loop_module, "_UNSEEN", Drawn(7))  # repeatable here
    real_judge, judged = loop_module.judge, []

    def judge(slots_, slot, *args, **kwargs):
        judged.append(slot)
        return real_judge(slots_, slot, *args, **kwargs)

    monkeypatch.setattr(loop_module, "judge", judge)
    performance, validated, sent = _measured_requests(
        pool, trace_set, make_solution, monkeypatch, {"warmup": 1, "iterations": 10, "trials": 4}, count=5
    )
    called = [request["slot"] for mine, request in sent if mine and not request["warmup"]]
    assert performance.extra["slots"] == 5 and performance.extra["pairs"] == 40
    assert all(called.count(s) == 8 for s in range(5))
    assert validated == len(judged) == Drawn.draws == 4 * 3
    for trial in range(4):  # slot s holds input set (s + trial) % 3
        assert sorted((s + trial) % 3 for s in judged[3 * trial : 3 * trial + 3]) == [0, 1, 2]
    assert set(judged) - {0, 1, 2}  # drawn over all five slots, not the first three


def test_each_trial_starts_its_turn_over_the_slots_further_on(pool, trace_set, make_solution, monkeypatch):
    """With 16 slots and 50 pairs a trial visits two slots once more than the others, and a comparator timed on
    every other pair would meet only even slots: each trial's turn starts ``iterations + 1`` slots on."""
    _, _, sent = _measured_requests(
        pool, trace_set, make_solution, monkeypatch, {"warmup": 0, "iterations": 6, "trials": 2}, count=4
    )
    called = [request["slot"] for mine, request in sent if mine]
    # trial 1 starts 7 slots on: 7 mod 4 = 3
    assert called == [0, 1, 2, 3, 0, 1, 3, 0, 1, 2, 3, 0]


def test_pointer_cache_survives_one_trial_but_not_the_rotation(
    pool, trace_set, make_solution, tmp_path, monkeypatch
):
    import fibserve.bench.timing.checks as checks

    monkeypatch.setattr(checks, "SAMPLE_DENOMINATOR", 10**9)  # no sampled comparison: the rotation alone
    overrides = {"warmup": 0, "iterations": 3, "trials": 2}
    failure = _timing_failure(pool, trace_set, make_solution, "add_pointer_cache.py", overrides)
    assert failure.status is EvaluationStatus.INCORRECT_NUMERICAL
    assert "timing trial 1" in failure.log


def test_a_dead_reference_twin_is_a_harness_error_not_the_candidates(
    pool, trace_set, make_solution, tmp_path
):
    definition, worker, data, slots = setup_vector_add(pool, trace_set, make_solution, "add_correct.py")
    twin, twin_slots = _reference_twin(pool, definition, data)
    twin.worker.kill()
    config = resolve_config(definition, {"warmup": 0, "iterations": 2, "trials": 1})
    try:
        with pytest.raises(ReferenceTimingError, match=r"the reference .* could not be timed"):
            measure(slots, _reference_side(twin, twin_slots), data, config, CPU)
        assert worker.alive, "the candidate's worker is not retired for a harness failure"
    finally:
        worker.kill()


def test_a_reference_that_does_not_load_is_a_twin_error(pool, trace_set, tmp_path):
    definition = trace_set.definition("vector_add_f32").model_copy(
        update={"reference": "def run(x, y):\n    return x +"}
    )
    notes = []
    twin = ReferenceTwin(pool, definition, resolve_config(definition), arch="sm_90a", note=notes.append)
    with pytest.raises(TwinError, match="reference"):
        twin.slots(WorkloadData(inputs=[], references=[], output_shapes={}, output_dtypes={}), 1, CPU)
    assert twin.worker is None


def test_a_twin_that_cannot_share_its_buffers_once_is_replaced_not_blamed(
    pool, trace_set, make_solution, monkeypatch
):
    """On the H100 a fresh twin's buffers once failed to open (cuIpcOpenMemHandle, CUresult 201); the blame
    probe then found the twins working alone and refused the honest candidate. A fresh twin is asked once more."""
    from fibserve.bench.timing import twin as twin_module
    from fibserve.bench.worker.slots import AllocationRefused

    definition, worker, data, _ = setup_vector_add(pool, trace_set, make_solution, "add_correct.py")
    worker.kill()
    notes: list[str] = []
    twin = ReferenceTwin(pool, definition, resolve_config(definition), arch="sm_90a", note=notes.append)
    real, asked = twin_module.allocate_slots, []

    def first_open_fails(worker, *args, **kwargs):
        asked.append(worker)
        if len(asked) == 1:
            raise AllocationRefused(
                "cannot open the worker's CUDA IPC buffer: cuIpcOpenMemHandle failed (CUresult 201)"
            )
        return real(worker, *args, **kwargs)

    monkeypatch.setattr(twin_module, "allocate_slots", first_open_fails)
    try:
        slots = twin.slots(data, 3, CPU)
        assert len(slots.outputs) == 3
        assert len(asked) == 2 and asked[1] is not asked[0] and not asked[0].alive and twin.worker is asked[1]
        assert any("CUresult 201" in note for note in notes)
        del slots

        def never_opens(worker, *args, **kwargs):
            raise AllocationRefused("cannot open the worker's CUDA IPC buffer")

        monkeypatch.setattr(twin_module, "allocate_slots", never_opens)
        with pytest.raises(TwinError, match="twice in a row"):  # what the blame probe then judges
            twin.slots(data, 3, CPU)
        assert twin.worker is None
    finally:
        twin.discard()


def test_a_dead_twin_is_restarted_on_the_next_workload(pool, trace_set, make_solution, tmp_path):
    definition, worker, data, _ = setup_vector_add(pool, trace_set, make_solution, "add_correct.py")
    worker.kill()
    twin, _ = _reference_twin(pool, definition, data)
    first = twin.worker
    first.kill()
    try:
        slots = twin.slots(data, 3, CPU)
        assert twin.worker is not first and twin.worker.alive
        assert len(slots.outputs) == 3
    finally:
        twin.discard()
    assert twin.worker is None


def test_a_forged_reply_with_impossible_timings_is_the_candidates_runtime_error(
    pool, trace_set, make_solution, tmp_path
):
    overrides = {"warmup": 0, "iterations": 2, "trials": 1}
    failure = _timing_failure(pool, trace_set, make_solution, "add_forged_timing.py", overrides)
    assert failure.status is EvaluationStatus.RUNTIME_ERROR
    assert "ms of calls in a" in failure.log


def test_timed_calls_answered_without_times_are_the_candidates_runtime_error(pool, trace_set, make_solution):
    overrides = {"warmup": 0, "iterations": 2, "trials": 1}
    failure = _timing_failure(pool, trace_set, make_solution, "add_timed_without_times.py", overrides)
    assert failure.status is EvaluationStatus.RUNTIME_ERROR
    assert "timed call, input set 0: worker sent malformed timings" in failure.log


def test_the_twin_times_a_reference_whose_dtype_differs_from_the_definition(
    pool, trace_set, make_solution, tmp_path
):
    definition, worker, data, slots = setup_vector_add(
        pool, trace_set, make_solution, "add_correct.py", "triton"
    )
    # a float64 reference for a float32 definition: accepted by correctness (compared in fp32), so timing must too
    wide = definition.model_copy(update={"reference": "def run(x, y):\n    return x.double() + y.double()\n"})
    twin, twin_slots = _reference_twin(pool, wide, data)
    # Three timed pairs, one warmup: the round-trip check takes a median over pairs, and with two a single
    # call delayed by a loaded machine (9 ms once, in a CI-like run) counted as half the evidence.
    config = resolve_config(definition, {"warmup": 1, "iterations": 3, "trials": 1})
    try:
        performance, _ = measure(slots, _reference_side(twin, twin_slots), data, config, CPU)
    finally:
        worker.kill()
        twin.discard()
    assert performance.extra["reference_ms"]["count"] == 3


def test_a_candidate_that_patches_the_workers_timer_is_caught_by_the_round_trip(
    pool, trace_set, make_solution, tmp_path
):
    overrides = {"warmup": 1, "iterations": 6, "trials": 1}
    failure = _timing_failure(pool, trace_set, make_solution, "add_patches_timer.py", overrides)
    assert failure.status is EvaluationStatus.RUNTIME_ERROR
    assert "do not account for its calls" in failure.log


def test_work_left_running_after_the_reply_is_caught_by_the_poison(pool, trace_set, make_solution, tmp_path):
    overrides = {"warmup": 0, "iterations": 6, "trials": 1}
    failure = _timing_failure(  # honest while its correctness is checked, then hides its work
        pool,
        trace_set,
        make_solution,
        "add_finishes_after_reply.py",
        overrides,
        correctness_first=True,
    )
    assert failure.status is EvaluationStatus.INCORRECT_NUMERICAL
    assert "still held the poison when the worker replied" in failure.log
    assert failure.log.startswith(
        "timed call 2 (slot 1, input set 1)"
    )  # which call: the first it hid its work


def test_sampled_full_comparisons_catch_a_kernel_wrong_between_validations(
    pool, trace_set, make_solution, tmp_path, monkeypatch
):
    import fibserve.bench.timing.checks as checks

    monkeypatch.setattr(checks, "SAMPLE_DENOMINATOR", 1)  # sample every call, so the test is not random
    overrides = {"warmup": 1, "iterations": 6, "trials": 1}
    failure = _timing_failure(pool, trace_set, make_solution, "add_wrong_when_unobserved.py", overrides)
    assert failure.status is EvaluationStatus.INCORRECT_NUMERICAL
    assert "(sampled)" in failure.log


def test_no_timed_call_sees_input_content_twice(pool, trace_set, make_solution):
    """A kernel that answers wrong on any repeated content: it passes only because every timed call (warm-up
    included) gets content never seen before. With the variation off (``data.varied`` empty, as before), the
    timed calls repeat their input sets and the same kernel is caught at once."""
    overrides = {"warmup": 2, "iterations": 6, "trials": 2}
    definition, worker, data, slots = setup_vector_add(
        pool, trace_set, make_solution, "add_detects_repeats.py"
    )
    twin, twin_slots = _reference_twin(pool, definition, data)
    config = resolve_config(definition, overrides)
    try:
        check_correctness(worker, slots, data, config, CPU)
        performance, validated = measure(slots, _reference_side(twin, twin_slots), data, config, CPU)
        assert performance.latency_ms is not None and validated >= 2 * 3
        data.varied = []
        with pytest.raises(CandidateFailure) as caught:
            measure(slots, _reference_side(twin, twin_slots), data, config, CPU)
        assert caught.value.status is EvaluationStatus.INCORRECT_NUMERICAL
    finally:
        worker.kill()
        twin.discard()


def test_only_the_warm_up_requests_say_so(pool, trace_set, make_solution, monkeypatch):
    """Warm-up calls are flagged so that their stalls (a kernel's first launch, a library's first workspace
    allocation) do not turn the gate's release off for the timed calls (clock.time_call); on the H100 a twin's
    release was off for most calls of the first evaluation of M=8192. Timed calls must not carry the flag."""
    _, _, requests = _measured_requests(
        pool, trace_set, make_solution, monkeypatch, {"warmup": 2, "iterations": 4, "trials": 2}
    )
    sent = [(mine, request["repeat"], request["warmup"]) for mine, request in requests]
    per_trial = len(sent) // 2
    for trial in (sent[:per_trial], sent[per_trial:]):
        warm, timed = trial[:3], trial[3:]
        assert warm == [(True, 1, True), (True, 1, True), (False, 2, True)]  # the twin's in one request
        assert len(timed) == 8 and not any(flag for _, _, flag in timed)
