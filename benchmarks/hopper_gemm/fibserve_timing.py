"""Time the bundled reference GEMM Solutions against torch.matmul through FIBServe's own Evaluator.

For ``gemm_n7168_k5120`` (``C[M, 7168] = A[M, 5120] @ B[7168, 5120]^T``, bf16), every Solution of the bundled
trace set by author ``ptxbench`` (the CUDA wgmma/TMA kernel and the Triton TMA kernel) is evaluated with
``fibserve.bench.Evaluator`` on every bundled workload (M = 70, 232, 972, 2379, 8192). The Evaluator builds the
candidate, runs it in a sandbox worker, checks it against the definition's reference (``torch.matmul``) on
several seeded input sets with poisoned outputs, then times candidate and reference in interleaved pairs
with a cold L2 (packaged defaults: warmup 10, 50 pairs, 3 trials) and reports the median latencies and the
median of per-pair ratios as ``speedup_factor``. TFLOP/s = 2*M*N*K / latency.

A Solution that fails to build or to run gives rows with its status (COMPILE_ERROR, RUNTIME_ERROR, a task
error, ...) and the script goes on with the next one.

Usage (repository root, on the H200)::

    OUT=./gpu-results python3 benchmarks/hopper_gemm/fibserve_timing.py [--unsafe-no-sandbox]
        [--solution extra_solution.json ...] [--warmup N --iterations N --trials N]

Writes ``fibserve_timing.json`` (rows, device, libraries, the full EvaluationReports) and
``fibserve_timing.md`` under ``--out`` (default ``$OUT`` or ``./gpu-results``); prints the table last.
Exit code 0 when every row PASSED on a GPU, 1 otherwise, 2 when the device cannot be used.
``--device cpu`` is a dry run for machines without a GPU: CUDA is built and analysed but nothing is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEFINITION = "gemm_n7168_k5120"
AUTHOR = "ptxbench"

try:  # run from a checkout without installing fibserve (the GPU image): use the repo's sources
    import fibserve  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO / "packages" / "fibserve" / "src"))


def load_solutions(extra: list[Path]) -> tuple[Any, list[Any], list[Any]]:
    """(definition, workloads sorted by M, solutions: the bundled ``ptxbench`` ones, then ``extra`` JSONs)."""
    from fibserve.datasets import default_root
    from fibserve.trace import Solution
    from fibserve.trace.trace_set import TraceSet

    trace_set = TraceSet.load(default_root())
    definition = trace_set.definition(DEFINITION)
    workloads = sorted(trace_set.workloads_for(DEFINITION), key=lambda w: w.axes["M"])
    solutions = sorted(
        (s for s in trace_set.solutions_for(DEFINITION) if s.author == AUTHOR), key=lambda s: s.name
    )
    solutions += [Solution.model_validate_json(path.read_text()) for path in extra]
    return definition, workloads, solutions


def tflops(m: int, n: int, k: int, ms: float | None) -> float | None:
    """2*M*N*K / latency in TFLOP/s (None without a positive latency)."""
    return 2.0 * m * n * k / (ms * 1e-3) / 1e12 if ms else None


def report_rows(report: Any, workloads: list[Any], n: int, k: int) -> list[dict[str, Any]]:
    """One row per workload: status, candidate/reference latency (ms) with p10/p90, TFLOP/s and speedup."""
    traces = {t.workload.uuid: t for t in report.traces}
    rows = []
    for workload in workloads:
        m = workload.axes["M"]
        row: dict[str, Any] = {"M": m, "solution": report.solution, "workload": workload.uuid}
        ev = traces[workload.uuid].evaluation if workload.uuid in traces else None
        if ev is None:
            row["status"] = (
                "TASK_ERROR"
                if report.task_error or workload.uuid in report.workload_errors
                else "NOT_EXECUTED"
            )
            row["error"] = report.workload_errors.get(workload.uuid) or report.task_error
            rows.append(row)
            continue
        row["status"] = ev.status.value
        if ev.status.value != "PASSED":
            row["error"] = " ".join(ev.log.split())[:300]
        if ev.correctness is not None:
            row["max_abs_error"] = ev.correctness.max_absolute_error
            row["max_rel_error"] = ev.correctness.max_relative_error
        perf = ev.performance
        if perf is not None and (perf.extra or {}).get("measured_on") == "gpu":
            extra = perf.extra
            row.update(
                latency_ms=perf.latency_ms,
                latency_p10_ms=extra["candidate_ms"]["p10"],
                latency_p90_ms=extra["candidate_ms"]["p90"],
                tflops=tflops(m, n, k, perf.latency_ms),
                reference_ms=perf.reference_latency_ms,
                reference_tflops=tflops(m, n, k, perf.reference_latency_ms),
                speedup=perf.speedup_factor,
                speedup_p10=extra.get("speedup_p10"),
                speedup_p90=extra.get("speedup_p90"),
                pairs=extra.get("pairs"),
                timing_basis=extra.get("timing_basis"),
                sm_clock_mhz_start=(extra.get("device_start") or {}).get("sm_clock_mhz"),
                sm_clock_mhz_end=(extra.get("device_end") or {}).get("sm_clock_mhz"),
            )
        rows.append(row)
    return rows


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


HEADER = (
    "M",
    "solution",
    "status",
    "latency ms",
    "p10",
    "p90",
    "TFLOP/s",
    "torch ms",
    "torch TFLOP/s",
    "speedup",
)


def _cells(r: dict[str, Any]) -> list[str]:
    speedup = r.get("speedup")
    return [
        str(r["M"]), r["solution"], r["status"], _fmt(r.get("latency_ms"), ".4f"),
        _fmt(r.get("latency_p10_ms"), ".4f"), _fmt(r.get("latency_p90_ms"), ".4f"),
        _fmt(r.get("tflops"), ".1f"), _fmt(r.get("reference_ms"), ".4f"),
        _fmt(r.get("reference_tflops"), ".1f"), "-" if speedup is None else f"{speedup:.3f}x",
    ]  # fmt: skip


def table_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Fixed-width text table, rows grouped by M (the printed summary)."""
    cells = [list(HEADER)] + [_cells(r) for r in sorted(rows, key=lambda r: (r["M"], r["solution"]))]
    widths = [max(len(row[i]) for row in cells) for i in range(len(HEADER))]
    left = {1, 2}  # solution and status read better left-aligned
    return [
        " ".join(
            c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in cells
    ]


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The results as a markdown section ready for the repo (method, device, table, errors)."""
    cfg = meta.get("config") or {}
    lines = [
        f"# FIBServe timing of the reference GEMM Solutions: `{DEFINITION}`",
        "",
        f"- Date (UTC): {meta['date']}; device: {meta.get('device')}; sandbox: {meta.get('sandbox')}",
        f"- Libraries: {', '.join(f'{k} {v}' for k, v in sorted(meta['libs'].items()))}",
        f"- Method: `fibserve.bench.Evaluator` defaults: warmup {cfg.get('warmup')}, {cfg.get('iterations')} "
        f"interleaved candidate/torch.matmul pairs x {cfg.get('trials')} trials, {cfg.get('num_input_sets')} "
        f"input sets, cold L2 {cfg.get('cold_l2')}; latency = median, speedup = median of per-pair ratios; "
        "TFLOP/s = 2*M*N*K / median latency.",
        f"- Command: `{meta['command']}`",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + " --- |" * len(HEADER),
    ]
    for r in sorted(rows, key=lambda r: (r["M"], r["solution"])):
        cells = _cells(r)
        cells[1] = f"`{cells[1]}`"
        lines.append("| " + " | ".join(cells) + " |")
    errors: dict[tuple[str, str, str], list[int]] = {}
    for r in rows:
        if r.get("error"):
            errors.setdefault((r["solution"], r["status"], r["error"]), []).append(r["M"])
    if errors:
        lines += ["", "Errors:", ""]
        lines += [f"- `{sol}` {status} at M = {ms}: {error}" for (sol, status, error), ms in errors.items()]
    if meta.get("solutions"):
        lines += ["", "Builds and static analysis:", ""]
        lines += [f"- `{name}`: {info}" for name, info in meta["solutions"].items()]
    if meta.get("notes"):
        lines += ["", "Notes from the Evaluator:", ""] + [f"- {n}" for n in meta["notes"]]
    return "\n".join(lines) + "\n"


def solution_summary(report: Any) -> str:
    """Build status, cache hit, build time, SASS evidence (CUDA) and the GPU state at start and end."""
    parts = []
    build = report.build
    if build is not None:
        total = build.timings_ms.get("total")
        parts.append(
            f"build {build.status}"
            + (" (cached)" if build.cached else "")
            + (f" {total / 1e3:.1f} s" if total else "")
        )
    sass = getattr(report.analysis, "sass_opcodes", None) or {}  # None or AnalysisUnavailable: no SASS
    if sass:
        parts.append(
            ", ".join(f"{op} {sass.get(op, 0)}" for op in ("HGMMA", "UTMALDG", "USETMAXREG", "STSM"))
        )
    for label, snap in (("start", report.device_info.start), ("end", report.device_info.end)):
        if snap is not None and snap.sm_clock_mhz is not None:
            parts.append(
                f"GPU {label}: SM {snap.sm_clock_mhz:.0f} MHz, {snap.power_w} W, {snap.temperature_c} C"
            )
    parts.append(f"{report.timings_s.get('total', 0):.1f} s total")
    return "; ".join(parts)


def evaluate_solution(
    evaluator: Any, definition: Any, solution: Any, workloads: list[Any], overrides: dict[str, Any]
) -> tuple[list[dict[str, Any]], Any]:
    """Rows for one Solution and its report (None when the Evaluator itself raised: HARNESS_ERROR rows)."""
    n, k = definition.const_axes["N"], definition.const_axes["K"]
    try:
        report = evaluator.evaluate(definition, solution, workloads, overrides=overrides)
    except Exception as exc:  # the Evaluator should never raise; if it does, keep the other Solutions' rows
        error = f"the Evaluator raised {exc!r}"
        return [
            {"M": w.axes["M"], "solution": solution.name, "status": "HARNESS_ERROR", "error": error}
            for w in workloads
        ], None
    return report_rows(report, workloads, n, k), report


def main(argv: list[str] | None = None) -> int:
    """Command-line entry (see the module docstring); returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "./gpu-results")))
    parser.add_argument("--device", default="cuda:0", help="cuda:N, or cpu for a dry run (nothing timed)")
    parser.add_argument(
        "--unsafe-no-sandbox",
        action="store_true",
        help="run candidates without bubblewrap (control runs only)",
    )
    parser.add_argument("--solution", type=Path, action="append", default=[], help="extra Solution JSON")
    for key in ("warmup", "iterations", "trials"):
        parser.add_argument(f"--{key}", type=int, help=f"override the Evaluator's {key}")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("fibserve_timing: torch sees no CUDA GPU (use --device cpu for a dry run)", file=sys.stderr)
        return 2
    from fibserve.bench import Evaluator
    from fibserve.bench.device import library_versions

    definition, workloads, solutions = load_solutions(args.solution)
    overrides = {key: getattr(args, key) for key in ("warmup", "iterations", "trials") if getattr(args, key)}
    rows: list[dict[str, Any]] = []
    reports: dict[str, Any] = {}
    meta: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "command": " ".join(
            ["python3", "benchmarks/hopper_gemm/fibserve_timing.py", *(argv or sys.argv[1:])]
        ),
        "libs": library_versions(),
        "overrides": overrides,
        "solutions": {},
        "notes": [],
    }

    def write() -> None:  # after every Solution, so a crash keeps what was measured
        document = {"definition": DEFINITION, **meta, "rows": rows, "reports": reports}
        (args.out / "fibserve_timing.json").write_text(json.dumps(document, indent=2) + "\n")
        (args.out / "fibserve_timing.md").write_text(markdown(rows, meta))

    if args.unsafe_no_sandbox:
        from fibserve.sandbox import allow_unsafe

        allow_unsafe()
    with Evaluator(args.device, warm_spare=False) as evaluator:
        for solution in solutions:
            print(f"evaluating {solution.name} on M = {[w.axes['M'] for w in workloads]} ...", flush=True)
            new, report = evaluate_solution(evaluator, definition, solution, workloads, overrides)
            rows += new
            if report is None:
                meta["solutions"][solution.name] = new[0]["error"]
            else:
                reports[solution.name] = report.model_dump(mode="json")
                meta.setdefault("config", report.config.model_dump(mode="json"))
                meta["sandbox"] = report.sandbox
                meta["device"] = (
                    f"{report.device_info.name} ({report.device_info.device}, driver {report.device_info.driver})"
                )
                meta["solutions"][solution.name] = solution_summary(report)
                meta["notes"] += [f"`{solution.name}`: {note}" for note in report.notes]
            print(f"  {meta['solutions'][solution.name]}\n  {[r['status'] for r in new]}", flush=True)
            write()
    write()
    print(f"\nwrote {args.out / 'fibserve_timing.json'} and fibserve_timing.md")
    print(f"device: {meta.get('device')}; sandbox: {meta.get('sandbox')}; {len(meta['notes'])} note(s)")
    print("\n".join(table_lines(rows)))
    on_gpu = args.device.startswith("cuda")
    return 0 if on_gpu and rows and all(r["status"] == "PASSED" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
