"""GPU-only: an attention definition timed against its cuDNN SDPA baseline (run by scripts/gpu_validate.sh)."""

from __future__ import annotations

import pytest
import torch
from fibserve.trace import Comparisons, EvaluationStatus

gpu = pytest.mark.gpu
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")


@gpu
@needs_gpu
@pytest.mark.parametrize("name", ["mha_with_lse_d128_causal", "mha_bwd_d64", "fp8_mha_with_lse_d96"])
def test_the_baseline_as_candidate_passes_and_every_number_is_labelled(trace_set, name):
    """The baseline Solution submitted as a candidate passes the reference's check (so do the tolerances),
    reads about 1x against itself, and the trace labels the baseline, the reference speedup and the roofline."""
    from fibserve.bench import Evaluator

    definition = trace_set.definition(name)
    workload = next(w for w in trace_set.workloads_for(name) if w.axes["seq_len"] == 1024)
    baseline = trace_set.baseline_for(name)
    candidate = baseline.model_copy(update={"name": "baseline_as_candidate"})
    with Evaluator("cuda:0") as ev:
        report = ev.evaluate(definition, candidate, [workload], overrides={"trials": 2}, baseline=baseline)
    assert report.task_error is None, report.task_error
    evaluation = report.traces[0].evaluation
    assert evaluation.status is EvaluationStatus.PASSED, evaluation.log
    seen = Comparisons.of(evaluation.performance)
    assert seen.speedup_basis == "baseline" and seen.baseline.solution == baseline.name
    assert 0.9 < evaluation.performance.speedup_factor < 1.1
    assert seen.vs_reference.timed and seen.vs_reference.speedup > 1  # the fp32 reference is far slower
    model = torch.cuda.get_device_name(0)  # the lent machine is an H200 or an H100
    assert seen.roofline.device_model in model and 0.05 < seen.roofline.fraction <= 1.0
