"""Does the evaluation still work when each sandbox worker gets its own PID namespace (bwrap --unshare-pid)?

Today the candidate's worker and the reference's twin share the host PID namespace (and user), so a CUDA
candidate could signal or pause the twin. Giving each worker its own PID namespace closes that, but CUDA IPC
(the trusted process maps the workers' buffers) and torch's /dev/shm bookkeeping both involve pids, so it
must be seen on a GPU first. This probe patches ``fibserve.bench.sandbox.gpu_bwrap_prefix`` to add
``--unshare-pid`` (nothing in the product changes) and evaluates, on one Evaluator: torch.matmul as a Python
solution and the naive CUDA GEMM (M=232), then counts /dev/shm files before and after.

    OUT=./bench-results python3 benchmarks/pid_namespace_probe.py [--no-unshare]

Writes ``$OUT/pid_namespace_probe.json``; exit code 0 when every evaluation PASSED.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "tests" / "fibserve" / "bench" / "kernels"
DEFINITION = "gemm_n7168_k5120"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "./bench-results"))
    parser.add_argument("--no-unshare", action="store_true", help="control run: the product's sandbox as is")
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("pid_namespace_probe: torch sees no CUDA GPU", file=sys.stderr)
        return 2
    from fibserve.bench import Evaluator, sandbox
    from fibserve.datasets import default_root
    from fibserve.trace import Solution
    from fibserve.trace.trace_set import TraceSet

    if sandbox.bwrap_path() is None:
        print("pid_namespace_probe: bwrap is not installed", file=sys.stderr)
        return 2
    if not args.no_unshare:
        plain = sandbox.gpu_bwrap_prefix
        sandbox.gpu_bwrap_prefix = lambda workdir: [*plain(workdir), "--unshare-pid"]

    ts = TraceSet.load([default_root()])
    definition = ts.definition(DEFINITION)
    workload = next(w for w in ts.workloads_for(DEFINITION) if w.axes["M"] == 232)

    def solution(file: str, language: str, dps: bool = True) -> Solution:
        spec = {"language": language, "target_hardware": ["sm_90a"], "entry_point": f"kernel.{file.split('.')[-1]}::run",
                "destination_passing_style": dps}  # fmt: skip
        if language == "cuda":
            spec["binding"] = "tvm-ffi"
        return Solution.model_validate(
            {"name": file.split(".")[0], "definition": DEFINITION, "author": "pid_namespace_probe", "spec": spec,
             "sources": [{"path": f"kernel.{file.split('.')[-1]}", "content": (KERNELS / file).read_text()}]}
        )  # fmt: skip

    shm_before = sorted(os.path.basename(p) for p in glob.glob("/dev/shm/*"))
    runs = []
    with Evaluator("cuda:0", sandbox="bwrap") as evaluator:
        for sol in (solution("gemm_torch_matmul.py", "python", dps=False), solution("gemm_naive.cu", "cuda")):
            t0 = time.monotonic()
            report = evaluator.evaluate(definition, sol, [workload])
            ev = report.traces[0].evaluation if report.traces else None
            runs.append({
                "solution": sol.name,
                "sandbox": report.sandbox,
                "status": ev.status.value if ev else None,
                "task_error": report.task_error,
                "speedup": ev.performance.speedup_factor if ev and ev.performance else None,
                "log": (ev.log or "")[-600:] if ev else None,
                "seconds": round(time.monotonic() - t0, 2),
            })  # fmt: skip
            print(json.dumps(runs[-1]), flush=True)
    time.sleep(2)
    shm_after = sorted(os.path.basename(p) for p in glob.glob("/dev/shm/*"))
    result = {
        "unshare_pid": not args.no_unshare,
        "runs": runs,
        "dev_shm_before": shm_before,
        "dev_shm_after": shm_after,
        "all_passed": all(r["status"] == "PASSED" for r in runs),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "pid_namespace_probe.json").write_text(json.dumps(result, indent=2))
    print(
        f"unshare-pid {result['unshare_pid']}: statuses {[r['status'] for r in runs]}; /dev/shm files "
        f"{len(shm_before)} -> {len(shm_after)} (new: {sorted(set(shm_after) - set(shm_before))[:6]})"
    )
    return 0 if result["all_passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
