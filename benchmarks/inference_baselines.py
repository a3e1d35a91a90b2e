#!/usr/bin/env python3
"""Every baseline of the inference-op suite on every workload, on the GPU (issue 31): which path it took,
latency, TFLOP/s and GB/s, fraction of the roofline, and whether it meets the packaged tolerances.

For each GQA, MLA, GDN and FP8-GEMM definition of the bundled trace set and each of its workloads, the baseline
Solution (fibserve.datasets.inference_baselines: FlashAttention-2 varlen on gathered pages, memory-efficient
attention for absorbed MLA, torch._scaled_mm blockwise, the reference for GDN) is loaded in this process, called
once (it picks its path then; the table names it), and timed with FIBServe's own timing primitive (cold L2,
device-wide synchronisation, CUDA events: fibserve.bench.worker.clock.time_call), ``--warmup`` untimed then
``--iterations`` timed calls. Its outputs are compared with the definition's exact reference under the packaged
per-op_type tolerances, with the rtol each output would need (a path that falls back to the reference passes
trivially, and the path column says so). With ``--time-reference`` the reference is timed too (``ref ms``).
PTXBench's problem lists publish no H100 latencies for these ops, so there is no ratio column.

    OUT=./bench-results python3 benchmarks/inference_baselines.py            # everything
    OUT=./bench-results python3 benchmarks/inference_baselines.py --only gqa --iterations 5

Writes ``$OUT/inference_baselines.json`` and ``$OUT/inference_baselines.md``; stops starting new workloads after
``--max-wall-s`` (the rows left out are listed); ``--render FILE.json`` redoes the table without a GPU. Exit 0
when every row ran and passed its check, 1 otherwise, 2 without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention_baselines import (  # the same timing, check and table pieces
    check,
    check_cell,
    first_call,
    fmt,
    run_rows,
    save,
    table_head,
    time_ms,
)

OP_TYPES = ("gqa_paged", "gqa_ragged", "mla_paged", "mla_ragged", "gdn", "fp8_gemm")
SHOWN_AXES = (
    "batch_size",
    "total_q",
    "total_kv",
    "total_tokens",
    "num_kv_indices",
    "total_seq_len",
    "num_seqs",
    "seq_len",
    "M",
)
"""The var axes that tell workloads apart in the table (the rest follow from them)."""


def chosen_path(namespace: dict[str, Any]) -> str:
    """The path a baseline module took at its first call (``reference`` when it has no choice to make)."""
    picks = namespace.get("_CHOSEN") or []
    return picks[0].__name__ if picks else "reference"


def workload_label(axes: dict[str, int]) -> str:
    """A short name for a workload: its distinguishing axes, e.g. ``batch_size=64 num_kv_indices=58966``."""
    return " ".join(f"{k}={axes[k]}" for k in SHOWN_AXES if k in axes)


def measure_row(ts: Any, definition: Any, workload: Any, args: argparse.Namespace, env: dict) -> dict:
    """One table row (the caller turns an exception into an error row)."""
    from fibserve.bench.data.reference import call_reference, normalize_outputs
    from fibserve.bench.timing.roofline import check_plausibility

    device, flush = env["device"], env["flush"]
    axes = definition.axis_values(workload.axes)
    inputs, baseline, namespace, outputs = first_call(
        ts, definition, workload, device, b"inference-baselines"
    )
    args_in = list(inputs.values())
    row: dict[str, Any] = {
        "definition": definition.name,
        "op_type": definition.op_type,
        "workload": workload_label(workload.axes),
        "uuid": workload.uuid,
        "baseline": baseline.name,
        "path": chosen_path(namespace),
    }
    row["ms"] = time_ms(lambda: namespace["run"](*args_in), device, flush, args.warmup, args.iterations)
    if args.time_reference:
        ref = time_ms(lambda: call_reference(definition, inputs), device, flush, 1, 3)
        row["ref_ms"] = ref["median"]
    named = normalize_outputs(definition, outputs)
    verdict = check_plausibility(env["name"], row["ms"]["median"], definition, axes, inputs, named)
    if verdict is not None:
        row |= {
            "tflops": verdict.achieved_tflops,
            "tb_s": verdict.achieved_tb_s,
            "roofline_fraction": verdict.roofline_fraction,
            "bound": verdict.bound,
            "flagged": verdict.flagged,
        }
    row["check"] = check(definition, inputs, named, axes)
    return row


def markdown(rows: list[dict], header: str) -> list[str]:
    """The table, one line per row."""
    columns = ["definition", "workload", "path", "ms (p10-p90)", "ref ms", "TFLOP/s", "TB/s", "roofline"]
    lines = table_head(header, [*columns, "check (max abs / rel err, matched)"])
    for r in rows:
        if "error" in r:
            lines.append(
                f"| {r['definition']} | {r.get('workload', '')} | error: {r['error'][:120]} | | | | | | |"
            )
            continue
        ms = r["ms"]
        roofline = "-" if r.get("roofline_fraction") is None else f"{r['roofline_fraction']:.0%} {r['bound']}"
        lines.append(
            f"| {r['definition']} | {r['workload']} | {r['path']} | {ms['median']:.4f} ({ms['p10']:.4f}-{ms['p90']:.4f}) "
            f"| {fmt(r.get('ref_ms'), '.3f')} | {fmt(r.get('tflops'), '.1f')} | {fmt(r.get('tb_s'), '.2f')} | {roofline} "
            f"| {check_cell(r['check'])} |"
        )
    return lines


def render(saved: Path, out: Path) -> int:
    """Redo the markdown of a saved run (``--render``)."""
    data = json.loads(saved.read_text())
    lines = markdown(data["rows"], data.get("header", f"Inference baselines ({saved})"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "inference_baselines.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="every inference-suite baseline on every workload, on the GPU"
    )
    parser.add_argument("--out", default=os.environ.get("OUT", "./bench-results"))
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--only", default="", help="regular expression on definition names")
    parser.add_argument("--time-reference", action="store_true", help="also time the reference (3 calls)")
    parser.add_argument("--max-wall-s", type=float, default=540.0)
    parser.add_argument("--render", type=Path, default=None, help="redo the table of a saved JSON (no GPU)")
    args = parser.parse_args(argv)
    if args.render is not None:
        return render(args.render, Path(args.out))

    import torch

    if not torch.cuda.is_available():
        print("inference_baselines: torch sees no CUDA GPU", file=sys.stderr)
        return 2
    from fibserve.bench.worker.clock import ColdL2
    from fibserve.datasets import default_root
    from fibserve.trace.trace_set import TraceSet

    device = torch.device("cuda:0")
    env = {"device": device, "flush": ColdL2(device), "name": torch.cuda.get_device_name(device)}
    ts = TraceSet.load([default_root()])
    names = sorted(n for n, d in ts.definitions.items() if d.op_type in OP_TYPES and re.search(args.only, n))
    started = time.monotonic()
    items = [(ts.definition(name), w) for name in names for w in ts.workloads_for(name)]
    rows, skipped = run_rows(
        items,
        lambda d, w: measure_row(ts, d, w, args, env),
        "workload",
        lambda w: workload_label(w.axes),
        args.max_wall_s,
    )
    header = (
        f"Inference-suite baselines on {env['name']} (torch {torch.__version__}), {args.warmup} warmup + "
        f"{args.iterations} timed calls, cold L2; {time.monotonic() - started:.0f} s"
    )
    run = {"header": header, "rows": rows, "skipped": skipped}
    return save(Path(args.out), "inference_baselines", run, markdown(rows, header), args.max_wall_s)


if __name__ == "__main__":
    sys.exit(main())
