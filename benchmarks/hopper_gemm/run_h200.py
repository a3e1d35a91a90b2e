"""Build, check and time the reference Hopper GEMM kernels for ``gemm_n7168_k5120`` on an H200.

``C[M, 7168] = A[M, 5120] @ B[7168, 5120]^T`` in bf16. For each M this script

1. builds ``kernel.cu`` with nvcc for sm_90a (tvm-ffi include/lib paths from the installed
   ``tvm_ffi`` package), records the ptxas resource report and the SASS opcode counts
   (``HGMMA``, ``UTMALDG``, ...) from ``cuobjdump --dump-sass``;
2. checks the CUDA kernel (through ``tvm_ffi.load_module``) and the Triton kernel against an fp32
   ``torch.matmul`` on fresh random inputs, with the output and 16 guard rows past it poisoned with
   NaN (every element of C must be written; no row >= M may be touched);
3. times CUDA, Triton and ``torch.mm`` (cuBLAS) with a cold L2 (a 256 MiB buffer is written before
   every call), CUDA events around each call, warmup, then interleaved rounds in rotating order;
   reports the median latency, p10/p90, TFLOP/s (2*M*N*K / latency) and the median of per-round
   latency ratios torch/candidate as the speedup.

Outputs (under ``--out``, default ``$OUT`` or ``./hopper_gemm_out``): ``results.json``, ``build.log``,
``sass_counts.json``; the summary table is printed last.

Usage (device): ``python3 benchmarks/hopper_gemm/run_h200.py --out $OUT``.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
KERNEL_DIR = REPO / "packages/fibserve/src/fibserve/datasets/reference_kernels/gemm_n7168_k5120"
N, K = 7168, 5120
BUNDLED_M = [70, 232, 972, 2379, 8192]
EXTRA_CHECK_M = [1, 128, 129, 300, 640]  # tile edges and both BN paths
SASS_OPS = ("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG", "WARPGROUP", "STSM", "STG", "LDL", "STL")


def log(msg: str) -> None:
    print(msg, flush=True)


def find_cuobjdump() -> str | None:
    """cuobjdump on PATH, else the one shipped in the triton wheel."""
    path = shutil.which("cuobjdump")
    if path:
        return path
    import triton

    cand = Path(triton.__file__).parent / "backends/nvidia/bin/cuobjdump"
    return str(cand) if cand.exists() else None


def build_cuda(out: Path, name: str, defines: list[str]) -> tuple[Path, str]:
    """Compile kernel.cu into a shared library; returns (path, ptxas/nvcc log). Raises on failure."""
    import tvm_ffi

    root = Path(tvm_ffi.__file__).parent
    so = Path("/tmp") / f"gemm_{name}.so"
    cmd = [
        "nvcc", "-shared", "-O3", "-lineinfo", "--ptxas-options=-v", "-std=c++17",
        "-Xcompiler", "-fPIC", "-gencode=arch=compute_90a,code=sm_90a",
        f"-I{root / 'include'}", f"-I{root / 'include' / 'dlpack'}", f"-L{root / 'lib'}",
        "-ltvm_ffi", f"-Xlinker=-rpath,{root / 'lib'}", *defines,
        str(KERNEL_DIR / "kernel.cu"), "-o", str(so),
    ]  # fmt: skip
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    text = f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}(took {time.time() - t0:.1f} s)\n"
    with open(out / "build.log", "a") as f:
        f.write(text)
    if proc.returncode != 0:
        raise RuntimeError(f"nvcc failed for {name}:\n{text}")
    return so, text


def sass_counts(so: Path) -> dict[str, int]:
    """Opcode-family counts in the SASS of a built library (empty if cuobjdump is missing)."""
    tool = find_cuobjdump()
    if tool is None:
        return {}
    sass = subprocess.run([tool, "--dump-sass", str(so)], capture_output=True, text=True).stdout
    counts: collections.Counter[str] = collections.Counter()
    for op in re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", sass, re.M):
        base = op.split(".")[0]
        if base in SASS_OPS:
            counts[base] += 1
    return dict(counts)


def load_triton_module():
    spec = importlib.util.spec_from_file_location("gemm_triton_ref", KERNEL_DIR / "kernel.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check(fn, m: int, seed: int) -> dict:
    """Run fn(A, B, C) once on fresh random inputs; compare with fp32 torch.matmul."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, K, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=g)
    buf = torch.full((m + 16, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    c = buf[:m]
    fn(a, b, c)
    torch.cuda.synchronize()
    ref = torch.matmul(a.float(), b.float().T)
    out = c.float()
    err = (out - ref).abs()
    tol = 0.25 + 1e-2 * ref.abs()  # ref rms ~ sqrt(K) = 72: bf16 output rounding is 2^-9 relative
    ok_elem = (err <= tol) & torch.isfinite(out)
    rel_fro = (torch.linalg.norm(out - ref) / torch.linalg.norm(ref)).item()
    guard_ok = bool(torch.isnan(buf[m:]).all().item())
    # Count mismatches as an integer: a float32 mean of ~1e6 ones can round to 1 - 2**-24.
    mismatches = int((~ok_elem).sum().item())
    res = {
        "M": m,
        "mismatches": mismatches,
        "matched_ratio": 1.0 - mismatches / out.numel(),
        "max_abs_err": err.nan_to_num(float("inf")).max().item(),
        "rel_fro_err": rel_fro,
        "nan_count": int(torch.isnan(out).sum().item()),
        "guard_rows_untouched": guard_ok,
    }
    res["passed"] = mismatches == 0 and rel_fro < 5e-3 and guard_ok
    return res


def time_interleaved(fns: dict, m: int, warmup: int, rounds: int) -> dict:
    """Cold-L2 event timing of each fn, interleaved: every round calls each fn once, order rotating."""
    g = torch.Generator(device="cuda").manual_seed(1234 + m)
    a = torch.randn(m, K, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=g)
    c = torch.empty(m, N, device="cuda", dtype=torch.bfloat16)
    flush = torch.empty(256 * 1024 * 1024, device="cuda", dtype=torch.uint8)
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name](a, b, c)
    torch.cuda.synchronize()
    times = {name: [] for name in names}
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in names]
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for i, name in enumerate(order):
            flush.fill_(r & 0xFF)
            ev[i][0].record()
            fns[name](a, b, c)
            ev[i][1].record()
        torch.cuda.synchronize()
        for i, name in enumerate(order):
            times[name].append(ev[i][0].elapsed_time(ev[i][1]))
    flops = 2.0 * m * N * K
    out = {}
    for name in names:
        t = torch.tensor(times[name], dtype=torch.float64)
        med = t.median().item()
        out[name] = {
            "median_ms": med,
            "p10_ms": t.quantile(0.1).item(),
            "p90_ms": t.quantile(0.9).item(),
            "count": len(times[name]),
            "tflops": flops / (med * 1e-3) / 1e12,
        }
        if name != "torch":
            ratios = torch.tensor(times["torch"], dtype=torch.float64) / t
            out[name]["speedup_vs_torch"] = ratios.median().item()
    return out


