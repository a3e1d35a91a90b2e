"""How many buffer slots each side of a timing pair gets (``timing_slot_count``): on a GPU many placements in
device memory within a byte budget, on CPU one per input set."""

from __future__ import annotations

import pytest
import torch
from fibserve.bench.config import resolve_config
from fibserve.bench.worker.slots import WorkloadData, timing_slot_count

GPU = torch.device("cuda", 0)  # only its type is read: no GPU is needed


def _data(sets: int, a_elems: int, out_elems: int) -> WorkloadData:
    """``sets`` input sets of one bf16 tensor of ``a_elems`` and a scalar; one fp32 output of ``out_elems``."""
    inputs = [{"a": torch.empty(a_elems, dtype=torch.bfloat16), "scale": 2.0} for _ in range(sets)]
    return WorkloadData(
        inputs=inputs,
        references=[{} for _ in range(sets)],
        output_shapes={"out": (out_elems,)},
        output_dtypes={"out": torch.float32},
    )


MIB = 1 << 20


def test_a_gpu_side_gets_up_to_the_most_slots_its_budget_holds():
    data = _data(3, MIB, MIB // 4)  # 2 MiB + 1 MiB a slot
    assert timing_slot_count(data, GPU, 3, 16, 1 << 30, 50) == 16
    assert timing_slot_count(data, GPU, 3, 16, 30 * MIB, 50) == 10
    assert timing_slot_count(data, GPU, 3, 16, 30 * MIB - 1, 50) == 9


def test_no_more_slots_than_a_trials_pairs():
    """A request with few iterations would leave slots it asked for unused (and name them in the result)."""
    assert timing_slot_count(_data(3, MIB, MIB // 4), GPU, 3, 16, 1 << 30, 5) == 5


def test_never_fewer_slots_than_input_sets_nor_more_sets_than_the_data_has():
    data = _data(3, MIB, MIB // 4)
    assert timing_slot_count(data, GPU, 3, 16, 0, 50) == 3
    assert timing_slot_count(data, GPU, 3, 16, 1 << 30, 1) == 3
    assert timing_slot_count(data, GPU, 5, 2, 1 << 30, 50) == 3  # five asked for, three made
    assert timing_slot_count(_data(1, MIB, MIB // 4), GPU, 3, 16, 0, 50) == 1


def test_slots_of_small_buffers_and_cpu_sides_keep_one_slot_per_input_set():
    """PyTorch's caching allocator serves requests of at most 1 MiB from shared segments: slots none of whose
    buffers is larger would not be more places, however many buffers they hold."""
    assert timing_slot_count(_data(3, MIB // 2, MIB // 4), GPU, 3, 16, 1 << 30, 50) == 3  # 1 MiB + 1 MiB
    assert timing_slot_count(_data(3, MIB // 2 + 1, 0), GPU, 3, 16, 1 << 30, 50) == 16
    assert timing_slot_count(_data(3, MIB, MIB // 4), torch.device("cpu"), 3, 16, 1 << 30, 50) == 3


@pytest.mark.parametrize("key", ["timing_slots", "timing_slot_bytes"])
def test_the_slot_settings_are_the_operators_not_a_requests(trace_set, key):
    definition = trace_set.definition("vector_add_f32")
    assert resolve_config(definition).timing_slots == 16
    with pytest.raises(ValueError, match=key):
        resolve_config(definition, {key: 1})
