#!/usr/bin/env python3
"""Every attention baseline on every workload, on the GPU (issue 17): latency, TFLOP/s, fraction of the
roofline, and the ratio to PTXBench's H100 reference latency for the same workload uuid.

For each of the 22 attention definitions of the bundled trace set and each of its workloads, the baseline
Solution (cuDNN SDPA, its backward, or dequantize + cuDNN SDPA for FP8; see fibserve.datasets.baselines) is
loaded in this process and timed with FIBServe's own timing primitive (cold L2, device-wide synchronisation,
CUDA events: fibserve.bench.worker.clock.time_call), ``--warmup`` untimed then ``--iterations`` timed calls.
Beside it the FlashAttention-2 path of the same module is timed (``flash ms``), so the cuDNN-vs-FA2 choice is
visible, and the kernel the baseline chose is named. Its outputs are compared with the definition's exact
reference under the packaged per-op_type tolerances (``check``; skipped above ``--check-max-seq-len``), so
the table also says whether those tolerances fit a vendor kernel. H200 and H100 have the same 132 SMs and
the same dense BF16/FP8 peaks (989/1979 TFLOP/s; the H200 has 4.8 instead of 3.35 TB/s), so compute-bound
attention should give ratios near 1.

    OUT=./bench-results python3 benchmarks/attention_baselines.py            # everything (about 2-3 min)
    OUT=./bench-results python3 benchmarks/attention_baselines.py --quick    # seq_len <= 2048, fewer calls

Writes ``$OUT/attention_baselines.json`` and ``$OUT/attention_baselines.md``; stops starting new workloads
after ``--max-wall-s`` (the rows left out are listed). Where the GPU machine has no ``shared/`` data, the
ratio column stays empty: ``--render attention_baselines.json`` redoes the table here, with the H100 file. Exit 0 when every row ran and passed its check, 1
otherwise, 2 without a GPU.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
H100_CSVS = [
    base / "shared" / "data" / "ptxbench-problems" / "h100_reference_latency.csv"
    for base in (ROOT.parent, ROOT)
]
"""Where PTXBench's H100 latencies are looked for: ../shared next to the checkout, or shared/ inside it."""
FAMILIES = re.compile(r"^(fp8_)?mha_(with_lse|bwd)_d\d+(_causal)?$")


def h100_latencies(path: Path | None) -> dict[str, float]:
    """Workload uuid -> PTXBench's H100 reference latency (ms); empty when the file is not there."""
    path = path or next((p for p in H100_CSVS if p.is_file()), None)
    if path is None or not path.is_file():
        return {}
    with path.open() as fh:
        return {row["workload_uuid"]: float(row["latency_ms"]) for row in csv.DictReader(fh)}


def load_baseline(solution: Any) -> dict[str, Any]:
    """The baseline Solution's module namespace (trusted code of the bundled trace set)."""
    namespace: dict[str, Any] = {"__name__": f"baseline_{solution.name}"}
    source = next(s.content for s in solution.sources if s.path == solution.spec.entry_point.split("::")[0])
    exec(compile(source, solution.name, "exec"), namespace)
    return namespace


def flash_call(namespace: dict[str, Any], args: list[Any], causal: bool) -> Any:
    """A callable running the FlashAttention-2 path of a baseline module on ``args``."""
    import torch

    if "_CHOSEN" in namespace:  # the backward: the forward's auxiliary outputs first
        q, k, v, o, lse, do = args
        aux = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False)
        return lambda: namespace["_flash"](q, k, v, o, lse, do, aux)
    if "_dequantize" in namespace:
        q, k, v, qs, ks, vs = args
        return lambda: namespace["_flash"](
            *(namespace["_dequantize"](x, s) for x, s in ((q, qs), (k, ks), (v, vs)))
        )
    return lambda: namespace["_flash"](*args)


def chosen_kernel(namespace: dict[str, Any]) -> str:
    """``cudnn`` or ``flash``: what the baseline picked at its first call."""
    picks = namespace.get("_BACKEND") or [kernel for kernel, _ in namespace.get("_CHOSEN", {}).values()]
    return picks[0].__name__.strip("_") if picks else "?"


