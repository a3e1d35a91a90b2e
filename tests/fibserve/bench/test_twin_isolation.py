"""The reference's timing twin (issue 20, item 1): a sandboxed candidate cannot find, signal or write into it,
and a twin that fails next to a candidate anyway is the candidate's fault when it works alone (a status the
candidate owns), the harness's when it fails alone too. On CPU, with real sandbox workers; the GPU attack (a
candidate holding the GPU's memory) is in test_gpu_hardening.py."""

from __future__ import annotations

import json

import pytest
from fibserve.bench.config import resolve_config
from fibserve.bench.correctness.check import check_correctness
from fibserve.bench.failures import ReferenceTimingError
from fibserve.bench.timing.blame import interference_failure, solo_probe
from fibserve.bench.timing.comparators import Comparators
from fibserve.bench.timing.loop import measure
from fibserve.bench.worker.pool import WorkerPool
from fibserve.trace import EvaluationStatus
from timing_helpers import CPU, setup_vector_add

pytestmark = pytest.mark.slow

SMALL = {"warmup": 1, "iterations": 4, "trials": 1}


@pytest.fixture(scope="module")
def pool():
    pool = WorkerPool("cpu", spares=1)
    if pool.mode != "bwrap":
        pool.close()
        pytest.skip(f"needs the bubblewrap sandbox (mode {pool.mode})")
    yield pool
    pool.close()


def _twins(pool, definition):
    config = resolve_config(definition, SMALL)
    return Comparators(pool, definition, None, config, arch="sm_90a", note=print), config


def test_a_candidate_cannot_find_signal_or_write_into_the_twin(pool, trace_set, make_solution, tmp_path):
    definition, worker, data, slots = setup_vector_add(pool, trace_set, make_solution, "add_attacks_twin.py")
    twins, config = _twins(pool, definition)
    try:
        sides = twins.sides(data, 3, CPU, None)  # the twin is up before the candidate's first call
        check_correctness(worker, slots, data, config, CPU)  # the attack runs in the first call
        performance, _ = measure(slots, sides, data, config, CPU)
        twin_alive = twins.reference_twin.worker is not None and twins.reference_twin.worker.alive
        log = worker.log_tail()
    finally:
        del slots
        worker.kill()
        twins.discard()
    line = next(x for x in log.splitlines() if x.startswith("TWIN-ATTACK "))
    found = json.loads(line.removeprefix("TWIN-ATTACK "))
    assert found["reached"] == [] and found["forged"] == 0, found
    # it sees its siblings, the twin among them, in its zygote's /proc (docs/security.md): the attack was tried
    assert len(found["visible"]) >= 2, found
    assert twin_alive and performance.extra["pairs"] == 4


def test_a_twin_harmed_next_to_the_candidate_that_works_alone_is_the_candidates_fault(
    pool, trace_set, make_solution, tmp_path
):
    definition, worker, data, slots = setup_vector_add(pool, trace_set, make_solution, "add_torch_returning.py", dps=False)  # fmt: skip
    twins, config = _twins(pool, definition)
    try:
        sides = twins.sides(data, 3, CPU, None)
        twins.reference_twin.worker.kill()  # what a candidate that reached the twin would do
        with pytest.raises(ReferenceTimingError) as harmed:
            measure(slots, sides, data, config, CPU)
        del sides
    finally:
        del slots
        worker.kill()  # the evaluator kills the candidate's worker before the probe
    try:
        assert solo_probe(twins, data, 3, CPU, None, config) is None
        assert twins.reference_twin.worker is not None and twins.reference_twin.worker.alive  # kept for use
    finally:
        twins.discard()
    failure = interference_failure(str(harmed.value))
    assert failure.status is EvaluationStatus.RUNTIME_ERROR
    assert failure.log.startswith("interfered with the timing twin") and "could not be timed" in failure.log


def test_a_twin_that_fails_alone_too_is_a_harness_error(pool, trace_set, make_solution, tmp_path):
    definition = trace_set.definition("vector_add_f32")
    broken = definition.model_copy(
        update={"reference": "def run(x, y):\n    raise RuntimeError('reference broke')\n"}
    )
    _, worker, data, slots = setup_vector_add(
        pool, trace_set, make_solution, "add_torch_returning.py", dps=False
    )
    del slots
    worker.kill()
    twins, config = _twins(pool, broken)
    problem = solo_probe(twins, data, 3, CPU, None, config)
    assert problem is not None and "reference broke" in problem
    assert twins.reference_twin.worker is None  # discarded after the failed probe
