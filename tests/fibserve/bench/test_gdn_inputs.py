"""Inputs of the gated delta net definitions (fibserve.bench.data.gdn): gates in their ranges, unit q and k,
a state of a mid-sequence's size, distinct pool slots, cu_seqlens with the workload's totals."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from fibserve.bench.data.gdn import STATE_STD
from fibserve.bench.data.inputs import InputError, generate_inputs
from fibserve.bench.data.variation import variable_inputs
from fibserve.datasets import default_root
from fibserve.trace.trace_set import TraceSet


@pytest.fixture(scope="module")
def bundled() -> TraceSet:
    return TraceSet.load(default_root())


def _inputs(bundled: TraceSet, name: str, index: int = -1, input_set: int = 0) -> tuple[dict, dict]:
    definition = bundled.definition(name)
    workload = bundled.workloads_for(name)[index]
    inputs = generate_inputs(definition, workload, input_set, secret=b"gdn", device="cpu")
    return inputs, definition.axis_values(workload.axes)


@pytest.mark.parametrize("name", ["gdn_decode_qk4_v8_d128_k_last", "gdn_mtp_qk8_v16_d128_k_last"])
def test_gates_are_in_their_ranges_and_spread_over_them(bundled: TraceSet, name: str) -> None:
    inputs, _ = _inputs(bundled, name)
    g = torch.exp(-torch.exp(inputs["A_log"]) * F.softplus(inputs["a"].float() + inputs["dt_bias"]))
    beta = torch.sigmoid(inputs["b"].float())
    assert bool(((g > 0) & (g <= 1)).all()) and bool(((beta > 0) & (beta < 1)).all())
    assert g.median() > 0.5 and g.min() < 0.5  # mostly slow forgetting, some heads fast
    assert beta.min() < 0.2 and beta.max() > 0.8
    assert inputs["A_log"].dtype == inputs["dt_bias"].dtype == torch.float32
    assert inputs["a"].dtype == inputs["b"].dtype == torch.bfloat16


def test_queries_and_keys_are_unit_vectors_and_the_state_has_its_spread(bundled: TraceSet) -> None:
    inputs, axes = _inputs(bundled, "gdn_decode_qk8_v16_d128_k_last")
    for name in ("q", "k"):
        norms = inputs[name].float().norm(dim=-1)
        assert inputs[name].dtype == torch.bfloat16
        torch.testing.assert_close(norms, torch.ones_like(norms), atol=1e-2, rtol=0)
    state = inputs["state"]
    assert state.dtype == torch.float32 and state.shape == (axes["batch_size"], 16, 128, 128)
    assert 0.9 * STATE_STD < state.std() < 1.1 * STATE_STD


def test_mtp_rows_read_distinct_pool_slots_that_change_with_the_input_set(bundled: TraceSet) -> None:
    first, axes = _inputs(bundled, "gdn_mtp_qk4_v8_d128_k_last", input_set=0)
    second, _ = _inputs(bundled, "gdn_mtp_qk4_v8_d128_k_last", input_set=1)
    slots = first["initial_state_indices"]
    assert (axes["batch_size"], axes["seq_len"], axes["pool_size"]) == (48, 4, 49)
    assert slots.dtype == torch.int32 and slots.unique().numel() == 48
    assert int(slots.min()) >= 0 and int(slots.max()) < 49
    assert not torch.equal(slots, second["initial_state_indices"])


def test_prefill_sequences_cover_the_tokens(bundled: TraceSet) -> None:
    inputs, axes = _inputs(bundled, "gdn_prefill_qk4_v8_d128_k_last", index=2)
    cu = inputs["cu_seqlens"]
    assert cu.dtype == torch.int64 and cu.numel() == axes["num_seqs"] + 1 == 5
    assert int(cu[0]) == 0 and int(cu[-1]) == axes["total_seq_len"] == 401
    assert bool((cu[1:] > cu[:-1]).all())


def test_more_rows_than_pool_slots_is_a_clear_input_error(bundled: TraceSet) -> None:
    definition = bundled.definition("gdn_mtp_qk4_v8_d128_k_last")
    workload = bundled.workloads_for(definition.name)[0]
    crowded = workload.model_copy(update={"axes": {**workload.axes, "batch_size": 9, "pool_size": 8}})
    with pytest.raises(InputError, match="9 batch rows need distinct state slots but the pool holds 8"):
        generate_inputs(definition, crowded, 0, secret=b"gdn", device="cpu")


@pytest.mark.parametrize("name", ["gdn_decode_qk4_v8_d128_k_last", "gdn_prefill_qk4_v8_d128_k_last"])
def test_timed_calls_keep_the_unit_keys_and_vary_the_rest(bundled: TraceSet, name: str) -> None:
    """A roll of the flattened k splices two rows (norm up to sqrt(2)): the recurrence may then grow instead of
    forgetting, so the timed calls' fresh content comes from v and the gates only."""
    definition = bundled.definition(name)
    varied = variable_inputs(definition, bundled.workloads_for(name)[-1])
    assert "q" not in varied and "k" not in varied
    assert "v" in varied