def time_ms(fn: Any, device: Any, flush: Any, warmup: int, iterations: int) -> dict[str, float]:
    """Median, p10 and p90 (ms) of ``iterations`` cold-L2 calls after ``warmup`` untimed ones."""
    from fibserve.bench.timing.statistics import summarize
    from fibserve.bench.worker.clock import time_call

    for _ in range(warmup):
        fn()
    stats = summarize([time_call(fn, device, flush).ms for _ in range(iterations)])
    return {"median": stats.median, "p10": stats.p10, "p90": stats.p90}


def rtol_needed(actual: Any, expected: Any, atol: float) -> float:
    """The smallest rtol at which every finite element of ``actual`` matches ``expected`` with ``atol``:
    max of ``(|x - y| - atol) / |y|`` (0 when all are within atol); tells how far a vendor kernel is from the
    packaged bound, which the pass/fail column alone does not."""
    import torch

    x, y = actual.float(), expected.float()
    finite = torch.isfinite(y)
    excess = ((x - y).abs() - atol).clamp(min=0)[finite]
    scale = y.abs()[finite].clamp(min=1e-30)
    return float((excess / scale).max()) if excess.numel() else 0.0


def check(definition: Any, inputs: dict[str, Any], actual: dict, axes: dict[str, int]) -> dict[str, Any]:
    """The baseline's outputs against the exact reference, under the packaged tolerances of its op_type."""
    from fibserve.bench.config import resolve_config
    from fibserve.bench.correctness.compare import compare_outputs
    from fibserve.bench.data.inputs import torch_dtype
    from fibserve.bench.data.reference import run_reference

    config = resolve_config(definition)
    shapes = {n: definition.resolve_shape(n, axes) for n in definition.outputs}
    expected = run_reference(definition, inputs, shapes)
    result = compare_outputs(
        actual,
        expected,
        {n: torch_dtype(s.dtype) for n, s in definition.outputs.items()},
        atol=config.atol,
        rtol=config.rtol,
        required_matched_ratio=config.required_matched_ratio,
    )
    max_abs, max_rel = result.max_errors()
    return {
        "rtol_needed": {n: rtol_needed(actual[n], expected[n], config.atol) for n in definition.outputs},
        "passed": result.status.value == "PASSED",
        "max_abs_error": max_abs,
        "max_rel_error": max_rel,
        "matched_ratio": result.min_matched_ratio(),
        "tolerance": f"atol {config.atol:g} rtol {config.rtol:g} ratio {config.required_matched_ratio:g}",
        "message": result.message[:300],
    }


def first_call(ts: Any, definition: Any, workload: Any, device: Any, secret: bytes) -> tuple:
    """(inputs of input set 0 on ``device``, the baseline Solution, its module, its first call's outputs): the
    first call also picks the baseline's kernel; synchronised."""
    import torch
    from fibserve.bench.data.inputs import generate_inputs

    inputs = generate_inputs(definition, workload, 0, secret=secret, device=device)
    baseline = ts.baseline_for(definition.name)
    namespace = load_baseline(baseline)
    outputs = namespace["run"](*inputs.values())
    torch.cuda.synchronize(device)
    return inputs, baseline, namespace, outputs


