#!/usr/bin/env python3
"""GPU validation of fibserve.bench: the exploit scenarios of issue 4 on a real GPU, plus the `gpu` tests.

Run from the repository root on a machine with an NVIDIA GPU (written for the lent H200)::

    OUT=./gpu-results python3 scripts/gpu_suite.py            # or: uv run python scripts/gpu_suite.py

Writes, under ``$OUT`` (default ``./gpu-results``):

* ``gpu_suite.json``: device, sandbox, every scenario (expected, observed, pass/fail, seconds) and the pytest
  summary; rewritten after each scenario so a crash loses nothing;
* ``gpu_suite.md``: the same as a markdown table, ready to paste into docs/;
* ``reports/<scenario>.json``: the full EvaluationReport of each scenario;
* ``pytest-gpu.txt`` and ``pytest-gpu.xml``: output of ``pytest -m gpu`` over the bench tests.

Exit code 0 when every scenario and the tests passed, 1 otherwise, 2 when no GPU is visible.

Third-party modules imported (directly or by fibserve.bench): torch, pydantic, yaml (pyyaml), filelock,
tvm_ffi (apache-tvm-ffi; the worker and nvcc builds), triton (the Triton scenario only), pytest (as a
subprocess, for the gpu tests).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "tests" / "fibserve" / "bench" / "kernels"
GEMM = "gemm_n7168_k5120"


def solution(file: str, definition: str, language: str, dps: bool = True) -> Any:
    """A Solution whose single source is ``tests/fibserve/bench/kernels/<file>``."""
    from fibserve.trace import Solution

    entry = "kernel.cu" if language == "cuda" else "kernel.py"
    spec: dict[str, Any] = {
        "language": language,
        "target_hardware": ["sm_90a"],
        "entry_point": f"{entry}::run",
        "destination_passing_style": dps,
    }
    if language == "cuda":
        spec["binding"] = "tvm-ffi"
    return Solution.model_validate(
        {
            "name": Path(file).stem,
            "definition": definition,
            "author": "gpu_suite",
            "spec": spec,
            "sources": [{"path": entry, "content": (KERNELS / file).read_text()}],
        }
    )


def statuses(report: Any) -> list[str]:
    """Per-workload status strings ('-' when not evaluated)."""
    return [t.evaluation.status.value if t.evaluation else "-" for t in report.traces]


def first(report: Any) -> Any:
    """The first trace's evaluation (or None)."""
    return report.traces[0].evaluation if report.traces else None


