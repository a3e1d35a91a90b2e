"""The evaluator's flags read from typed facts, and the SFT row's normalisation and mask (no service needed)."""

from __future__ import annotations

import pytest
from eval_reports import report
from fibserve.trace import TimingFacts
from mini_ptx_agent.data.flags import kernel_flags
from mini_ptx_agent.data.rows import final_answer, loss_mask, normalise, token_counts


def test_each_evaluator_fact_becomes_its_flag() -> None:
    passed = report(["PASSED", "PASSED"])
    assert kernel_flags(passed) == []
    first, second = passed.traces
    facts = TimingFacts.model_validate(
        {
            "neighbour_bias": {"after_candidate_ms": 1.7, "after_itself_ms": 1.0, "ratio": 1.7,
                               "speedup_after_itself": 0.9, "pairs_after_itself": 10, "flagged": True},
            "timing_basis": "device-synchronized", "hidden_work_ms": 0.4,
        }
    )  # fmt: skip
    first.evaluation.performance.extra = facts.to_extra()
    second.evaluation.correctness.extra = {
        "degenerate": {"y": "constant"},
        "plausibility": {"device_model": "H200", "floor_ms": 0.5, "latency_ms": 0.1, "flagged": True},
    }
    flagged = passed.model_copy(update={"limits_hit": {"w1": "limit exceeded: memory (16.0 GiB)"}})
    kinds = [(f.kind, f.workload) for f in kernel_flags(flagged)]
    assert kinds == [("neighbour_bias", "w0"), ("integrity", "w0"), ("degenerate", "w1"),
                     ("implausible", "w1"), ("limit_hit", "w1")]  # fmt: skip
    second.evaluation.correctness.extra = {"degenerate": {"y": "near_constant"}}  # defended by the norm check
    assert [f.kind for f in kernel_flags(passed)] == ["neighbour_bias", "integrity"]


def test_rows_are_normalised_for_chat_templates_and_masked_on_the_final_message() -> None:
    messages = normalise(
        [
            {"role": "system", "content": "sys  \r\nprompt\n"},
            {"role": "user", "content": "task <think>not here</think>"},
            {"role": "user", "content": "more"},
            {"role": "assistant", "content": ""},
            {"role": "assistant", "content": final_answer("<think>why</think>", "def run(x):\n    pass\n", "triton")},
        ]
    )  # fmt: skip
    assert [m.role for m in messages] == ["system", "user", "assistant"]
    assert messages[0].content == "sys\nprompt" and messages[1].content == "task not here\n\nmore"
    assert messages[2].content == "<think>\nwhy\n</think>\n\n```python\ndef run(x):\n    pass\n```"
    assert loss_mask(messages) == [0, 0, 1]
    tokens = token_counts(messages)
    assert tokens.total == tokens.prompt + tokens.completion and tokens.completion > 4
    with pytest.raises(ValueError, match="ends with the assistant"):
        normalise([{"role": "user", "content": "x"}])
