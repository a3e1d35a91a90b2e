"""Helpers for the CPU timing-loop tests: one vector_add_f32 candidate loaded in a worker, with its data."""

from __future__ import annotations

import torch
from fibserve.bench.candidate import prepare
from fibserve.bench.data.inputs import generate_inputs, torch_dtype
from fibserve.bench.data.reference import run_reference
from fibserve.bench.data.variation import variable_inputs
from fibserve.bench.worker.slots import WorkloadData, allocate_slots

CPU = torch.device("cpu")


def setup_vector_add(pool, trace_set, make_solution, kernel, language="python", dps=True, slots=3):
    """``(definition, worker, data, slots)``: ``kernels/<kernel>`` loaded in a worker of ``pool`` for the
    first vector_add_f32 workload, three input sets with their reference outputs, ``slots`` slots; every timed
    call gets fresh inputs as in an evaluation (``data.varied``)."""
    definition = trace_set.definition("vector_add_f32")
    workload = trace_set.workloads_for("vector_add_f32")[0]
    solution = make_solution(kernel, "vector_add_f32", language=language, dps=dps)
    prepared = prepare(definition, solution, arch="sm_90a", timeout=60)
    worker = pool.acquire(120)
    assert worker.load(prepared.load, 60)["ok"]
    axes = definition.axis_values(workload.axes)
    shapes = {n: definition.resolve_shape(n, axes) for n in definition.outputs}
    sets = [generate_inputs(definition, workload, k, secret=b"t", device="cpu") for k in range(3)]
    data = WorkloadData(
        inputs=sets,
        references=[run_reference(definition, s, shapes) for s in sets],
        output_shapes=shapes,
        output_dtypes={n: torch_dtype(s.dtype) for n, s in definition.outputs.items()},
        varied=variable_inputs(definition, workload),
        reference=lambda inputs: run_reference(definition, inputs, shapes),
    )
    return definition, worker, data, allocate_slots(worker, data, slots, CPU, 60)
