"""Candidate runner: the small program compute-sanitizer and ncu launch (``python -m fibserve.tools.runner``).

It loads an already-built candidate exactly as the bench's sandbox worker does
(:class:`fibserve.bench.worker.entry.Worker`), creates seeded inputs for one workload
(:func:`fibserve.bench.data.inputs.generate_inputs`), allocates the outputs, and calls the candidate:

- ``calls: 1`` (sanitize): one call, then a device synchronize so that asynchronous errors surface here;
- ``calls: 2`` (profile): one warm-up call (Triton JIT, lazy loading), then one measured call inside the NVTX
  push/pop range ``nvtx_range``, which ncu selects with ``--nvtx --nvtx-include <range>/``.

Input: one JSON file (see :func:`runner_request`). Output: a last stdout line ``FIBSERVE_RUNNER {json}``;
exit status 0 on success, 3 when loading or calling the candidate failed (traceback printed), 2 on a bad
request. This process holds no reference outputs; it is as untrusted as the candidate it runs.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

RESULT_PREFIX = "FIBSERVE_RUNNER "
"""Prefix of the runner's final stdout line."""

INPUT_SECRET = b"fibserve.tools"
"""Seed secret of the runner's inputs: tool runs judge memory safety and speed, not correctness, so the inputs
need not be hidden from the candidate."""

DEFAULT_NVTX_RANGE = "fibserve_measured"
"""NVTX range around the measured call of a profile."""


def runner_request(
    definition: Any,
    workload: Any,
    load: dict[str, Any],
    *,
    device: str,
    calls: int,
    roots: list[Path],
    nvtx_range: str | None = None,
) -> dict[str, Any]:
    """The JSON the runner reads.

    Args:
        definition, workload: :mod:`fibserve.trace` models.
        load: the sandbox worker's ``load`` request from :func:`fibserve.bench.candidate.prepare`.
        device: ``cuda:0`` (the tool process sees only its lane's GPU) or ``cpu``.
        calls: 1 (sanitize) or 2 (warm-up + measured, profile).
        roots: trace-set roots for safetensors inputs.
        nvtx_range: NVTX range name around the last call (profile).
    """
    if calls not in (1, 2):
        raise ValueError(f"calls must be 1 or 2, got {calls}")
    return {
        "definition": definition.model_dump(mode="json"),
        "workload": workload.model_dump(mode="json"),
        "load": load,
        "device": device,
        "calls": calls,
        "roots": [str(r) for r in roots],
        "nvtx_range": nvtx_range,
    }


def run(request: dict[str, Any]) -> dict[str, Any]:
    """Load the candidate and call it ``request["calls"]`` times; returns a summary (raises on failure)."""
    import torch

    from fibserve.bench.data.inputs import generate_inputs, torch_dtype
    from fibserve.bench.worker.entry import Worker
    from fibserve.trace import Definition, Workload

    definition = Definition.model_validate(request["definition"])
    workload = Workload.model_validate(request["workload"])
    device = str(request["device"])
    worker = Worker(device)
    loaded = worker.load(request["load"])
    if not loaded.get("ok"):
        raise RuntimeError(f"could not load the candidate: {loaded.get('error')}")
    inputs = generate_inputs(
        definition, workload, 0, secret=INPUT_SECRET, device=device, roots=[Path(r) for r in request["roots"]]
    )
    outputs = []
    for name, spec in definition.outputs.items():
        shape = definition.resolve_shape(name, workload.axes) or ()
        outputs.append(torch.empty(shape, dtype=torch_dtype(spec.dtype), device=device))
    args = list(inputs.values())

    def call() -> None:
        if worker.dps:
            worker.fn(*args, *outputs)
        else:
            worker.fn(*args)
        if worker.device.type == "cuda":
            torch.cuda.synchronize(worker.device)

    calls = int(request["calls"])
    nvtx_range = request.get("nvtx_range")
    for index in range(calls):
        measured = index == calls - 1 and nvtx_range and worker.device.type == "cuda"
        if measured:
            torch.cuda.nvtx.range_push(nvtx_range)
        try:
            call()
        finally:
            if measured:
                torch.cuda.nvtx.range_pop()
    return {"ok": True, "calls": calls, "device": device, "workload": workload.uuid}


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m fibserve.tools.runner REQUEST.json``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m fibserve.tools.runner REQUEST.json", file=sys.stderr)
        return 2
    try:
        request = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"cannot read the runner request {args[0]}: {exc}", file=sys.stderr)
        return 2
    try:
        summary = run(request)
    except BaseException as exc:  # the candidate's failure, reported to the tool's caller
        traceback.print_exc()
        print(
            RESULT_PREFIX + json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}),
            flush=True,
        )
        return 3
    print(RESULT_PREFIX + json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
