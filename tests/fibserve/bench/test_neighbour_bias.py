"""The neighbour-effect bound (issue 20, item 6) and the L2-state and twin-guard helpers that need no GPU."""

from __future__ import annotations

import math

import torch
from fibserve.bench.timing import guard
from fibserve.bench.timing.neighbour_bias import neighbour_bias
from fibserve.bench.worker.clock import ColdL2, OverwritePlan
from fibserve.bench.worker.l2_state import persisting_l2_bytes, reset_persisting_l2, warm_gate


def test_a_comparator_slowed_by_the_candidate_next_to_it_is_bounded_by_its_calls_after_itself():
    # c t | t c | c t | t c: the comparator's calls alternate between right after the candidate and after itself
    after = [True, False] * 50
    side_ms = [
        0.066 if flag else 0.0336 for flag in after
    ]  # the H200's M=232 reference beside a 35 ms kernel
    candidate_ms = [35.0] * 100
    bias = neighbour_bias(side_ms, after, candidate_ms)
    assert bias["flagged"] and math.isclose(bias["ratio"], 0.066 / 0.0336)
    assert math.isclose(bias["speedup_after_itself"], 0.0336 / 35.0)
    even = neighbour_bias([0.7] * 100, after, [0.7] * 100)
    assert not even["flagged"] and even["ratio"] == 1.0
    assert neighbour_bias([0.7], [True], [0.7]) is None  # no call after itself: nothing to bound with


def test_the_device_probe_and_the_l2_state_are_no_ops_without_a_gpu():
    cpu = torch.device("cpu")
    probe = guard.BusyProbe(cpu)
    assert probe.wait_idle() == 0.0 and not probe.busy
    assert guard.busy_verdict(probe, cpu, [], []) is None
    assert persisting_l2_bytes(cpu) is None and reset_persisting_l2(cpu) is None and warm_gate(cpu) is False
    flush = ColdL2(cpu, OverwritePlan(2, 0.1, True))
    assert flush.gate is None and flush.plan == OverwritePlan(2, 0.1, True)


def test_contexts_are_attributed_to_the_candidate_the_service_or_a_stranger():
    started, strangers = guard.foreign_contexts([10, 11, 20, 99], candidate_tree=[9, 10, 11], ours=[1, 20])
    assert started == [10, 11] and strangers == [99]
    assert guard.foreign_contexts([10, 20], [9, 10], [20]) == (
        [],
        [],
    )  # its worker's one context is fine


def test_a_comparator_slowed_beyond_its_own_spread_is_retimed_from_its_calls_after_itself():
    """A kernel that leaves work running doubled the baseline timed after it; the reported speedup must come
    from the baseline's calls after itself then, not from the inflated ones. Noise within the baseline's own
    spread is only noted."""
    after = [True, False] * 50
    leftover = neighbour_bias([0.126 if flag else 0.010 for flag in after], after, [1.2] * 100)
    assert leftover["flagged"] and leftover["applied"]
    assert math.isclose(leftover["speedup_after_itself"], 0.010 / 1.2)
    noisy_itself = [0.010 + 0.004 * (i % 10) / 9 for i in range(50)]  # 0.010..0.014 ms after itself
    noisy = [0.0127 if flag else noisy_itself.pop() for flag in after]  # 0.0127 after the candidate
    within = neighbour_bias(noisy, after, [1.0] * 100)
    assert within["flagged"] and not within["applied"]  # above its median by > 5%, inside its p90