def measure_row(ts: Any, definition: Any, workload: Any, args: argparse.Namespace, env: dict) -> dict:
    """One table row (the caller turns an exception into an error row)."""
    from fibserve.bench.data.reference import normalize_outputs
    from fibserve.bench.timing.roofline import check_plausibility

    device, flush = env["device"], env["flush"]
    axes = definition.axis_values(workload.axes)
    inputs, baseline, namespace, outputs = first_call(
        ts, definition, workload, device, b"attention-baselines"
    )
    args_in = list(inputs.values())
    row: dict[str, Any] = {
        "definition": definition.name,
        "seq_len": workload.axes["seq_len"],
        "uuid": workload.uuid,
    }
    row["baseline"], row["kernel"] = baseline.name, chosen_kernel(namespace)
    row["ms"] = time_ms(lambda: namespace["run"](*args_in), device, flush, args.warmup, args.iterations)
    flash = flash_call(namespace, args_in, "causal" in definition.tags)
    row["flash_ms"] = time_ms(flash, device, flush, args.warmup, args.iterations)["median"]
    named = normalize_outputs(definition, outputs)
    verdict = check_plausibility(env["name"], row["ms"]["median"], definition, axes, inputs, named)
    if verdict is not None:
        row["tflops"], row["roofline_fraction"] = verdict["achieved_tflops"], verdict["roofline_fraction"]
    row["h100_ms"] = row["ratio_to_h100"] = None
    with_h100([row], env["h100"])
    if workload.axes["seq_len"] <= args.check_max_seq_len:
        row["check"] = check(definition, inputs, named, axes)
    return row


def fmt(value: Any, spec: str) -> str:
    """``value`` formatted, or ``-`` for a value not measured."""
    return "-" if value is None else format(value, spec)


def table_head(header: str, columns: list[str]) -> list[str]:
    """The header line, a blank line, and the markdown column header of a table."""
    return [header, "", "| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]


def check_cell(c: dict | None) -> str:
    """A check's verdict: PASS/FAIL, max abs / rel error, matched ratio and the rtol each output needs."""
    if c is None:
        return "not checked"
    return (
        f"{'PASS' if c['passed'] else 'FAIL'} {c['max_abs_error']:.3g} / {c['max_rel_error']:.3g}, {c['matched_ratio']:.4f}; "
        + "rtol needed "
        + ", ".join(f"{k} {v:.3g}" for k, v in c.get("rtol_needed", {}).items())
    )


def markdown(rows: list[dict], header: str) -> list[str]:
    """The table, one line per row."""
    columns = [
        "definition",
        "seq_len",
        "kernel",
        "ms (p10-p90)",
        "flash ms",
        "TFLOP/s",
        "roofline",
        "H100 ms",
    ]
    lines = table_head(header, [*columns, "ratio to H100", "check (max abs / rel err, matched)"])
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['definition']} | {r['seq_len']} | error: {r['error'][:120]} | | | | | | | |")
            continue
        ms = r["ms"]
        lines.append(
            f"| {r['definition']} | {r['seq_len']} | {r['kernel']} | {ms['median']:.4f} ({ms['p10']:.4f}-{ms['p90']:.4f}) "
            f"| {fmt(r['flash_ms'], '.4f')} | {fmt(r.get('tflops'), '.0f')} | {fmt(r.get('roofline_fraction'), '.0%')} "
            f"| {fmt(r['h100_ms'], '.4f')} | {fmt(r['ratio_to_h100'], '.3f')} | {check_cell(r.get('check'))} |"
        )
    return lines


def run_rows(
    items: list[tuple[Any, Any]], measure: Any, key: str, value: Any, max_wall_s: float
) -> tuple[list, list]:
    """Measure each (definition, workload) with ``measure`` until ``max_wall_s`` has passed; an exception is an
    error row (one broken row must not lose the others) named by ``key``: ``value(workload)``. Returns (rows,
    the rows left out)."""
    import torch

    started, rows, skipped = time.monotonic(), [], []
    for definition, workload in items:
        if time.monotonic() - started > max_wall_s:
            skipped.append(f"{definition.name} {key}={value(workload)}")
            continue
        try:
            row = measure(definition, workload)
        except Exception as exc:
            row = {"definition": definition.name, key: value(workload), "error": repr(exc)}
        torch.cuda.empty_cache()  # the row's tensors are gone with measure's frame
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows, skipped