def describe(report: Any) -> str:
    """One line: statuses, latency, speedup, errors, task error."""
    ev = first(report)
    parts = [",".join(statuses(report))]
    if ev is not None and ev.performance is not None:
        extra = ev.performance.extra or {}
        parts.append(
            f"latency {ev.performance.latency_ms:.4f} ms, reference {ev.performance.reference_latency_ms:.4f} ms, "
            f"speedup {ev.performance.speedup_factor:.4f} (p10 {extra.get('speedup_p10', float('nan')):.4f}, "
            f"p90 {extra.get('speedup_p90', float('nan')):.4f}), basis {extra.get('timing_basis')}"
        )
    if ev is not None and ev.correctness is not None:
        extra = ev.correctness.extra or {}
        parts.append(
            f"max abs {ev.correctness.max_absolute_error:.4g}, max rel {ev.correctness.max_relative_error:.4g}, "
            f"matched {extra.get('matched_ratio')}"
        )
        for key in ("outputs_untouched", "input_mutated", "input_set", "phase"):
            if key in extra and ev.status.value != "PASSED":
                parts.append(f"{key}={extra[key]}")
    if ev is not None and ev.status.value in ("RUNTIME_ERROR", "TIMEOUT", "COMPILE_ERROR"):
        parts.append("log: " + " ".join(ev.log.split())[:200])
    if report.task_error:
        parts.append(f"TASK ERROR: {report.task_error[:300]}")
    return "; ".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "./gpu-results"), help="results folder")
    parser.add_argument(
        "--unsafe-no-sandbox",
        action="store_true",
        help="run candidates without bubblewrap (control runs only)",
    )
    parser.add_argument("--skip-pytest", action="store_true", help="only the scenarios")
    parser.add_argument("--only", default="", help="comma-separated scenario names to run")
    args = parser.parse_args()
    out = Path(args.out)
    (out / "reports").mkdir(parents=True, exist_ok=True)

    import torch

    if not torch.cuda.is_available():
        print("gpu_suite: torch sees no CUDA GPU", file=sys.stderr)
        return 2
    from fibserve.bench import Evaluator
    from fibserve.bench.device import library_versions, snapshot
    from fibserve.datasets import default_root
    from fibserve.trace.trace_set import TraceSet

    ts = TraceSet.load([default_root()])
    gemm = ts.definition(GEMM)
    by_m = {w.axes["M"]: w for w in ts.workloads_for(GEMM)}
    small, large = [by_m[232]], [by_m[8192]]
    vec = ts.definition("vector_add_f32")
    vec_workloads = ts.workloads_for("vector_add_f32")[:2]
    if args.unsafe_no_sandbox:
        from fibserve.sandbox import allow_unsafe

        allow_unsafe()
    evaluator = Evaluator("cuda:0")
    results: dict[str, Any] = {
        "device": snapshot("cuda:0").model_dump(),
        "libs": library_versions(),
        "sandbox_requested": "unsafe-none" if args.unsafe_no_sandbox else "bwrap",
        "scenarios": [],
    }

    reports: dict[str, Any] = {}

    def ok_status(want: str) -> Callable[[Any], bool]:
        return lambda r: r.task_error is None and statuses(r) == [want] * len(r.traces) and bool(r.traces)

    def perf(r: Any) -> Any:
        ev = first(r)
        return ev.performance if ev is not None else None

    def corr_extra(r: Any) -> dict:
        ev = first(r)
        return (ev.correctness.extra or {}) if ev is not None and ev.correctness else {}

    scenarios: list[tuple[str, str, Callable[[], Any], Callable[[Any], bool]]] = [
        (
            "naive_cuda_gemm_passes",
            "PASSED, speedup < 1",
            lambda: evaluator.evaluate(gemm, solution("gemm_naive.cu", GEMM, "cuda"), small),
            lambda r: ok_status("PASSED")(r) and perf(r).speedup_factor < 1.0,
        ),
        (
            "wrong_kernel_incorrect_numerical",
            "INCORRECT_NUMERICAL with errors",
            lambda: evaluator.evaluate(gemm, solution("gemm_wrong.cu", GEMM, "cuda"), small),
            lambda r: ok_status("INCORRECT_NUMERICAL")(r) and first(r).correctness.max_absolute_error > 0,
        ),
        (
            "oob_write_runtime_error",
            "RUNTIME_ERROR (illegal address), no task error",
            lambda: evaluator.evaluate(gemm, solution("gemm_oob_write.cu", GEMM, "cuda"), small),
            ok_status("RUNTIME_ERROR"),
        ),
        (
            "after_oob_next_evaluation_passes",
            "PASSED on the same Evaluator",
            lambda: evaluator.evaluate(gemm, solution("gemm_naive.cu", GEMM, "cuda"), small),
            ok_status("PASSED"),
        ),
        (
            "infinite_loop_timeout",
            "TIMEOUT within the 10 s limit (+ worker start), worker replaced",
            lambda: evaluator.evaluate(
                gemm,
                solution("gemm_hang.cu", GEMM, "cuda"),
                small,
                overrides={"timeouts": {"correctness": 10}},
            ),
            lambda r: ok_status("TIMEOUT")(r) and any("worker replaced" in n for n in r.notes),
        ),
        (
            "after_timeout_next_evaluation_passes",
            "PASSED on the same Evaluator",
            lambda: evaluator.evaluate(gemm, solution("gemm_naive.cu", GEMM, "cuda"), small),
            ok_status("PASSED"),
        ),
        (
            "no_write_caught_by_poisoning",
            "INCORRECT_NUMERICAL, outputs_untouched=['C']",
            lambda: evaluator.evaluate(gemm, solution("gemm_no_write.cu", GEMM, "cuda"), small),
            lambda r: ok_status("INCORRECT_NUMERICAL")(r) and corr_extra(r).get("outputs_untouched") == ["C"],
        ),
        (
            "input_mutation_caught",
            "INCORRECT_NUMERICAL, input_mutated=['A']",
            lambda: evaluator.evaluate(gemm, solution("gemm_mutate_input.cu", GEMM, "cuda"), small),
            lambda r: ok_status("INCORRECT_NUMERICAL")(r) and corr_extra(r).get("input_mutated") == ["A"],
        ),
        (
            "pointer_cache_caught_by_rotation",
            "INCORRECT_NUMERICAL on input set 1",
            lambda: evaluator.evaluate(gemm, solution("gemm_pointer_cache.cu", GEMM, "cuda"), small),
            lambda r: ok_status("INCORRECT_NUMERICAL")(r) and corr_extra(r).get("input_set") == 1,
        ),
        (
            "side_stream_timed_by_sync_bound",
            "PASSED, timing_basis device-synchronized, latency >= 0.9 x the same naive GEMM's on the main stream",
            lambda: evaluator.evaluate(gemm, solution("gemm_side_stream.cu", GEMM, "cuda"), small),
            lambda r: (
                ok_status("PASSED")(r)
                and (perf(r).extra or {}).get("timing_basis") == "device-synchronized"
                and "naive_cuda_gemm_passes" in reports  # the main-stream latency to compare with
                and perf(r).latency_ms >= 0.9 * perf(reports["naive_cuda_gemm_passes"]).latency_ms
            ),
        ),
        (
            "content_cache_never_hits",
            "PASSED, speedup <= 1.05 x the naive GEMM's it wraps (fresh input content on every timed call)",
            lambda: evaluator.evaluate(gemm, solution("gemm_content_cache.cu", GEMM, "cuda"), small),
            lambda r: (
                ok_status("PASSED")(r)
                and "naive_cuda_gemm_passes" in reports
                and perf(r).speedup_factor <= 1.05 * perf(reports["naive_cuda_gemm_passes"]).speedup_factor
            ),
        ),
        (
            "leftover_work_does_not_slow_the_baseline",
            "PASSED or RUNTIME_ERROR; if PASSED, speedup <= 1.05 x the naive GEMM's and baseline ms <= 1.1 x its",
            lambda: evaluator.evaluate(gemm, solution("gemm_leaves_work.cu", GEMM, "cuda"), small),
            lambda r: (
                ok_status("RUNTIME_ERROR")(r)
                or (
                    ok_status("PASSED")(r)
                    and "naive_cuda_gemm_passes" in reports
                    and perf(r).speedup_factor
                    <= 1.05 * perf(reports["naive_cuda_gemm_passes"]).speedup_factor
                    and perf(r).reference_latency_ms
                    <= 1.1 * perf(reports["naive_cuda_gemm_passes"]).reference_latency_ms
                )
            ),
        ),
        (
            "torch_matmul_python_speedup_near_1",
            "PASSED, speedup in [0.95, 1.05] at M=8192",
            lambda: evaluator.evaluate(
                gemm, solution("gemm_torch_matmul.py", GEMM, "python", dps=False), large
            ),
            lambda r: ok_status("PASSED")(r) and 0.95 <= perf(r).speedup_factor <= 1.05,
        ),
        (
            "triton_vector_add_on_gpu",
            "PASSED (Triton JIT inside the sandbox)",
            lambda: evaluator.evaluate(
                vec, solution("add_correct.py", "vector_add_f32", "triton"), vec_workloads
            ),
            ok_status("PASSED"),
        ),
    ]
    only = {s for s in args.only.split(",") if s}
    all_ok = True
    for name, expected, run, check in scenarios:
        if only and name not in only:
            continue
        started_workers = evaluator.pool.started_count
        t0 = time.monotonic()
        try:
            report = reports[name] = run()
            seconds = time.monotonic() - t0
            (out / "reports" / f"{name}.json").write_text(report.model_dump_json(indent=2))
            passed = bool(check(report))
            observed = describe(report)
            notes = report.notes
            sandbox = report.sandbox
        except Exception as exc:  # a harness exception is itself a failed scenario
            seconds, passed, observed, notes, sandbox = (
                time.monotonic() - t0,
                False,
                f"EXCEPTION {exc!r}",
                [],
                "?",
            )
        all_ok &= passed
        row = {
            "scenario": name,
            "expected": expected,
            "observed": observed,
            "passed": passed,
            "seconds": round(seconds, 2),
            "workers_started": evaluator.pool.started_count - started_workers,
            "sandbox": sandbox,
            "notes": notes,
        }
        results["scenarios"].append(row)
        print(f"[{'PASS' if passed else 'FAIL'}] {name} ({seconds:.1f} s): {observed}", flush=True)
        (out / "gpu_suite.json").write_text(json.dumps(results, indent=2))
    evaluator.close()

    if not args.skip_pytest:
        t0 = time.monotonic()
        proc = subprocess.run(
            # one process, without pyproject's `-n auto`: GPU timing needs the device alone (and no xdist there)
            [sys.executable, "-m", "pytest", "-o", "addopts=--strict-markers", "-m", "gpu", "tests/fibserve/bench",
             "-q", "-rA", f"--junitxml={out / 'pytest-gpu.xml'}"],
            cwd=ROOT, capture_output=True, text=True,
        )  # fmt: skip
        (out / "pytest-gpu.txt").write_text(proc.stdout + proc.stderr)
        summary = (proc.stdout.strip().splitlines() or [""])[-1]
        results["pytest"] = {
            "returncode": proc.returncode,
            "summary": summary,
            "seconds": time.monotonic() - t0,
        }
        all_ok &= proc.returncode == 0
        print(f"[{'PASS' if proc.returncode == 0 else 'FAIL'}] pytest -m gpu: {summary}", flush=True)
    results["device_end"] = snapshot("cuda:0").model_dump()
    results["all_passed"] = all_ok
    (out / "gpu_suite.json").write_text(json.dumps(results, indent=2))
    (out / "gpu_suite.md").write_text(markdown(results))
    return 0 if all_ok else 1


def markdown(results: dict[str, Any]) -> str:
    """The results as a markdown table."""
    device = results["device"]
    lines = [
        f"GPU suite on {device.get('name')} (driver {device.get('driver')}), libs {results['libs']}",
        "",
        "| scenario | expected | observed | result | s |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in results["scenarios"]:
        observed = row["observed"].replace("|", "/")
        lines.append(
            f"| {row['scenario']} | {row['expected']} | {observed} | {'PASS' if row['passed'] else 'FAIL'} "
            f"| {row['seconds']} |"
        )
    if "pytest" in results:
        lines += [
            "",
            f"pytest -m gpu: {results['pytest']['summary']} (exit {results['pytest']['returncode']})",
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
