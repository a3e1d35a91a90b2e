#!/usr/bin/env python3
"""Speedup stability of fibserve.bench on the GPU (issues 4 and 17, "Performance").

A definition's baseline Solution, submitted as a Python candidate, is evaluated against itself (the baseline
in its timing twin) ``--repeats`` times (default 10) with the default configuration (cold L2, warmup 10,
iterations 50, trials 3, interleaved pairs). A trustworthy harness reports every speedup within
[0.99, 1.01]. Default: torch.matmul in bfloat16 at M=8192, N=7168, K=5120 (workload 94920358 of
gemm_n7168_k5120); ``--definition mha_with_lse_d128 --axis seq_len=4096`` proves it on attention (cuDNN
SDPA); ``--axis all`` runs every workload of the definition in turn (issue 35's goal: every workload of
gemm_n7168_k5120, M=70 to 8192, and of one attention definition). For contrast it also reports the ratio of
the two medians (what a cached or separately timed baseline would give), the speedup against the definition's
reference (timed within its budget), the latency spread, the SM clock, power and temperature at the start
and end of each measurement, and the seconds each phase of the evaluation took (the report's ``timings_s``).

    OUT=./bench-results python3 benchmarks/eval_stability.py
    OUT=./bench-results python3 benchmarks/eval_stability.py --axis all
    OUT=./bench-results python3 benchmarks/eval_stability.py --definition mha_with_lse_d128 --axis seq_len=4096
    python3 benchmarks/eval_stability.py --join first/eval_stability.json second/eval_stability.json

Writes ``$OUT/eval_stability.json`` and ``$OUT/eval_stability.md`` (one summary line per workload, then each
workload's runs); exit code 0 when every speedup is within the band, 1 otherwise, 2 without a GPU or for an
axis that names no workload. Each result names the commit it ran (``$GPU_COMMIT``, else ``git rev-parse
HEAD``) and its call (a random id of this run of the script; a joined result names every call it holds).
``--join`` needs no GPU: it makes one result of several whose runs could not fit one device call (ten
evaluations at seq_len 16384 take about 14 minutes; a call may take 10), refusing results of another commit,
definition, baseline or band and a call given twice, and judges each workload on all its runs (at least
``--repeats``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

DEFINITION = "gemm_n7168_k5120"


def select_workloads(workloads: list, axis: str) -> list:
    """The workloads ``axis`` names: ``all``, or ``NAME=VALUE[,VALUE...]`` of a var axis (every workload with one
    of those values, in the definition's order).

    Raises:
        ValueError: ``axis`` is neither, or a value names no workload (the message lists the values there are).
    """
    if axis == "all":
        return list(workloads)
    name, sep, listed = axis.partition("=")
    values = listed.split(",")
    if not sep or not all(value.lstrip("-").isdigit() for value in values):
        raise ValueError(f"--axis {axis!r}: give NAME=VALUE[,VALUE...] (e.g. M=8192) or all")
    present = sorted({w.axes[name] for w in workloads if name in w.axes})
    missing = [value for value in values if int(value) not in present]
    if missing:
        raise ValueError(
            f"--axis {axis!r}: {name}={','.join(missing)} names no workload; {name} takes {present or 'no value'} here"
        )
    return [w for w in workloads if w.axes.get(name) in {int(value) for value in values}]


def main() -> int:
    parser = argparse.ArgumentParser(description="speedup stability of a baseline Solution against itself")
    parser.add_argument("--out", default=os.environ.get("OUT", "./bench-results"))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--band", type=float, default=0.01, help="allowed |speedup - 1|")
    parser.add_argument("--definition", default=DEFINITION, help="a bundled definition with a baseline")
    parser.add_argument(
        "--axis",
        default="M=8192",
        help="the workloads: NAME=VALUE[,VALUE...] of its var axis, or all (every workload)",
    )
    parser.add_argument(
        "--join",
        nargs="+",
        metavar="JSON",
        help="no GPU: join the runs of these eval_stability.json files (one commit) into one result under --out",
    )
    args = parser.parse_args()
    if args.join:
        return _joined(args)
    args.commit, args.call = _commit(), uuid.uuid4().hex

    import torch

    if not torch.cuda.is_available():
        print("eval_stability: torch sees no CUDA GPU", file=sys.stderr)
        return 2
    from fibserve.bench import Evaluator
    from fibserve.datasets import default_root
    from fibserve.trace.trace_set import TraceSet

    ts = TraceSet.load([default_root()])
    definition = ts.definition(args.definition)
    try:
        workloads = select_workloads(ts.workloads_for(args.definition), args.axis)
    except ValueError as exc:
        print(f"eval_stability: {exc}", file=sys.stderr)
        return 2
    baseline = ts.baseline_for(args.definition)
    if baseline is None:
        print(f"eval_stability: {args.definition} names no baseline Solution", file=sys.stderr)
        return 2
    solution = baseline.model_copy(update={"name": "baseline_as_candidate", "author": "eval_stability"})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: list[dict] = []
    with Evaluator("cuda:0") as evaluator:
        for workload in workloads:
            print(f"workload {workload.uuid} {dict(workload.axes)}", flush=True)
            entry = {"workload": workload.uuid, "axes": dict(workload.axes), "runs": []}
            results.append(entry)
            for i in range(args.repeats):
                entry["runs"].append(_measured(evaluator, definition, solution, baseline, workload, i))
                entry.update(summarise(entry["runs"], args.repeats, args.band))
                _write(out, _result(args, baseline, results))  # kept after every run: a step may be cut short
    result = _result(args, baseline, results)
    lines = _write(out, result)
    print("\n".join(lines[: 4 + len(results)]))
    return 0 if result["all_within_band"] else 1


def summarise(runs: list[dict], repeats: int, band: float) -> dict:
    """One workload's verdict from its runs so far: the least and greatest speedup, and whether at least
    ``repeats`` runs are done, every one within ``band`` of 1 (a run that failed has no speedup, and fails the
    verdict)."""
    speedups = [r["speedup"] for r in runs if "speedup" in r]
    return {
        "speedup_min": min(speedups, default=None),
        "speedup_max": max(speedups, default=None),
        "all_within_band": len(runs) >= repeats
        and len(speedups) == len(runs)
        and all(abs(x - 1.0) <= band for x in speedups),
    }


def join(results: list[dict], repeats: int) -> dict:
    """One result of several runs of this script: each workload's runs in the order given, renumbered, its
    verdict taken over all of them (:func:`summarise`).

    Raises:
        ValueError: the results differ in commit (a short hash of at least 7 characters matches the full one
            it begins), definition, baseline or band; one names no commit or call (runs of two commits are two
            measurements, not one); one call's runs are given twice (they would count twice); or none is given.
            A result with no workload joins into a fail.
    """
    if not results:
        raise ValueError("--join: give at least one eval_stability.json")
    first = results[0]
    if any(not r.get("commit") or not r.get("calls") for r in results):
        raise ValueError("--join: a result names no commit or call; join only runs known to share one commit")
    commits = sorted((r["commit"] for r in results), key=len)
    if len(commits[0]) < 7 or any(not c.startswith(commits[0]) for c in commits):
        raise ValueError(f"--join: the results differ in commit: {sorted(set(commits))}")
    calls = [call for r in results for call in r["calls"]]
    if len(set(calls)) < len(calls):
        raise ValueError("--join: one call's runs are given twice; they would count twice")
    for key in ("definition", "baseline", "band"):
        seen = [r.get(key) for r in results]
        if any(value != seen[0] for value in seen):
            raise ValueError(f"--join: the results differ in {key}: {sorted(set(map(str, seen)))}")
    workloads: dict[str, dict] = {}
    for result in results:
        for w in result["workloads"]:
            entry = workloads.setdefault(
                w["workload"], {"workload": w["workload"], "axes": w["axes"], "runs": []}
            )
            entry["runs"] += [{**run, "run": len(entry["runs"]) + i} for i, run in enumerate(w["runs"])]
    band = round(first["band"][1] - 1.0, 12)  # the --band it ran with: 1.01 - 1.0 is not 0.01 in floats
    for entry in workloads.values():
        entry.update(summarise(entry["runs"], repeats, band))
    axes = list(dict.fromkeys(r["axis"] for r in results))
    return {
        "commit": commits[-1],
        "calls": calls,
        "definition": first["definition"],
        "axis": " + ".join(axes),
        "baseline": first["baseline"],
        "band": first["band"],
        "all_within_band": bool(workloads) and all(e["all_within_band"] for e in workloads.values()),
        "workloads": list(workloads.values()),
    }


def _joined(args: argparse.Namespace) -> int:
    try:
        result = join([json.loads(Path(f).read_text()) for f in args.join], args.repeats)
    except (OSError, ValueError, KeyError) as exc:
        print(f"eval_stability: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = _write(out, result)
    print("\n".join(lines[: 4 + len(result["workloads"])]))
    return 0 if result["all_within_band"] else 1


def _commit() -> str | None:
    """The commit these runs measure: ``$GPU_COMMIT`` (the device copy's git metadata was seen stale), else
    HEAD, else None."""
    if os.environ.get("GPU_COMMIT"):
        return os.environ["GPU_COMMIT"]
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def _result(args: argparse.Namespace, baseline, results: list[dict]) -> dict:
    return {
        "commit": args.commit,
        "calls": [args.call],
        "definition": args.definition,
        "axis": args.axis,
        "baseline": baseline.name,
        "band": [1 - args.band, 1 + args.band],
        "all_within_band": bool(results) and all(r["all_within_band"] for r in results),
        "workloads": results,
    }


def _write(out: Path, result: dict) -> list[str]:
    """``eval_stability.json`` and ``.md`` under ``out``; the table's lines."""
    (out / "eval_stability.json").write_text(json.dumps(result, indent=2))
    lines = _table(result)
    (out / "eval_stability.md").write_text("\n".join(lines) + "\n")
    return lines


def _measured(evaluator, definition, solution, baseline, workload, i: int) -> dict:
    """Run ``i`` of one workload: the speedup of the baseline against itself and what surrounds it."""
    from fibserve.trace import Comparisons

    started = time.perf_counter()
    report = evaluator.evaluate(definition, solution, [workload], baseline=baseline)
    wall_s = time.perf_counter() - started
    ev = report.traces[0].evaluation if report.traces else None
    if ev is None or ev.performance is None:
        row = {"run": i, "error": report.task_error or (ev.log[-500:] if ev else "no evaluation")}
        print(f"run {i}: FAILED {row['error']}", flush=True)
        return row
    extra = ev.performance.extra or {}
    cand, ref = extra["candidate_ms"], extra["reference_ms"]
    seen = Comparisons.of(ev.performance)
    row = {
        "run": i,
        "wall_s": round(wall_s, 2),
        "speedup": ev.performance.speedup_factor,
        "speedup_basis": seen.basis_label,
        "vs_reference": seen.vs_reference.speedup if seen.vs_reference else None,
        "roofline_fraction": seen.roofline.fraction if seen.roofline else None,
        "speedup_p10": extra["speedup_p10"],
        "speedup_p90": extra["speedup_p90"],
        "ratio_of_medians": ref["median"] / cand["median"],
        "candidate_ms": cand,
        "reference_ms": ref,
        "timing_basis": extra.get("timing_basis"),
        "slots": extra.get("slots"),
        "events_over_span_ms": extra.get("events_over_span_ms"),
        "candidate_released": (extra.get("l2_overwrite") or {}).get("candidate_released"),
        "reference_released": (extra.get("l2_overwrite") or {}).get("reference_released"),
        "unexplained_round_trip_ms": extra.get("unexplained_round_trip_ms"),
        "sm_clock_start": extra["device_start"].get("sm_clock_mhz"),
        "sm_clock_end": extra["device_end"].get("sm_clock_mhz"),
        "power_start_w": extra["device_start"].get("power_w"),
        "power_end_w": extra["device_end"].get("power_w"),
        "temp_start_c": extra["device_start"].get("temperature_c"),
        "temp_end_c": extra["device_end"].get("temperature_c"),
        "phases_s": {name: round(seconds, 2) for name, seconds in report.timings_s.items()},
    }
    print(
        f"run {i}: speedup {row['speedup']:.4f} (pairs p10 {row['speedup_p10']:.4f} p90 "
        f"{row['speedup_p90']:.4f}), ratio of medians {row['ratio_of_medians']:.4f}, candidate "
        f"{cand['median']:.4f} ms [{cand['p10']:.4f}, {cand['p90']:.4f}], reference {ref['median']:.4f} ms, "
        f"SM clock {row['sm_clock_start']} -> {row['sm_clock_end']} MHz, unexplained round trip "
        f"{row['unexplained_round_trip_ms']} ms, against {row['speedup_basis']}, vs reference "
        f"{row['vs_reference']}, roofline {row['roofline_fraction']}, basis {row['timing_basis']}, "
        f"{row['slots']} slots, released "
        f"{row['candidate_released']}/{row['reference_released']}, events over span {row['events_over_span_ms']}, "
        f"{row['wall_s']} s ({', '.join(f'{k} {v}' for k, v in row['phases_s'].items())})",
        flush=True,
    )
    return row


def _table(result: dict) -> list[str]:
    """The Markdown of a result: the verdict, one line per workload, then each workload's runs."""
    verdict = "PASS" if result["all_within_band"] else "FAIL"
    lines = [
        f"{result['baseline']} vs itself as the baseline, {result['definition']} ({result['axis']}), band "
        f"{result['band']}, commit {(result.get('commit') or 'unknown')[:12]}: {verdict}",
        "",
        "| workload | axes | speedup min | speedup max | within band |",
        "| --- | --- | --- | --- | --- |",
    ]
    for w in result["workloads"]:
        axes = " ".join(f"{k}={v}" for k, v in w["axes"].items())
        lines.append(
            f"| {w['workload'][:8]} | {axes} | {w['speedup_min']} | {w['speedup_max']} | "
            f"{'yes' if w['all_within_band'] else 'no'} |"
        )
    for w in result["workloads"]:
        axes = " ".join(f"{k}={v}" for k, v in w["axes"].items())
        lines += [
            "",
            f"### {axes}",
            "",
            "| run | speedup | pairs p10 | pairs p90 | ratio of medians | candidate ms (p10-p90) | baseline ms | vs reference | roofline | SM MHz start/end | W start/end | C start/end | basis | released candidate/baseline | s |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in w["runs"]:
            if "speedup" not in r:
                lines.append(f"| {r['run']} | error: {r['error'][:80]} | | | | | | | | | | | | | |")
                continue
            c, f = r["candidate_ms"], r["reference_ms"]
            lines.append(
                f"| {r['run']} | {r['speedup']:.4f} | {r['speedup_p10']:.4f} | {r['speedup_p90']:.4f} | "
                f"{r['ratio_of_medians']:.4f} | {c['median']:.4f} ({c['p10']:.4f}-{c['p90']:.4f}) | {f['median']:.4f} | "
                f"{r['vs_reference']} | {r['roofline_fraction']} | {r['sm_clock_start']}/{r['sm_clock_end']} | {r['power_start_w']}/{r['power_end_w']} | "
                f"{r['temp_start_c']}/{r['temp_end_c']} | {r['timing_basis']} | "
                f"{r['candidate_released']}/{r['reference_released']} | {r['wall_s']} |"
            )
    return lines


if __name__ == "__main__":
    sys.exit(main())
