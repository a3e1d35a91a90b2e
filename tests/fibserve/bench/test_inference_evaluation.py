"""End to end on CPU through the real evaluator (sandbox workers, three input sets, poisoned outputs, input
mutation checks): a paged causal prefill of the inference suite, on a small workload of the bundled
definition. The bundled baseline passes as a candidate; a kernel that reads the pages in id order instead
of through the page table fails, because the page ids are scattered and drawn anew for every input set."""

from __future__ import annotations

import pytest
from fibserve.bench import Evaluator
from fibserve.datasets.baselines import baseline_solution
from fibserve.trace import EvaluationStatus

pytestmark = pytest.mark.slow

NAME = "gqa_paged_prefill_causal_h16_kv1_d128_ps64"
SMALL = {"batch_size": 3, "len_indptr": 4, "total_q": 48, "num_kv_indices": 7, "num_pages": 16}

SORTED_PAGES = """

_reference = run


def run(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    return _reference(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices.sort().values, kv_last_page_len, sm_scale)
"""


def test_the_baseline_passes_and_a_kernel_ignoring_the_page_table_fails(trace_set) -> None:
    definition = trace_set.definition(NAME)
    public = trace_set.workloads_for(NAME)[0]
    workload = public.model_copy(update={"uuid": "small-" + public.uuid, "axes": SMALL})
    source = definition.reference + SORTED_PAGES  # a value-returning Python candidate, built like a baseline
    wrong = baseline_solution(definition, "pages_in_id_order", source, "reads the pages in id order")
    with Evaluator("cpu") as evaluator:
        passed = evaluator.evaluate(definition, trace_set.baseline_for(NAME), [workload])
        failed = evaluator.evaluate(definition, wrong, [workload])
    assert passed.task_error is None, passed.task_error
    evaluation = passed.traces[0].evaluation
    assert evaluation.status is EvaluationStatus.PASSED, evaluation.log
    assert evaluation.correctness.max_absolute_error == 0.0  # on CPU the baseline is the reference itself
    assert failed.traces[0].evaluation.status is EvaluationStatus.INCORRECT_NUMERICAL
