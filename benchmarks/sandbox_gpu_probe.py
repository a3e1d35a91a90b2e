"""Which bubblewrap namespaces keep CUDA IPC working between the trusted process and a sandbox worker?

The evaluator shares CUDA buffers with its workers through CUDA IPC in both directions: the trusted process
exports the inputs and destination buffers, and a worker exports buffers the trusted side maps. A worker in
its own PID, IPC, mount, network and user namespace, with a private ``/dev/shm`` and an unprivileged uid, is
what the sandbox wants; this probe shows which of those steps CUDA IPC survives on the machine it runs on.

For each configuration it starts one child under that configuration. The child opens a tensor exported by
this process (1M float32, all 1.0), doubles it in place, exports a tensor of its own (all 3.0) and waits
until this process has opened and summed it. It also reports what it can see: its uid, the number of
processes in its ``/proc``, whether ``/etc/shadow`` is readable, the CUDA device name. The last
configuration is the product's own sandbox (:class:`fibserve.sandbox.Sandbox` with the GPU mounts).

Then the product itself (``product``): an honest CUDA and an honest Triton candidate evaluated by the
Evaluator (both must PASS), the hostile CUDA probe of the tests (``tests/fibserve/bench/kernels/
hostile_probe.cu``: its host code looks for a server's token in every ``/proc/*/cmdline`` and ``environ``,
reads ``/etc/shadow``, connects to a listener on 127.0.0.1 and leaves a setsid orphan), and whether
``nvidia-smi`` names a sandboxed worker's GPU memory by its host pid (what a per-process GPU memory watchdog
would need).

    OUT=./bench-results python3 benchmarks/sandbox_gpu_probe.py [--skip-product]

Writes ``$OUT/sandbox_gpu_probe.json`` and prints one line per configuration; exit code 0 when the product's
checks all hold.
"""

from __future__ import annotations

import glob
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, os, pickle, sys, time
from pathlib import Path
work = Path(sys.argv[1])
facts = {"uid": os.getuid(), "procs": sum(1 for p in os.listdir('/proc') if p.isdigit())}
try:
    open('/etc/shadow').read(1); facts["shadow_readable"] = True
except OSError:
    facts["shadow_readable"] = False
import torch
from torch.multiprocessing.reductions import reduce_tensor
facts["device"] = torch.cuda.get_device_name(0)
fn, args = pickle.loads((work / "parent.pkl").read_bytes())
x = fn(*args)
x.mul_(2.0)
torch.cuda.synchronize()
facts["parent_tensor_sum_after_double"] = float(x.sum())
y = torch.full((1 << 20,), 3.0, device="cuda")
torch.cuda.synchronize()
(work / "child.pkl").write_bytes(pickle.dumps(reduce_tensor(y)))
(work / "facts.json").write_text(json.dumps(facts))
deadline = time.time() + 60
while not (work / "done").exists() and time.time() < deadline:
    time.sleep(0.05)
