"""How fast `ptxbench-inspect` opens large inputs and answers keys on them (goals: open in under 2 s, no stall).

Generates, in a temporary folder (seeded, removed afterwards unless ``--keep DIR``):

* a trajectory of about ``--trajectory-mb`` MB (default 50) in the agent's format: ``--turns`` turns (default
  64), each an assistant reply with a long reasoning (``extra.reasoning_content``), prose and a CUDA kernel of
  about 1,200 lines, and the evaluation feedback with its KernelReport over 16 workloads (built with
  ``build_report`` from FlashInfer traces, as the agent stores it);
* ``--rows`` SFT rows (default 100,000) of ``ptxbench.sft/1`` (:class:`mini_ptx_agent.data.rows.SFTRow`, KernelGen
  layout: system, user, assistant with its reasoning and a kernel; loss mask, provenance; token counts estimated
  at 4 characters a token rather than counted, to keep generation short) as JSONL (about 3 KB a row), and the
  same rows as parquet with the pipeline's schema (``arrow_schema``) in row groups of 10,000.

Then, for each input:

1. **open, fresh process**: wall time of a new interpreter that imports the inspector, opens the input and
   runs the app headless (textual's ``run_test``, 160x48) until the first screen has drawn its first item,
   then exits (interpreter start and imports included);
2. **keys, in process**: the latency of each key press (``pilot.press`` and one refresh) over a sequence a
   reader would type: moving through every turn or 300 rows, paging through the reasoning and the kernel,
   jumping to the end, a search; the median and the worst.

Usage: ``uv run python benchmarks/inspector_open.py [--trajectory-mb 50] [--rows 100000] [--keep DIR]``.
Results are recorded in ``benchmarks/inspector_open.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fibserve.trace import Correctness, Environment, Evaluation, Performance, Trace, Workload
from mini_ptx_agent.environment.report import StaticAnalysis
from mini_ptx_agent.environment.verdict import build_report
from mini_ptx_agent.task import TaskConfig

SENTENCE = (
    "the tile loads through TMA into a four-stage ring while the consumer warpgroups issue wgmma on "
    "the previous stage and the producer waits on the empty barrier before it refills the slot"
)
WORDS = SENTENCE.split()


def prose(rng: random.Random, chars: int) -> str:
    """Sentences of kernel-engineering words, ``chars`` long, in lines of about 100 characters."""
    words, size = [], 0
    while size < chars:
        word = rng.choice(WORDS)
        words.append(word + ("\n" if rng.random() < 0.06 else " "))
        size += len(word) + 1
    return "".join(words)


def kernel(rng: random.Random, lines: int) -> str:
    """A CUDA source of ``lines`` lines (comments, a kernel body of inline PTX and arithmetic)."""
    body = [
        "#include <cuda_bf16.h>",
        "#include <tvm/ffi/container/tensor.h>",
        "// " + prose(rng, 80).replace("\n", " "),
    ]
    for i in range(lines - 6):
        body.append(
            rng.choice(
                [
                    f'    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");  // step {i}',
                    f"    float acc{i % 64} = fmaf(a[{i % 128}], b[{i % 96}], acc{i % 64});",
                    f"    if (threadIdx.x < {i % 256}) {{ smem[{i}] = __float2bfloat16(acc{i % 64}); }}",
                    f"    // {prose(rng, 70).strip()}",
                ]
            )
        )
    return "\n".join(
        [*body, "void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {", "}", ""]
    )


def kernel_report(rng: random.Random, task: TaskConfig, turn: int) -> dict[str, Any]:
    """A KernelReport over 16 workloads as the agent stores it (PASSED with speedups, or one failing)."""
    traces = []
    failing = rng.random() < 0.4
    for w in range(16):
        status = "INCORRECT_NUMERICAL" if failing and w == 3 else "PASSED"
        speedup = rng.uniform(0.3, 1.2)
        evaluation = Evaluation(
            status=status, environment=Environment(hardware="NVIDIA H200"), timestamp="2026-12-03T00:00:00Z",
            log="mismatch at [17, 4095]: 0.125 vs 0.5\n" * 20 if status != "PASSED" else "",
            correctness=Correctness(max_absolute_error=0.375 if status != "PASSED" else 0.0, max_relative_error=0.75 if status != "PASSED" else 0.0),
            performance=Performance(latency_ms=1.0 / speedup, reference_latency_ms=1.0, speedup_factor=speedup) if status == "PASSED" else None,
        )  # fmt: skip
        workload = Workload(uuid=f"{w:08d}-0000-4000-8000-{turn:012d}", axes={"M": 128 * (w + 1)}, inputs={})
        traces.append(
            Trace(definition=task.definition, workload=workload, solution=f"t{turn}", evaluation=evaluation)
        )
    analysis = StaticAnalysis(
        compiled=True, target="sm_90a", ptx_families=["cp.async.bulk.tensor", "mbarrier", "wgmma"],
        sass_families=["HGMMA", "UTMALDG"], architecture_families=["wgmma", "TMA"], registers=168,
        shared_memory_bytes=0, spill_bytes=0,
    )  # fmt: skip
    report = build_report(task, solution_name=f"bench-t{turn:03d}", traces=traces, analysis=analysis)
    return report.model_dump(mode="json")


def write_trajectory(path: Path, megabytes: int, turns: int, seed: int = 0) -> int:
    """A trajectory of about ``megabytes`` MB with ``turns`` turns at ``path``; returns its size in bytes."""
    rng = random.Random(seed)
    task = TaskConfig(definition="gemm_n7168_k5120", language="cuda")
    source = kernel(rng, 1200)
    per_turn = megabytes * 1_000_000 // turns
    reasoning_chars = max(1000, per_turn - len(source) - 40_000)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": prose(rng, 9000)},
        {"role": "user", "content": "Write the kernel for gemm_n7168_k5120.\n" + prose(rng, 800)},
    ]
    for turn in range(1, turns + 1):
        reply = f"Turn {turn}: {prose(rng, 1500)}\n```cuda\n{source.replace('step 1', f'step {turn}')}```\n"
        usage = {"prompt_tokens": 12000 + 900 * turn, "completion_tokens": 9000}
        messages.append(
            {"role": "assistant", "content": reply,
             "extra": {"reasoning_content": prose(rng, reasoning_chars), "usage": usage, "cost_usd": 0.03, "latency_s": 41.5}}
        )  # fmt: skip
        report = kernel_report(rng, task, turn)
        state = {
            "kind": "evaluation", "turn": turn, "status": report["status"], "all_passed": report["all_passed"],
            "min_speedup": report["min_speedup"], "target_met": False, "submitted": False,
            "executed_on_gpu": True, "version": turn if report["all_passed"] else None, "report": report,
        }  # fmt: skip
        messages.append(
            {
                "role": "user",
                "content": f"Evaluation of turn {turn}.\n" + prose(rng, 2500),
                "extra": {"ptxbench": state},
            }
        )
    messages.append({"role": "exit", "content": "LimitsExceeded", "extra": {"exit_status": "LimitsExceeded"}})
    info = {
        "exit_status": "LimitsExceeded",
        "ptxbench": {"demo": False, "task": task.model_dump(mode="json"), "turns": turns},
    }
    data = {"info": info, "messages": messages, "trajectory_format": "mini-swe-agent-1.1"}
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path.stat().st_size


def write_sft(jsonl: Path, parquet: Path, rows: int, seed: int = 0) -> tuple[int, int]:
    """``rows`` SFT rows as JSONL and as parquet (row groups of 10,000); returns both sizes in bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from mini_ptx_agent.data.records import Provenance
    from mini_ptx_agent.data.rows import ChatMessage, SFTRow, TokenCounts
    from mini_ptx_agent.data.sft import arrow_schema

    rng = random.Random(seed)
    system = prose(rng, 600)
    kernels = [kernel(rng, 40) for _ in range(50)]
    schema = arrow_schema()
    batch: list[dict[str, Any]] = []
    with jsonl.open("w", encoding="utf-8") as handle, pq.ParquetWriter(parquet, schema) as writer:
        for i in range(rows):
            messages = [
                ChatMessage(role="system", content=system),
                ChatMessage(role="user", content=f"Write gemm variant {i}. " + prose(rng, 200)),
                ChatMessage(role="assistant", content=f"<think>\n{prose(rng, 300)}\n</think>\n\n```cuda\n{kernels[i % 50]}```"),
            ]  # fmt: skip
            prompt = sum(len(m.content) for m in messages[:2]) // 4 + 8
            completion = len(messages[2].content) // 4 + 4
            provenance = Provenance(
                source_dir="/data/experiments/gemm", experiment="gemm", config_hash="sha256:0", run_dir=f"runs/t{i // 8}",
                trajectory=f"t{i // 8}", turn=i % 8 + 1, model="scripted/good", definition="gemm_n7168_k5120",
                language="cuda", arch="sm_90a", prompt_tag="hopper-no-hint", kernel_hash=f"{i % 50:064x}",
                evaluation=f"runs/t{i // 8}/exp_000/evaluations/turn_{i % 8 + 1:03d}.json", status="PASSED",
                failure_class="PASSED", executed_on_gpu=True, min_speedup=1.25,
            )  # fmt: skip
            row = SFTRow(
                id=f"kernelgen-{i:016x}", recipe="kernelgen", messages=messages, loss_mask=[0, 0, 1],
                tokens=TokenCounts(prompt=prompt, completion=completion, total=prompt + completion),
                provenance=provenance, kernel_hash=f"{i % 50:064x}", teacher_model="scripted/reasoning",
            )  # fmt: skip
            handle.write(row.model_dump_json() + "\n")
            batch.append(row.model_dump(mode="json"))
            if len(batch) == 10_000:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                batch = []
        if batch:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
    return jsonl.stat().st_size, parquet.stat().st_size


