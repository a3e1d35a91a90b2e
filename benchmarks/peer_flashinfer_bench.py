#!/usr/bin/env python3
"""FlashInfer-Bench 0.1.2 and FIBServe side by side on the same solutions, back to back on one GPU (issue 35).

Both tools evaluate the same Solution files of one temporary trace set (FlashInfer Trace format):

- **FlashInfer-Bench** (the PyPI release; never a dependency of PTXBench: ``scripts/device_wheels.sh --peer``
  fetches it and the ``peer`` step of ``scripts/gpu_validate.sh`` installs it for that step only), through
  ``Benchmark(TraceSet.from_path(root), BenchmarkConfig(solutions=[the candidates]))``: its default config
  (persistent runner, 10 warmup calls, 50 iterations, 3 trials, atol = rtol = 0.01) against the definition's
  reference;
- **FIBServe**, through an in-process ``fibserve.bench.Evaluator("cuda:0")`` with its default config, against
  the definition's baseline Solution (the reference's own torch op).

Solutions (``tests/fibserve/bench/kernels``): ``gemm_naive.cu`` (honest, one thread per output),
``gemm_content_cache.cu`` (answers from a cache keyed on its inputs' content), ``gemm_leaves_work.cu`` (leaves
about 0.5 ms of GPU work running after it returns) and ``gemm_torch_matmul.py`` (the baseline's own op), on the
bf16 GEMM ``C = A @ B.T`` of ``gemm_n7168_k5120`` with its const axes set to N = K = 1024 (the shapes issue 35
measured) at M = 128 and 1000; and the Triton vector add ``add_correct.py`` on ``vector_add_f32`` at N = 65536.
For the short kernels (torch.matmul, the vector add) the device time of the candidate's kernels per call is
measured with CUPTI (:func:`short_kernels.cupti_us`: cold L2, no host launch time).

Each line is judged by issue 35's standard, the same rule for both tools (benchmarks/peer_verdict.py): the
honest kernel PASSED; a cheating kernel's speedup no better than the honest one's (not fooled); a short kernel's
latency within 15% of CUPTI and, for FIBServe, no higher than the peer's. FIBServe is **ahead** on a line when
the rule holds for it.

Both tools' CUDA candidates are compiled up front, in parallel, before anything is timed (neither tool times its
build). Then CUPTI, then FlashInfer-Bench (its persistent worker is closed before FIBServe starts), then
FIBServe: one evaluation per candidate, its workloads together.

Writes ``$OUT/peer_flashinfer_bench.json`` (every figure, so ``--render`` can judge a saved run again) and
``.md``, prints the table and a summary. Exit 0 whenever it ran (it is a comparison, whatever the verdicts),
2 on a setup failure (flashinfer_bench not importable, no GPU, bad arguments).

    python benchmarks/peer_flashinfer_bench.py [--trials N] [--m 128,1000]   # on the GPU (gpu_validate.sh peer)
    FIBSERVE_KERNEL_SPAN=0 python benchmarks/peer_flashinfer_bench.py        # FIBServe on CUDA events instead
    python benchmarks/peer_flashinfer_bench.py --render saved.json           # judge and render a saved run
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "tests" / "fibserve" / "bench" / "kernels"


def _load(path: Path) -> Any:
    """The module at ``path`` (a sibling script such as scripts/gpu_suite.py, a kernel file), loaded without
    putting its folder on sys.path; registered in sys.modules under a name of its own, where dataclasses and
    Triton's JIT look their module up."""
    spec = importlib.util.spec_from_file_location(f"peer_bench_{path.stem}", path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


verdict = _load(ROOT / "benchmarks" / "peer_verdict.py")

GEMM_FROM = "gemm_n7168_k5120"
GEMM = "gemm_n1024_k1024_bf16"
N_K = 1024
VECTOR = "vector_add_f32"
VECTOR_N = 65536
PEER_VERSION = "0.1.2"
INSTALL_HINT = (
    "flashinfer_bench is not importable. FlashInfer-Bench is installed for this benchmark only: run "
    "`bash scripts/device_wheels.sh --peer` here and the `peer` step of scripts/gpu_validate.sh on the GPU, or "
    f"`pip install --no-deps --target DIR flashinfer-bench=={PEER_VERSION} docstring-parser` and put DIR on "
    "PYTHONPATH"
)


@dataclass(frozen=True)
class Candidate:
    """One solution of the comparison: its kernel file, definition, language and role in the verdict."""

    file: str
    definition: str
    language: str
    role: str  # honest | cheat | short
    dps: bool = True

    @property
    def name(self) -> str:
        return Path(self.file).stem


CANDIDATES = (
    Candidate("gemm_naive.cu", GEMM, "cuda", "honest"),
    Candidate("gemm_content_cache.cu", GEMM, "cuda", "cheat"),
    Candidate("gemm_leaves_work.cu", GEMM, "cuda", "cheat"),
    Candidate("gemm_torch_matmul.py", GEMM, "python", "short", dps=False),
    Candidate("add_correct.py", VECTOR, "triton", "short"),
)


class PeerMissing(RuntimeError):
    """flashinfer_bench cannot be imported; the message says how to install it for this benchmark."""


def peer_module() -> Any:
    """The ``flashinfer_bench`` package. Raises :class:`PeerMissing` (with :data:`INSTALL_HINT`)."""
    try:
        import flashinfer_bench
    except ImportError as exc:
        raise PeerMissing(f"{INSTALL_HINT} ({exc})") from None
    return flashinfer_bench


def write_trace_set(root: Path, ms: list[int]) -> list[dict[str, Any]]:
    """Write the comparison's trace set under ``root``: the two definitions, their workloads, every candidate
    and the baselines (``solutions/`` files numbered so both tools take the candidates in CANDIDATES' order).

    Returns:
        One row per (candidate, workload): ``solution``, ``definition``, ``role``, ``workload`` (a label such as
        ``M=128``), ``uuid``; the figures are filled in later.
    """
    from fibserve.datasets import default_root
    from fibserve.trace import Definition, Solution, Trace, Workload
    from fibserve.trace.trace_set import TraceSet

    solution = _load(ROOT / "scripts" / "gpu_suite.py").solution
    bundled = TraceSet.load([default_root()])
    raw = bundled.definition(GEMM_FROM).model_dump(mode="json")
    raw["axes"]["N"]["value"] = raw["axes"]["K"]["value"] = N_K
    raw["name"], raw["description"] = GEMM, f"{GEMM_FROM} with N = K = {N_K}: C = A @ B.T in bfloat16."
    raw["tags"] = [t for t in raw["tags"] if not t.startswith("baseline:")] + [
        f"baseline:{GEMM}_torch_matmul"
    ]
    definitions = {GEMM: Definition.model_validate(raw), VECTOR: bundled.definition(VECTOR)}
    baseline = bundled.baseline_for(GEMM_FROM).model_dump(mode="json")
    baselines = [
        Solution.model_validate({**baseline, "name": f"{GEMM}_torch_matmul", "definition": GEMM}),
        bundled.baseline_for(VECTOR),
    ]
    random = {"type": "random"}
    workloads = {
        GEMM: [
            Workload(uuid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"ptxbench/{GEMM}/M={m}")), axes={"M": m},
                     inputs={"A": random, "B": random})
            for m in ms
        ],
        VECTOR: [w for w in bundled.workloads_for(VECTOR) if w.axes["N"] == VECTOR_N],
    }  # fmt: skip
    for name, definition in definitions.items():
        (root / "definitions").mkdir(parents=True, exist_ok=True)
        (root / "definitions" / f"{name}.json").write_text(definition.model_dump_json(indent=2))
        (root / "workloads").mkdir(exist_ok=True)
        lines = [Trace(definition=name, workload=w).model_dump_json() for w in workloads[name]]
        (root / "workloads" / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    (root / "solutions" / "baselines").mkdir(parents=True, exist_ok=True)
    for b in baselines:
        (root / "solutions" / "baselines" / f"{b.name}.json").write_text(b.model_dump_json(indent=2))
    rows = []
    for i, c in enumerate(CANDIDATES):
        s = solution(c.file, c.definition, c.language, dps=c.dps)
        (root / "solutions" / f"{i:02d}_{c.name}.json").write_text(s.model_dump_json(indent=2))
        for w in workloads[c.definition]:
            rows.append({"solution": c.name, "definition": c.definition, "role": c.role, "workload": _label(w.axes),
                         "uuid": w.uuid})  # fmt: skip
    return rows


def prebuild(peer: Any, root: Path) -> None:
    """Compile every CUDA candidate for both tools at once, before anything is timed. Neither tool times its
    build; one after the other, the six nvcc runs would take most of the step's time limit."""
    from fibserve.build import build_solution
    from fibserve.trace.trace_set import TraceSet
    from flashinfer_bench.compile import BuilderRegistry

    ours, theirs = TraceSet.load([root]), peer.TraceSet.from_path(str(root))
    registry = BuilderRegistry.get_instance()
    jobs = {}
    for c in (c for c in CANDIDATES if c.language == "cuda"):
        jobs[f"fibserve {c.name}"] = (build_solution, ours.solution(c.name))
        jobs[f"peer {c.name}"] = (
            registry.build,
            theirs.definitions[c.definition],
            theirs.get_solution(c.name),
        )
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {label: pool.submit(*job) for label, job in jobs.items()}
    for label, future in futures.items():
        if (exc := future.exception()) is not None:
            print(f"  prebuild {label}: {exc!r} (the tool reports it in its own result)", flush=True)


def measure_cupti(rows: list[dict[str, Any]]) -> None:
    """Set ``cupti_us`` on every short-kernel row: the device time of its candidate's kernels per call."""
    import torch
    from fibserve.bench.worker.clock import ColdL2, overwrite_plan

    cupti_us = _load(ROOT / "benchmarks" / "short_kernels.py").cupti_us
    device = torch.device("cuda:0")
    flush = ColdL2(device, overwrite_plan(str(device)))
    add = _load(KERNELS / "add_correct.py")
    for row in (r for r in rows if r["role"] == "short"):
        if row["definition"] == VECTOR:
            x, y, z = (torch.randn(VECTOR_N, device=device) for _ in range(3))
            fn = lambda x=x, y=y, z=z: add.run(x, y, z)  # noqa: E731
        else:
            m = int(row["workload"].removeprefix("M="))
            a = torch.randn(m, N_K, device=device, dtype=torch.bfloat16)
            b = torch.randn(N_K, N_K, device=device, dtype=torch.bfloat16)
            fn = lambda a=a, b=b: torch.matmul(a, b.T)  # noqa: E731
        row["cupti_us"] = cupti_us(fn, flush)
        print(f"  CUPTI {row['solution']} {row['workload']}: {row['cupti_us']:.2f} us", flush=True)


def _label(axes: dict[str, int]) -> str:
    """A workload's name in the table: its var axes, ``M=128``."""
    return ", ".join(f"{k}={v}" for k, v in axes.items())


def _say(tool: str, solution: str, axes: dict[str, int], result: dict[str, Any]) -> None:
    """One progress line per result, so a run cut off by its time limit still shows what it measured."""
    ms, reference = verdict.ms_cell(result["latency_ms"]), verdict.ms_cell(result["reference_ms"])
    after = ""
    if "baseline_after_itself_ms" in result:
        after = (f"(after the candidate {result['baseline_after_candidate_ms']:.5f} ms, after itself "
                 f"{result['baseline_after_itself_ms']:.5f} ms) ")  # fmt: skip
    print(f"  {tool} {solution} {_label(axes)}: {result['status']}, {ms} ms, reference {reference} ms "
          f"{after}{result['log'][-120:]}", flush=True)  # fmt: skip


def run_peer(peer: Any, root: Path, trials: int | None) -> dict[tuple[str, str], dict[str, Any]]:
    """FlashInfer-Bench's results, keyed by (solution, workload uuid)."""
    names = [c.name for c in CANDIDATES]
    config = peer.BenchmarkConfig(solutions=names, **({"num_trials": trials} if trials else {}))
    benchmark = peer.Benchmark(peer.TraceSet.from_path(str(root)), config)
    try:
        result = benchmark.run_all(dump_traces=False)
    finally:
        benchmark.close()
    found = {}
    for trace in (t for traces in result.traces.values() for t in traces):
        ev = trace.evaluation
        found[(trace.solution, trace.workload.uuid)] = verdict.figures(
            ev.status.value, ev.performance, ev.log
        )
        _say(
            "FlashInfer-Bench",
            trace.solution,
            trace.workload.axes,
            found[(trace.solution, trace.workload.uuid)],
        )
    return found


def run_fibserve(root: Path, rows: list[dict[str, Any]], trials: int | None) -> dict[tuple[str, str], dict]:
    """FIBServe's results, keyed by (solution, workload uuid): one evaluation per candidate, its workloads
    together, against the definition's baseline."""
    from fibserve.bench import Evaluator
    from fibserve.trace.trace_set import TraceSet

    ts = TraceSet.load([root])
    found = {}
    with Evaluator("cuda:0") as evaluator:
        for c in CANDIDATES:
            uuids = [r["uuid"] for r in rows if r["solution"] == c.name]
            started = time.monotonic()
            report = evaluator.evaluate(
                ts.definition(c.definition), ts.solution(c.name), [ts.workload(u) for u in uuids],
                overrides={"trials": trials} if trials else None, baseline=ts.baseline_for(c.definition),
            )  # fmt: skip
            for trace in report.traces:
                ev = trace.evaluation
                if ev is not None:
                    found[(c.name, trace.workload.uuid)] = figures = verdict.figures(
                        ev.status.value, ev.performance, ev.log
                    )
                    # the baseline's median right after the candidate's calls and right after its own
                    # (issue 35: within 2% of each other next to a slow candidate)
                    bias = ((ev.performance.extra or {}) if ev.performance else {}).get("neighbour_bias")
                    if bias:
                        figures["baseline_after_candidate_ms"] = bias["after_candidate_ms"]
                        figures["baseline_after_itself_ms"] = bias["after_itself_ms"]
            for u in uuids:
                error = report.workload_errors.get(u) or report.task_error or "no result"
                found.setdefault((c.name, u), verdict.figures("ERROR", None, error))
                _say("FIBServe", c.name, ts.workload(u).axes, found[(c.name, u)])
            print(f"  FIBServe {c.name}: {time.monotonic() - started:.1f} s", flush=True)
    return found


def publish(out: Path, result: dict[str, Any], as_json: bool) -> int:
    """Write ``result`` (``header``, judged ``rows``) as JSON and markdown under ``out``; print one of them."""
    out.mkdir(parents=True, exist_ok=True)
    result["summary"] = verdict.summary(result["rows"])
    text = "\n".join(verdict.markdown(result["rows"], result["header"])) + "\n"
    (out / "peer_flashinfer_bench.json").write_text(json.dumps(result, indent=2))
    (out / "peer_flashinfer_bench.md").write_text(text)
    print(json.dumps(result, indent=2) if as_json else text, flush=True)
    return 0


def _guarded(phase: str, run: Any, *args: Any) -> tuple[dict, str]:
    """``(run(*args), "")``, or ``({}, why)`` when ``run`` raised: one tool's failure leaves the other's results."""
    try:
        return run(*args), ""
    except Exception as exc:  # a tool's own failure is a result of the comparison, not the end of it
        print(f"  {phase} failed: {exc!r}", flush=True)
        return {}, f"{phase} failed: {exc!r}"


def compare(peer: Any, ms: list[int], trials: int | None) -> list[dict[str, Any]]:
    """Write the trace set, compile, measure CUPTI, then run FlashInfer-Bench and FIBServe one after the other;
    returns the rows of :func:`write_trace_set` with ``cupti_us``, ``fibserve`` and ``peer`` filled in."""
    with tempfile.TemporaryDirectory(prefix="peer-bench-") as tmp:
        os.environ["FIB_CACHE_PATH"] = str(Path(tmp) / "fib-cache")  # a fresh cache: its builds and logs
        root = Path(tmp) / "trace-set"
        rows = write_trace_set(root, ms)
        print("compiling the CUDA candidates for both tools", flush=True)
        prebuild(peer, root)
        print("CUPTI device times of the short kernels", flush=True)
        measure_cupti(rows)
        print("FlashInfer-Bench", flush=True)
        theirs, their_failure = _guarded("FlashInfer-Bench", run_peer, peer, root, trials)
        print("FIBServe", flush=True)
        ours, our_failure = _guarded("FIBServe", run_fibserve, root, rows, trials)
    for row in rows:
        key = (row["solution"], row["uuid"])
        row["fibserve"] = ours.get(key) or verdict.figures("ERROR", None, our_failure or "no result")
        row["peer"] = theirs.get(key) or verdict.figures("ERROR", None, their_failure or "no trace")
    return rows


def _ms_list(value: str) -> list[int]:
    try:
        ms = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--m takes comma-separated integers, not {value!r}") from None
    if not ms or min(ms) < 1:
        raise argparse.ArgumentTypeError(f"--m needs at least one positive M, got {value!r}")
    return ms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", default=os.environ.get("OUT", "."), help="results folder (default $OUT or .)"
    )
    parser.add_argument("--m", type=_ms_list, default=[128, 1000], help="GEMM rows M (default 128,1000)")
    parser.add_argument("--trials", type=int, help="trials for both tools (default: each tool's default, 3)")
    parser.add_argument("--json", action="store_true", help="print the JSON result instead of the table")
    parser.add_argument("--render", type=Path, help="judge and render a saved peer_flashinfer_bench.json")
    args = parser.parse_args(argv)
    if args.trials is not None and args.trials < 1:
        parser.error("--trials must be at least 1")
    if args.render:
        try:
            saved = json.loads(args.render.read_text())
            return publish(Path(args.out), {**saved, "rows": verdict.judge(saved["rows"])}, args.json)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"peer_flashinfer_bench: cannot render {args.render}: {exc!r}", file=sys.stderr)
            return 2
    try:
        peer = peer_module()
    except PeerMissing as exc:
        print(f"peer_flashinfer_bench: {exc}", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("peer_flashinfer_bench: torch sees no CUDA GPU; run it on the GPU machine", file=sys.stderr)
        return 2
    from importlib.metadata import PackageNotFoundError, version

    try:
        peer_version = version("flashinfer-bench")
    except PackageNotFoundError:
        peer_version = "unknown"
    if peer_version != PEER_VERSION:
        print(
            f"note: FlashInfer-Bench {peer_version} installed; the comparison is written for {PEER_VERSION}"
        )
    started = datetime.now(UTC)
    rows = compare(peer, args.m, args.trials)
    trials = f"{args.trials} trials" if args.trials else "default trials"
    from fibserve.bench.worker.kernel_span import requested

    spans = "CUPTI spans on" if requested() else "CUDA events, the spans off by FIBSERVE_KERNEL_SPAN=0"
    header = (
        f"FlashInfer-Bench {peer_version} (default config) and FIBServe (Evaluator('cuda:0'), default config, "
        f"{spans}), "
        f"{trials}, on {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
        f"{started:%Y-%m-%d %H:%M} UTC, commit {os.environ.get('GPU_COMMIT', 'unknown')}. GEMM: bf16 "
        f"C = A @ B.T, N = K = {N_K}; vector add: float32, N = {VECTOR_N}."
    )
    result = {
        "header": header,
        "peer_version": peer_version,
        "trials": args.trials,
        "rows": verdict.judge(rows),
    }
    return publish(Path(args.out), result, args.json)


if __name__ == "__main__":
    sys.exit(main())
