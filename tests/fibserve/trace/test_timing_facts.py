"""The timing facts of ``performance.extra``: written through one model, read back typed, keys unchanged."""

from __future__ import annotations

import pytest
from fibserve.bench.timing.loop import untimed_performance
from fibserve.trace import Performance, TimingFacts
from pydantic import ValidationError


def test_an_untimed_result_carries_exactly_its_four_keys_and_reads_back() -> None:
    performance = untimed_performance("CPU mode", 1.5)
    assert performance.extra == {
        "measured_on": "cpu",
        "timed": False,
        "reason": "CPU mode",
        "cpu_call_wall_ms": 1.5,
    }
    facts = TimingFacts.of(performance)
    assert facts.timed is False and facts.measured_on == "cpu" and facts.candidate_ms is None


def test_explicit_nulls_stay_and_unknown_keys_are_ignored_on_reading() -> None:
    facts = TimingFacts.of(Performance(extra={"baseline": None, "no_baseline": "why", "later_key": 1}))
    assert facts.to_extra() == {"baseline": None, "no_baseline": "why"}
    assert TimingFacts.of(None).to_extra() == {}


def test_a_known_key_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(ValidationError, match="candidate_ms"):
        TimingFacts.of(Performance(extra={"candidate_ms": {"median": "fast"}}))