def profile_once(fns: dict, m: int) -> int:
    """One call of each kernel (and torch.mm) at M, for ncu to capture; no checks, no timing."""
    a = torch.randn(m, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, N, device="cuda", dtype=torch.bfloat16)
    for fn in [*fns.values(), lambda a, b, c: torch.mm(a, b.T, out=c)]:
        fn(a, b, c)
    torch.cuda.synchronize()
    return 0


def gpu_state() -> str:
    q = "clocks.sm,clocks.mem,power.draw,temperature.gpu"
    try:
        return subprocess.run(
            ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True, text=True
        ).stdout.strip()
    except FileNotFoundError:
        return "nvidia-smi missing"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "hopper_gemm_out"))
    ap.add_argument("--m", type=int, nargs="*", default=BUNDLED_M)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument(
        "--cuda-variant",
        action="append",
        default=[],
        help="extra CUDA build NAME=-DFLAG=V,... timed beside the default (tuning sweeps)",
    )
    ap.add_argument("--triton-tiled", action="store_true", help="also time the non-persistent Triton kernel")
    ap.add_argument(
        "--profile-once",
        type=int,
        metavar="M",
        help="build, then call CUDA, Triton and torch once each at this M and exit (run under ncu)",
    )
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "build.log").write_text("")
    torch.backends.cuda.matmul.allow_tf32 = False
    import tvm_ffi

    report: dict = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "gpu_state_start": gpu_state(),
        "checks": {},
        "timing": {},
    }
    builds = {"cuda": []}
    for spec in args.cuda_variant:
        name, flags = spec.split("=", 1)
        builds[f"cuda_{name}"] = flags.split(",")
    fns: dict = {}
    sass = {}
    for name, defines in builds.items():
        so, text = build_cuda(out, name, defines)
        log(f"built {name}: " + " | ".join(ln.strip() for ln in text.splitlines() if "registers" in ln))
        sass[name] = sass_counts(so)
        fns[name] = tvm_ffi.load_module(str(so))["run"]
    (out / "sass_counts.json").write_text(json.dumps(sass, indent=2))
    log(f"SASS opcode counts: {json.dumps(sass)}")
    tri = load_triton_module()
    fns["triton"] = tri.run
    if args.triton_tiled:
        fns["triton_tiled"] = lambda a, b, c: tri.run(a, b, c, variant="tiled")
    report["sass_counts"] = sass
    if args.profile_once:
        return profile_once(fns, args.profile_once)

    all_ok = True
    for m in sorted(set(args.m) | set(EXTRA_CHECK_M)):
        for name, fn in fns.items():
            try:
                res = check(fn, m, seed=m * 7 + 1)
            except Exception as exc:  # report, keep going with the other kernels
                res = {"M": m, "passed": False, "error": repr(exc)}
            report["checks"].setdefault(name, []).append(res)
            all_ok &= res["passed"]
            log(f"check {name:>14} M={m:5d}: {'PASS' if res['passed'] else 'FAIL'} {res}")
    (out / "results.json").write_text(json.dumps(report, indent=2))

    fns["torch"] = lambda a, b, c: torch.mm(a, b.T, out=c)
    timed = {k: v for k, v in fns.items() if all(r["passed"] for r in report["checks"].get(k, []))}
    for m in args.m:
        report["timing"][str(m)] = time_interleaved(timed, m, args.warmup, args.rounds)
        (out / "results.json").write_text(json.dumps(report, indent=2))
    report["gpu_state_end"] = gpu_state()
    (out / "results.json").write_text(json.dumps(report, indent=2))

    log(f"\nGPU state start: {report['gpu_state_start']} | end: {report['gpu_state_end']}")
    log(f"{'M':>6} {'kernel':>14} {'median ms':>10} {'p10':>8} {'p90':>8} {'TFLOP/s':>8} {'vs torch':>8}")
    for m, per in report["timing"].items():
        for name, r in per.items():
            sp = r.get("speedup_vs_torch")
            log(
                f"{m:>6} {name:>14} {r['median_ms']:10.4f} {r['p10_ms']:8.4f} {r['p90_ms']:8.4f} "
                f"{r['tflops']:8.1f} {'' if sp is None else f'{sp:8.3f}x'}"
            )
    log(f"all checks passed: {all_ok}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