"""


def nvidia_nodes() -> list[str]:
    return sorted(glob.glob("/dev/nvidia*"))


def product_prefix(work: Path) -> list[str]:
    """The bubblewrap command line of a product GPU worker, with ``work`` writable (see product_child)."""
    return ["<product>", str(work)]


def bwrap_full(work: Path, *, user: bool, ipc: bool, private_shm: bool, pid: bool = True) -> list[str]:
    args = ["bwrap", "--die-with-parent", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if pid:
        args.append("--unshare-pid")
    if ipc:
        args.append("--unshare-ipc")
    if user:
        args += ["--unshare-user", "--uid", "65534", "--gid", "65534"]
    args += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    for node in nvidia_nodes():
        args += ["--dev-bind", node, node]
    if private_shm:
        args += ["--tmpfs", "/dev/shm"]
    else:
        args += ["--bind", "/dev/shm", "/dev/shm"]
    args += ["--tmpfs", "/tmp", "--bind", str(work), str(work)]
    if os.environ.get("PYTHONPATH"):
        for entry in os.environ["PYTHONPATH"].split(":"):
            if entry.startswith("/tmp/") and Path(entry).exists():
                args += ["--ro-bind", entry, entry]
    return args


CONFIGS: dict[str, dict] = {
    "plain": {"prefix": lambda w: []},
    "bwrap-dev-bind-root": {"prefix": lambda w: ["bwrap", "--dev-bind", "/", "/"]},
    "pid": {"prefix": lambda w: bwrap_full(w, user=False, ipc=False, private_shm=False)},
    "pid+ipc": {"prefix": lambda w: bwrap_full(w, user=False, ipc=True, private_shm=False)},
    "pid+ipc+shm": {"prefix": lambda w: bwrap_full(w, user=False, ipc=True, private_shm=True)},
    "pid+ipc+shm+userns(root outside)": {
        "prefix": lambda w: bwrap_full(w, user=True, ipc=True, private_shm=True)
    },
    "nobody-outside+pid+ipc+shm+userns": {
        "prefix": lambda w: bwrap_full(w, user=True, ipc=True, private_shm=True),
        "as_nobody": True,
    },
    "nobody-outside+pid+userns (host shm, host ipc)": {
        "prefix": lambda w: bwrap_full(w, user=True, ipc=False, private_shm=False),
        "as_nobody": True,
    },
    "nobody-outside, no bwrap": {"prefix": lambda w: [], "as_nobody": True},
    "pid+ipc+userns(root outside, 65534 inside), host shm": {
        "prefix": lambda w: bwrap_full(w, user=True, ipc=True, private_shm=False)
    },
    "product: fibserve.sandbox GPU worker mounts": {"prefix": product_prefix},
}


def run_config(name: str, config: dict) -> dict:
    import torch
    from torch.multiprocessing.reductions import reduce_tensor

    work = Path(tempfile.mkdtemp(prefix="sbx-probe-"))
    os.chmod(work, 0o777)
    x = torch.ones(1 << 20, device="cuda")
    torch.cuda.synchronize()
    (work / "parent.pkl").write_bytes(pickle.dumps(reduce_tensor(x)))
    os.chmod(work / "parent.pkl", 0o644)
    (work / "child.py").write_text(CHILD)
    cmd = [*config["prefix"](work), sys.executable, str(work / "child.py"), str(work)]
    if config.get("as_nobody"):
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    env = {
        k: v
        for k, v in os.environ.items()
        if k in ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES")
    }
    env["HOME"] = str(work)
    result: dict = {"config": name, "cmd": " ".join(cmd[:6]) + " ..."}
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        while not (work / "facts.json").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if (work / "facts.json").exists():
            result.update(json.loads((work / "facts.json").read_text()))
            fn, args = pickle.loads((work / "child.pkl").read_bytes())
            try:
                y = fn(*args)
                result["child_tensor_sum"] = float(y.sum())
                del y
            except Exception as exc:
                result["child_tensor_error"] = f"{type(exc).__name__}: {exc}"[:400]
        (work / "done").write_text("1")
        out, _ = proc.communicate(timeout=60)
        result["rc"] = proc.returncode
        result["output_tail"] = out[-600:]
    finally:
        if proc.poll() is None:
            proc.kill()
    torch.cuda.synchronize()
    result["parent_sees_doubled"] = float(x.sum()) == 2.0 * (1 << 20)
    result["seconds"] = round(time.monotonic() - t0, 2)
    result["ok"] = bool(result["parent_sees_doubled"] and result.get("child_tensor_sum") == 3.0 * (1 << 20))
    shutil.rmtree(work, ignore_errors=True)
    return result


class _ProductChild:
    """A :class:`fibserve.sandbox.Sandbox` dressed as the ``Popen`` that run_config expects."""

    def __init__(self, argv: list[str], work: Path):
        from fibserve.sandbox import Mounts, Sandbox

        self.sandbox = Sandbox(argv, mounts=Mounts(python=True, gpu=True, writable=(work,)))
        self.returncode: int | None = None

    def poll(self) -> int | None:
        self.returncode = self.sandbox.proc.poll()
        return self.returncode

    def communicate(self, timeout: float) -> tuple[str, None]:
        self.returncode = self.sandbox.wait(timeout)
        self.sandbox.close()
        return self.sandbox.output.text(), None

    def kill(self) -> None:
        self.sandbox.close()


def product_child(argv: list[str], work: Path) -> _ProductChild:
    """Start the probe's child in the product's GPU worker sandbox (its work dir bound writable)."""
    return _ProductChild(argv, work)


def host_facts() -> dict:
    def read(path: str) -> str | None:
        try:
            return Path(path).read_text().strip()[:400]
        except OSError as exc:
            return f"<{exc.strerror}>"

    facts = {
        "nvidia_nodes": {n: oct(os.stat(n).st_mode & 0o777) for n in nvidia_nodes()},
        "max_user_namespaces": read("/proc/sys/user/max_user_namespaces"),
        "unprivileged_userns_clone": read("/proc/sys/kernel/unprivileged_userns_clone"),
        "self_cgroup": read("/proc/self/cgroup"),
        "cgroup2_controllers": read("/sys/fs/cgroup/cgroup.controllers"),
        "cgroup_subtree_control": read("/sys/fs/cgroup/cgroup.subtree_control"),
        "bwrap": shutil.which("bwrap"),
        "setpriv": shutil.which("setpriv"),
        "uname": os.uname().release,
        "nvidia_params": read("/proc/driver/nvidia/params"),
        "ld_library_path": os.environ.get("LD_LIBRARY_PATH"),
        "libcuda": subprocess.run(
            ["sh", "-c", "ldconfig -p | grep libcuda.so"], capture_output=True, text=True
        ).stdout[:400],
    }
    facts["cgroup2_unified_controllers"] = read("/sys/fs/cgroup/unified/cgroup.controllers")
    for base in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/memory"):
        probe = Path(base) / "fibserve-probe"
        try:
            probe.mkdir()
            facts[f"mkdir {probe}"] = sorted(p.name for p in probe.iterdir())[:12]
            probe.rmdir()
        except OSError as exc:
            facts[f"mkdir {probe}"] = f"<{exc.strerror}>"
    return facts


ROOT = Path(__file__).resolve().parent.parent


def _evaluate(evaluator, solution, workloads) -> dict:
    report = evaluator.evaluate(evaluator.probe_definition, solution, workloads, overrides={"trials": 2})
    statuses = [t.evaluation.status.value if t.evaluation else None for t in report.traces]
    logs = [t.evaluation.log[-1500:] if t.evaluation else "" for t in report.traces]
    return {"sandbox": report.sandbox, "task_error": report.task_error, "statuses": statuses, "logs": logs,
            "notes": report.notes, "limits_hit": report.limits_hit}  # fmt: skip


def _gpu_memory_by_pid(worker) -> dict:
    """Whether nvidia-smi lists the sandboxed worker's host pid among the compute processes."""
    from fibserve.sandbox.watchdog import tree_pids

    pids = tree_pids(worker.proc.pid)
    done = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    listed = [line.split(",")[0].strip() for line in done.stdout.splitlines() if line.strip()]
    return {
        "worker_tree": pids,
        "nvidia_smi": done.stdout.strip()[:600],
        "worker_listed": any(str(p) in listed for p in pids),
    }