def save(out: Path, stem: str, run: dict[str, Any], lines: list[str], max_wall_s: float) -> int:
    """Write ``<stem>.json`` (``run``: header, rows, skipped) and ``<stem>.md`` (``lines``) under ``out`` and
    print the table; exit code 1 when a row failed or was left out."""
    if run["skipped"]:
        lines += ["", f"Not run (over --max-wall-s {max_wall_s:g} s): " + ", ".join(run["skipped"])]
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(run, indent=2))
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    failed = [r for r in run["rows"] if "error" in r or not r.get("check", {"passed": True})["passed"]]
    return 1 if failed or run["skipped"] else 0


def with_h100(rows: list[dict], h100: dict[str, float]) -> list[dict]:
    """Rows with ``h100_ms`` and ``ratio_to_h100`` (our median / PTXBench's H100 latency) filled in."""
    for row in rows:
        if "ms" in row and row.get("uuid") in h100:
            row["h100_ms"] = h100[row["uuid"]]
            row["ratio_to_h100"] = row["ms"]["median"] / row["h100_ms"]
    return rows


def render(saved: Path, h100_csv: Path | None, out: Path) -> int:
    """Redo the markdown of a saved run (``--render``), with the H100 latencies of this machine."""
    data = json.loads(saved.read_text())
    rows = with_h100(data["rows"], h100_latencies(h100_csv))
    out.mkdir(parents=True, exist_ok=True)
    lines = markdown(rows, data.get("header", f"Attention baselines ({saved})"))
    (out / "attention_baselines.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="every attention baseline on every workload, on the GPU")
    parser.add_argument("--out", default=os.environ.get("OUT", "./bench-results"))
    parser.add_argument("--quick", action="store_true", help="seq_len <= 2048, 2 warmup and 5 timed calls")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--max-seq-len", type=int, default=16384)
    parser.add_argument(
        "--check-max-seq-len", type=int, default=16384, help="compare outputs up to this seq_len"
    )
    parser.add_argument("--only", default="", help="regular expression on definition names")
    parser.add_argument("--max-wall-s", type=float, default=280.0)
    parser.add_argument(
        "--h100-csv", type=Path, default=None, help="h100_reference_latency.csv (default: shared/)"
    )
    parser.add_argument("--render", type=Path, default=None, help="redo the table of a saved JSON (no GPU)")
    args = parser.parse_args(argv)
    if args.render is not None:
        return render(args.render, args.h100_csv, Path(args.out))
    if args.quick:
        args.warmup, args.iterations, args.max_seq_len = 2, 5, min(args.max_seq_len, 2048)

    import torch

    if not torch.cuda.is_available():
        print("attention_baselines: torch sees no CUDA GPU", file=sys.stderr)
        return 2
    from fibserve.bench.worker.clock import ColdL2
    from fibserve.datasets import default_root
    from fibserve.trace.trace_set import TraceSet

    device = torch.device("cuda:0")
    env = {"device": device, "flush": ColdL2(device), "name": torch.cuda.get_device_name(device)}
    env["h100"] = h100_latencies(args.h100_csv)
    if not env["h100"]:
        print(
            "attention_baselines: h100_reference_latency.csv not found; the ratio column stays empty",
            flush=True,
        )
    ts = TraceSet.load([default_root()])
    names = sorted(n for n in ts.definitions if FAMILIES.match(n) and re.search(args.only, n))
    started = time.monotonic()
    items = [
        (ts.definition(name), w)
        for name in names
        for w in sorted(ts.workloads_for(name), key=lambda w: w.axes["seq_len"])
        if w.axes["seq_len"] <= args.max_seq_len
    ]
    rows, skipped = run_rows(
        items,
        lambda d, w: measure_row(ts, d, w, args, env),
        "seq_len",
        lambda w: w.axes["seq_len"],
        args.max_wall_s,
    )
    header = (
        f"Attention baselines on {env['name']} (torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}), "
        f"{'quick' if args.quick else 'full'} run: {args.warmup} warmup + {args.iterations} timed calls, cold L2; "
        f"{time.monotonic() - started:.0f} s"
    )
    run = {"header": header, "rows": rows, "skipped": skipped}
    return save(Path(args.out), "attention_baselines", run, markdown(rows, header), args.max_wall_s)


if __name__ == "__main__":
    sys.exit(main())
