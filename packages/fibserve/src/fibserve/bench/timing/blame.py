"""Whose fault a failed timing twin is (trusted side): the defence ``solo_probe``.

The twins (the baseline's and the reference's workers, :mod:`fibserve.bench.timing.comparators`) run trusted code, so
a twin failure used to be a harness error, the one outcome an RL loop retries. Sandboxed, a candidate cannot
find, signal or write into a twin (each worker has its own PID, IPC and mount namespaces; docs/security.md),
but it can still harm one through what they share: it can take all of the GPU's memory (the driver has no
per-process limit), keep the GPU or the host's CPUs busy past its reply, or fill the host's ``/dev/shm`` that
GPU workers share. Then the twin fails to start, to share its buffers or to answer in time, and blaming the
harness would let the candidate turn its own evaluation into an endless retry.

So a twin that fails next to a candidate is tried again alone (:func:`solo_probe`): the candidate's worker is
killed first (its memory, threads and GPU work go with it), fresh twins are started, and each runs one timed
call on the workload's first input set, whose outputs are compared with the reference. A comparator that works
alone failed because of the candidate, whose result is then a RUNTIME_ERROR it owns
(:func:`interference_failure`); one that fails alone too is the harness's, as before. A harm that outlives the
candidate's worker (files left in the host's ``/dev/shm``) is still blamed on the harness.
"""

from __future__ import annotations

import torch

from fibserve.bench.config import EvalConfig
from fibserve.bench.failures import CandidateFailure, ReferenceTimingError
from fibserve.bench.timing.comparators import Comparators
from fibserve.bench.timing.sides import ReferencePlan, check_side, harness_fault
from fibserve.bench.timing.twin import TwinError
from fibserve.bench.worker.clock import overwrite_plan
from fibserve.bench.worker.slots import WorkloadData, fill, poison, scalars, worker_call
from fibserve.trace import EvaluationStatus


def solo_probe(
    twins: Comparators,
    data: WorkloadData,
    count: int,
    device: torch.device,
    plan: ReferencePlan | None,
    config: EvalConfig,
) -> str | None:
    """Start the comparators of ``twins`` afresh (no candidate worker may be alive: the caller kills it
    first) and time one call of each on input set 0 of ``data`` in slot 0 of ``count`` slots, checking its
    outputs against the reference. Returns None when every comparator worked, else what failed.

    The twins are left running for the workload's next phase when they worked, and discarded when not."""
    twins.discard()
    l2_plan = overwrite_plan(str(device)) if config.cold_l2 and device.type == "cuda" else None
    request = {
        "slot": 0,
        "scalars": scalars(data, 0),
        "timed": True,
        "cold_l2": config.cold_l2,
        "l2_plan": list(l2_plan) if l2_plan else None,
        "repeat": 1,
        "warmup": True,  # the twins are kept for the timing: a first launch's stall here must not count
    }
    try:
        sides = twins.sides(data, count, device, plan)
        for side in sides:
            with harness_fault(side):
                fill(side.slots, 0, data.inputs[0], device)
                poison(side.slots, 0, device)
                worker_call(side.slots.worker, request, config.timeouts.correctness, f"{side.role} alone")  # type: ignore[arg-type]
            check_side(side, 0, data.references[0], data.output_dtypes, 0, config)
        del sides  # close the IPC mappings while the twins are alive
    except (TwinError, ReferenceTimingError) as exc:
        problem = str(exc)
        twins.discard(f"a failed solo probe ({problem[:200]})")
        return problem
    return None


def interference_failure(failure: str) -> CandidateFailure:
    """The candidate's RUNTIME_ERROR for a twin that failed next to it (``failure``, the twin's error) and
    worked alone (:func:`solo_probe`)."""
    return CandidateFailure(
        EvaluationStatus.RUNTIME_ERROR,
        "interfered with the timing twin: a comparator's worker failed while this candidate's worker was alive "
        "and worked once it was gone (a candidate that holds the GPU's memory, or keeps the GPU or the host "
        "busy after replying, does this); the candidate's result is refused\n"
        f"the comparator's failure: {failure[-3000:]}",
    )