FRESH = """
import asyncio, sys, time
from mini_ptx_agent.inspect.app import InspectorApp
from mini_ptx_agent.inspect.readers.sources import open_path

async def main():
    app = InspectorApp(open_path(sys.argv[1]))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        print(time.perf_counter(), time.process_time())

asyncio.run(main())
"""


def open_fresh(path: Path, repeat: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds from launching a new interpreter to the inspector's first screen drawn, ``repeat``
    times each. On a loaded machine the wall time grows with the load; the CPU time is what an idle machine
    would wait."""
    walls, cpus = [], []
    for _ in range(repeat):
        started = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", FRESH, str(path)], check=True, capture_output=True, text=True
        )
        drawn, cpu = (float(v) for v in out.stdout.strip().splitlines()[-1].split())
        walls.append(
            drawn - started
        )  # perf_counter is the system's monotonic clock: comparable across processes
        cpus.append(cpu)
    return walls, cpus


async def key_latencies(path: Path, keys: list[str]) -> dict[str, Any]:
    """Open ``path`` in this process, press each key of ``keys``, and measure per key: the CPU time of the
    screen's thread (what handling the key and drawing cost, threads such as a search excluded), and the
    longest stall of the event loop (the largest gap between ticks of a 10 ms timer while the key is handled:
    the longest time the screen could not answer). The pilot's own wall time per key is reported too, but it
    waits until the process's CPU goes idle (textual's ``wait_for_idle``), so it also counts background threads
    and its 20 ms sleeps."""
    from mini_ptx_agent.inspect.app import InspectorApp
    from mini_ptx_agent.inspect.readers.sources import open_path

    started = time.perf_counter()
    app = InspectorApp(open_path(path))
    ticks: list[float] = []
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        opened = time.perf_counter() - started
        app.set_interval(0.01, lambda: ticks.append(time.perf_counter()))
        await pilot.pause(0.05)
        windows, walls, cpu = [], [], []
        for key in keys:
            t0, c0 = time.perf_counter(), time.thread_time()
            await pilot.press(key)
            await pilot.pause()
            cpu.append(time.thread_time() - c0)
            walls.append(time.perf_counter() - t0)
            windows.append((t0, time.perf_counter()))
        t0 = time.perf_counter()
        await app.workers.wait_for_complete()  # a search of SFT rows runs in a thread: when it is done
        background = time.perf_counter() - t0
    stalls = []
    for a, b in windows:
        inside = [t for t in ticks if a <= t <= b]
        before = [t for t in ticks if t < a][-1:] or [a]
        marks = [*before, *inside, b]
        stalls.append(max(y - x for x, y in itertools.pairwise(marks)))

    def worst(values: list[float]) -> str:
        i = values.index(max(values))
        return f"{max(values) * 1000:.0f} ms ({keys[i]}, #{i + 1})"

    return {
        "open_in_process_s": opened, "keys": len(keys), "background_s": background,
        "cpu": f"median {statistics.median(cpu) * 1000:.0f} ms, worst {worst(cpu)}",
        "stall": f"median {statistics.median(stalls) * 1000:.0f} ms, worst {worst(stalls)}",
        "pilot": f"median {statistics.median(walls) * 1000:.0f} ms, worst {worst(walls)}",
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trajectory-mb", type=int, default=50)
    parser.add_argument("--turns", type=int, default=64)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3, help="fresh-process opens per input")
    parser.add_argument("--keep", type=Path, help="write the inputs here and keep them (reused when there)")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="inspector-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    trajectory, jsonl, parquet = folder / "trajectory.json", folder / "rows.jsonl", folder / "rows.parquet"
    t0 = time.perf_counter()
    if args.keep and all(p.is_file() for p in (trajectory, jsonl, parquet)):  # made by an earlier run: reused
        sizes = {
            "trajectory": trajectory.stat().st_size,
            "jsonl": jsonl.stat().st_size,
            "parquet": parquet.stat().st_size,
        }
    else:
        sizes = {"trajectory": write_trajectory(trajectory, args.trajectory_mb, args.turns)}
        sizes["jsonl"], sizes["parquet"] = write_sft(jsonl, parquet, args.rows)
    print(
        f"generated in {time.perf_counter() - t0:.1f} s: "
        + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in sizes.items())
    )
    # Every turn in the list, then the last turn's reasoning shown and paged through, its kernel to the end,
    # the diff, the evaluation, and a search across turns.
    trajectory_keys = [
        *["j"] * (args.turns - 1), "r", "tab", "tab", *["pagedown"] * 30, "G",
        "2", "G", "g", "d", "4", "slash", *"wgmma", "enter", "n", "n",
    ]  # fmt: skip
    # A page of rows one by one, 100 pages, the last row, the first, its messages paged, a search to the end.
    rows_keys = [
        *["j"] * 100,
        *["pagedown"] * 100,
        "G",
        "g",
        "tab",
        "pagedown",
        "pagedown",
        "slash",
        *"variant 99999",
        "enter",
    ]
    try:
        for name, path, keys in (
            ("trajectory", trajectory, trajectory_keys),
            ("jsonl", jsonl, rows_keys),
            ("parquet", parquet, rows_keys),
        ):
            walls, cpus = open_fresh(path, args.repeat)
            keyed = asyncio.run(key_latencies(path, keys))
            print(
                f"{name}: open in a fresh process: wall median {statistics.median(walls):.2f} s (min {min(walls):.2f}, "
                f"max {max(walls):.2f}), CPU median {statistics.median(cpus):.2f} s (n={len(walls)}); in process "
                f"{keyed['open_in_process_s']:.2f} s. {keyed['keys']} keys: screen-thread CPU {keyed['cpu']}; "
                f"longest event-loop stall {keyed['stall']}; pilot wall {keyed['pilot']}; background work after "
                f"the last key {keyed['background_s']:.2f} s"
            )
    finally:
        if args.keep is None:
            for path in (trajectory, jsonl, parquet):
                path.unlink(missing_ok=True)
            folder.rmdir()


if __name__ == "__main__":
    main()
