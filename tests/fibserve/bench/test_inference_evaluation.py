"""End to end on CPU through the real evaluator (sandbox workers, three input sets, poisoned outputs, input
mutation checks): a paged causal prefill of the inference suite, on a small workload of the bundled
definition. The bundled baseline passes as a candidate; a kernel that reads the pages in id order instead
of through the page table fails, because the page ids are scattered and drawn anew for every input set."""

from __future__ import annotations

import pytest
from fibserve.bench import Evaluator
from fibserve.trace import EvaluationStatus, Solution

pytestmark = pytest.mark.slow

NAME = "gqa_paged_prefill_causal_h16_kv1_d128_ps64"
SMALL = {"batch_size": 3, "len_indptr": 4, "total_q": 48, "num_kv_indices": 7, "num_pages": 16}

SORTED_PAGES = """

_reference = run


def run(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    return _reference(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices.sort().values, kv_last_page_len, sm_scale)
"""


@pytest.fixture(scope="module")
def evaluator():
    with Evaluator("cpu") as ev:
        yield ev


@pytest.fixture(scope="module")
def task(trace_set):
    definition = trace_set.definition(NAME)
    workload = trace_set.workloads_for(NAME)[0]
    return definition, workload.model_copy(update={"uuid": "small-" + workload.uuid, "axes": SMALL})


def _candidate(definition, source: str, name: str) -> Solution:
    return Solution.model_validate(
        {
            "name": name,
            "definition": definition.name,
            "author": "fibserve tests",
            "spec": {
                "language": "python",
                "target_hardware": ["any"],
                "entry_point": "kernel.py::run",
                "destination_passing_style": False,
            },
            "sources": [{"path": "kernel.py", "content": source}],
        }
    )


def test_the_baseline_passes_and_a_kernel_ignoring_the_page_table_fails(evaluator, task, trace_set) -> None:
    definition, workload = task
    baseline = trace_set.baseline_for(NAME)
    report = evaluator.evaluate(definition, baseline, [workload])
    assert report.task_error is None, report.task_error
    evaluation = report.traces[0].evaluation
    assert evaluation.status is EvaluationStatus.PASSED, evaluation.log
    assert evaluation.correctness.max_absolute_error == 0.0  # on CPU the baseline is the reference itself
    wrong = _candidate(definition, definition.reference + SORTED_PAGES, "pages_in_id_order")
    report = evaluator.evaluate(definition, wrong, [workload])
    assert report.traces[0].evaluation.status is EvaluationStatus.INCORRECT_NUMERICAL