def product_checks() -> dict:
    """The product's sandbox on this GPU (see the module docstring); ``ok`` when every expectation holds."""
    import tempfile

    sys.path.insert(0, str(ROOT / "tests" / "fibserve"))  # the tests' probes and bait, reused here
    from fibserve.bench import Evaluator
    from fibserve.datasets import default_root
    from fibserve.sandbox import status
    from fibserve.trace import Solution
    from fibserve.trace.trace_set import TraceSet
    from kernel_fixtures import cuda_solution
    from sandbox_probes import findings_of, hostile_cuda_solution, planted, wait_until_gone

    ts = TraceSet.load([default_root()])
    definition = ts.definition("vector_add_f32")
    workloads = ts.workloads_for("vector_add_f32")[:1]
    facts: dict = {"sandbox": status().as_dict()}
    simt = (ROOT / "tests/fibserve/kernels/simt_add.cu").read_text()
    triton = Solution.model_validate(
        {"name": "triton_add", "definition": "vector_add_f32", "author": "probe",
         "spec": {"language": "triton", "target_hardware": ["sm_90a"], "entry_point": "kernel.py::run"},
         "sources": [{"path": "kernel.py", "content": (ROOT / "tests/fibserve/bench/kernels/add_correct.py").read_text()}]}
    )  # fmt: skip
    with planted(Path(tempfile.mkdtemp(prefix="sandbox-probe-bait-"))) as bait:
        hostile = hostile_cuda_solution(bait.token, bait.args["port"], bait.marker)
        with Evaluator("cuda:0") as evaluator:
            evaluator.probe_definition = definition
            honest = cuda_solution(simt, name="simt_add", definition="vector_add_f32")
            facts["cuda_honest"] = _evaluate(evaluator, honest, workloads)
            facts["triton_honest"] = _evaluate(evaluator, triton, workloads)
            facts["cuda_hostile"] = _evaluate(evaluator, hostile, workloads)
            worker = evaluator.pool.acquire(120)
            facts["gpu_memory_accounting"] = _gpu_memory_by_pid(worker)
            worker.kill()
        facts["orphans_alive"] = wait_until_gone(bait.marker)
        token = bait.token
    log = (facts["cuda_hostile"]["logs"] or [""])[0]
    findings = findings_of(log) if "FINDINGS " in log else None
    facts["hostile_findings"] = findings
    facts["token_in_report"] = token in json.dumps(facts["cuda_hostile"])
    facts["ok"] = bool(
        facts["cuda_honest"]["statuses"] == ["PASSED"]
        and facts["triton_honest"]["statuses"] == ["PASSED"]
        and findings is not None
        and findings["processes"] < 10
        and findings["token_holders"] == 0
        and not findings["shadow"]
        and not findings["network"]
        and findings["uid"] == 65534
        and not facts["token_in_report"]
        and facts["orphans_alive"] == []
    )
    return facts


def main() -> int:
    out = Path(os.environ.get("OUT", "./bench-results"))
    out.mkdir(parents=True, exist_ok=True)
    results = {"host": host_facts(), "configs": []}
    print(json.dumps(results["host"], indent=1), flush=True)
    for name, config in CONFIGS.items():
        try:
            r = run_config(name, config)
        except Exception as exc:
            r = {"config": name, "ok": False, "probe_error": f"{type(exc).__name__}: {exc}"[:400]}
        results["configs"].append(r)
        (out / "sandbox_gpu_probe.json").write_text(json.dumps(results, indent=2))
        brief = {k: r.get(k) for k in ("ok", "uid", "procs", "shadow_readable", "rc", "child_tensor_error")}
        print(f"{name:48s} {json.dumps(brief)}", flush=True)
        if not r.get("ok"):
            print(
                "   tail:", (r.get("output_tail") or r.get("probe_error") or "")[-400:].replace("\n", " | ")
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
