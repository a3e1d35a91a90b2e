"""`ptxbench quickstart` end to end in CPU mode: real subprocesses, a real embedded FIBServe, real nvcc.

The CUDA run replays the demo (no MODEL_NAME), starts its own FIBServe (no SERVICE_URL), builds and analyses
the three kernels and must say they were not executed. nvcc of the reference kernel takes about a minute on a
loaded 2-core machine; fibserve's build cache (``~/.cache/fibserve``) makes later runs much faster.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mini_ptx_agent.environment.embedded import EmbeddedService

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

STRIPPED = ("MODEL_NAME", "ACCRL_MODEL_HOST", "SERVICE_URL", "FIBSERVE_TOKEN", "DATASET_ROOTS",
            "PTXBENCH_ROOT", "PTXBENCH_DATA_ROOT", "PTXBENCH_TRACESETS_ROOT", "CUDA_VISIBLE_DEVICES")  # fmt: skip


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in STRIPPED}
    env["COLUMNS"] = "200"  # rich wraps at 80 columns when not on a terminal
    return env


def quickstart(*args: str, timeout: float = 840) -> subprocess.CompletedProcess:
    """``python -m mini_ptx_agent.cli quickstart ...`` (the console script is not needed)."""
    return subprocess.run(
        [sys.executable, "-m", "mini_ptx_agent.cli", "quickstart", *args],
        capture_output=True, text=True, env=_env(), timeout=timeout,
    )  # fmt: skip


@pytest.fixture(scope="module")
def cuda_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH: the CPU-mode CUDA quickstart builds the kernels with it")
    root = tmp_path_factory.mktemp("quickstart-runs")
    done = quickstart("--run", "--language", "cuda", "--output-root", str(root))
    runs = sorted(root.glob("quickstart-*-cuda-gemm"))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert len(runs) == 1, runs
    return done, runs[0]


@pytest.fixture(scope="module")
def cpu_service(tmp_path_factory):
    """One CPU-mode FIBServe shared by the --check and Triton tests (each embedded start costs ~20-40 s)."""
    log = tmp_path_factory.mktemp("service") / "fibserve.log"
    with EmbeddedService(devices=["cpu"], log_path=log) as service:
        import httpx

        # start() waits for the lanes, so the first /health a caller reads is already "ok", not "degraded".
        assert httpx.get(f"{service.url}/health", timeout=10).json()["status"] == "ok"
        yield service.url


@pytest.mark.nvcc
def test_cpu_run_writes_every_file(cuda_run):
    _, run = cuda_run
    for name in (
        "plan.json", "summary.json", "trajectories/exp_000.traj.json", "exp_000/kernel.cu", "quickstart-result.json",
        "logs/fibserve.log", "logs/quickstart-context.json", "demo/trajectory_cuda.json",
        "exp_000/evaluations/turn_001.json", "exp_000/evaluations/turn_002.json", "exp_000/evaluations/turn_003.json",
    ):  # fmt: skip
        assert (run / name).is_file(), name
    # Without a GPU no version is known to be correct, so success/ holds none.
    assert not list(run.glob("success/exp_000/kernel_v*"))
    assert "wgmma.mma_async" in (run / "exp_000/kernel.cu").read_text(encoding="utf-8")
    plan = json.loads((run / "plan.json").read_text(encoding="utf-8"))
    assert plan["model"] == "demo" and plan["task"]["workloads"] == ["94920358-01a8-4c5b-9209-3103fd490e94"]


@pytest.mark.nvcc
def test_cpu_run_result_says_compiled_but_not_executed(cuda_run):
    _, run = cuda_run
    result = json.loads((run / "quickstart-result.json").read_text(encoding="utf-8"))
    assert result["schema_version"] == "ptxbench.quickstart/4"
    # Nothing was executed: the files say "unknown" (null), as the console does, not false.
    assert result["kernel_correct"] is None and [t["correct"] for t in result["turns"]] == [None] * 3
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert summary["kernel_correct"] is None and summary["schema_version"] == "ptxbench.run/3"
    # The demo is flagged wherever a pipeline may look: plan, summary and the trajectory's info.
    assert (
        summary["demo"] is True
        and json.loads((run / "plan.json").read_text(encoding="utf-8"))["demo"] is True
    )
    trajectory = json.loads((run / "trajectories/exp_000.traj.json").read_text(encoding="utf-8"))
    assert trajectory["info"]["ptxbench"]["demo"] is True
    assert result["demo"] is True and result["language"] == "cuda"
    assert result["service"] == {**result["service"], "kind": "embedded", "gpu": False, "lanes": ["cpu"]}
    assert result["runner_completed"] is True and result["runner"]["exit_status"] == "LimitsExceeded"
    assert (
        result["kernel_counts"]["generated"],
        result["kernel_counts"]["compiled"],
        result["kernel_counts"]["not_executed"],
    ) == (3, 3, 3)
    assert (
        result["kernel_counts"]["correct"],
        result["kernel_counts"]["target_achieved"],
        result["best_speedup"],
    ) == (0, 0, None)
    assert [t["status"] for t in result["turns"]] == ["NOT_EXECUTED"] * 3
    assert {"HGMMA", "UTMALDG"} <= set(result["turns"][2]["sass_families"])
    assert "NOT EXECUTED" in result["final_feedback_excerpt"]
    assert any("NOT EXECUTED" in note for note in result["notes"])


@pytest.mark.nvcc
def test_cpu_run_prints_demo_banner_progress_and_verdicts(cuda_run):
    done, _ = cuda_run
    out = done.stdout
    assert "DEMO REPLAY" in out and "NOT a model's result" in out
    for turn in (1, 2, 3):
        assert f"turn {turn}/3: NOT_EXECUTED" in out
    assert "turn 3/3: NOT_EXECUTED; PTX: cp.async.bulk.tensor" in out and "SASS: HGMMA" in out
    assert "Runner completed:      yes" in out
    assert "A kernel was correct:  unknown" in out
    assert "Target achieved:       no: needs a GPU" in out
    assert "not executed" in out.lower()


@pytest.mark.nvcc
def test_report_rebuilds_and_reprints_the_result(cuda_run):
    done, run = cuda_run
    written = json.loads((run / "quickstart-result.json").read_text(encoding="utf-8"))
    again = quickstart("--report", str(run), "--json", timeout=120)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == written
    text = quickstart("--report", str(run), timeout=120)
    verdicts = [
        line for line in done.stdout.splitlines() if line.strip().startswith(("Runner", "A kernel", "Target"))
    ]
    assert len(verdicts) == 3
    for line in verdicts:
        assert line in text.stdout


@pytest.mark.nvcc
def test_ptxbench_report_of_the_cpu_run_says_cpu_only_and_correctness_unknown(cuda_run, tmp_path):
    """`ptxbench report` on the same run (in process): a demo, so counted only with --include-demo."""
    from mini_ptx_agent.reports.inputs import ReportError
    from mini_ptx_agent.reports.report import build_report

    _, run = cuda_run
    with pytest.raises(ReportError, match="only demo trajectories"):
        build_report([run], tmp_path / "refused")
    result = build_report([run], tmp_path / "report", turn_limits=[1, 3], include_demo=True)
    m1, m3 = result.metrics
    assert (m1.turn_limit, m1.unknown, m1.correct.n) == (1, 1, 0)
    assert (m3.group, m3.trajectories, m3.unknown, m3.correct.n) == ("demo", 1, 1, 0)
    assert m3.speedup_median.value is None and m3.verified.n == 0 and result.turns == 3
    assert any(w.startswith("CPU-only: no kernel was executed on a GPU") for w in result.provenance.warnings)
    assert result.provenance.gpus == ["unknown"] and result.provenance.driver == "unknown"
    page = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    assert "correctness is unknown" in page and "n/a (n=0)" in page


def test_report_of_a_non_run_directory_is_a_clear_error(tmp_path):
    done = quickstart("--report", str(tmp_path), timeout=120)
    assert done.returncode == 2 and "plan.json is missing" in done.stderr


def test_exactly_one_mode_is_required():
    done = quickstart("--check", "--run", timeout=120)
    assert done.returncode == 2 and "exactly one of" in done.stderr


def test_check_against_a_cpu_service_prints_one_line_per_dependency(cpu_service):
    done = quickstart("--check", "--service-url", cpu_service, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line.split()[:2] for line in done.stdout.splitlines() if line.strip()]
    assert lines == [["OK", "model"], ["OK", "service"], ["OK", "definition"], ["OK", "nvcc"], ["OK", "gpu"]]
    assert "demo model: replay" in done.stdout and "CPU mode" in done.stdout


def test_check_require_gpu_fails_without_a_gpu_lane(cpu_service):
    done = quickstart("--check", "--require-gpu", "--json", "--service-url", cpu_service, timeout=300)
    assert done.returncode == 1
    lines = {line["name"]: line for line in json.loads(done.stdout)}
    assert lines["gpu"]["ok"] is False and lines["service"]["ok"] and lines["definition"]["ok"]


def test_check_fails_when_the_service_is_unreachable():
    from mini_ptx_agent.environment.embedded import free_port

    done = quickstart("--check", "--service-url", f"http://127.0.0.1:{free_port()}", timeout=300)
    assert done.returncode == 1
    assert any(line.startswith("FAIL service") for line in done.stdout.splitlines()), done.stdout


def test_triton_run_without_a_gpu_is_refused_with_a_clear_report(cpu_service, tmp_path):
    done = quickstart(
        "--run", "--language", "triton", "--service-url", cpu_service, "--output-root", str(tmp_path)
    )
    assert done.returncode == 2, done.stdout + done.stderr
    (run,) = tmp_path.glob("quickstart-*-triton-gemm")
    result = json.loads((run / "quickstart-result.json").read_text(encoding="utf-8"))
    assert result["runner_completed"] is False and result["runner"]["exit_status"] == "Refused"
    assert result["kernel_counts"]["generated"] == 0 and result["service"]["kind"] == "remote"
    assert "Triton quickstart needs a GPU" in result["exit_message"]
    # Said once (not as a note and again as "why:"), and nothing claims a replay that never happened.
    assert done.stdout.count("Triton quickstart needs a GPU") == 1, done.stdout
    assert "replayed" not in done.stdout + done.stderr and "DEMO REPLAY" not in done.stdout + done.stderr


def test_triton_run_without_service_or_gpu_is_refused_before_anything_starts(tmp_path):
    import time

    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "mini_ptx_agent.cli", "quickstart", "--run", "--language",
         "triton", "--output-root", str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=300,
        env={**_env(), "CUDA_VISIBLE_DEVICES": ""},  # no GPU visible to torch, even on a GPU machine
    )  # fmt: skip
    elapsed = time.monotonic() - started
    imported = {
        line.rsplit("|", 1)[-1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    # "At once": refused before torch (seconds to import), the HTTP client or the service are loaded.
    assert not imported & {"torch", "httpx", "fibserve.client", "mini_ptx_agent.environment.embedded"}, (
        sorted(imported)
    )
    done.stderr = "\n".join(line for line in done.stderr.splitlines() if not line.startswith("import time:"))
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert not (tmp_path / "runs").exists(), "no run directory may be created for an up-front refusal"
    assert "starting the embedded FIBServe" not in out and "replayed" not in out and "DEMO REPLAY" not in out
    assert "refused:" in done.stderr and "Triton quickstart needs a GPU" in done.stderr
    assert "--language cuda" in done.stderr and "SERVICE_URL" in done.stderr
    assert done.stderr.count("Triton quickstart needs a GPU") == 1
    assert elapsed < 60, f"an up-front refusal took {elapsed:.1f} s"


def test_run_against_an_unreachable_service_reports_an_infrastructure_error(tmp_path):
    from mini_ptx_agent.environment.embedded import free_port

    url = f"http://127.0.0.1:{free_port()}"
    done = quickstart("--run", "--service-url", url, "--output-root", str(tmp_path), timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    (run,) = tmp_path.glob("quickstart-*-cuda-gemm")
    result = json.loads((run / "quickstart-result.json").read_text(encoding="utf-8"))
    assert result["runner_completed"] is False and result["runner"]["exit_status"] == "InfrastructureError"
    assert (
        result["kernel_counts"]["generated"] == 0
        and "evaluation service unavailable" in result["exit_message"]
    )
    assert "Runner completed:      no" in done.stdout and "no kernel was evaluated" in done.stdout
    # An outage says nothing about the model: unknown (null), never false.
    assert result["kernel_correct"] is None
    assert json.loads((run / "summary.json").read_text(encoding="utf-8"))["kernel_correct"] is None
    assert "A kernel was correct:  unknown" in done.stdout


@pytest.fixture
def served_model():
    """A minimal OpenAI-compatible endpoint on 127.0.0.1 serving ``served-model`` with the demo's replies."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from mini_ptx_agent.demo import demo_trajectory

    replies = [m["content"] for m in demo_trajectory("cuda")["messages"] if m["role"] == "assistant"]
    chats: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._send({"object": "list", "data": [{"id": "served-model", "object": "model"}]})

        def do_POST(self):
            chats.append(json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0))))
            content = replies[min(len(chats), len(replies)) - 1]
            self._send({
                "id": "c", "object": "chat.completion", "created": 0, "model": "served-model",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            })  # fmt: skip

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", chats
    finally:
        server.shutdown()
        server.server_close()


def test_check_verifies_the_served_model_id(served_model, cpu_service):
    host, _ = served_model
    ok = quickstart("--check", "--model", "served-model", "--model-host", host, "--service-url", cpu_service)
    assert ok.returncode == 0 and "served-model served at" in ok.stdout, ok.stdout + ok.stderr
    wrong = quickstart(
        "--check", "--model", "other-model", "--model-host", host, "--service-url", cpu_service
    )
    assert wrong.returncode == 1
    assert any(line.startswith("FAIL model") for line in wrong.stdout.splitlines()), wrong.stdout


@pytest.mark.nvcc
def test_run_with_a_real_endpoint_is_not_called_a_demo(served_model, cpu_service, tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    host, chats = served_model
    done = quickstart(
        "--run", "--model", "served-model", "--model-host", host, "--service-url", cpu_service,
        "--output-root", str(tmp_path), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert (result["model"], result["demo"], result["kernel_counts"]["generated"]) == (
        "served-model",
        False,
        3,
    )
    assert len(chats) == 3 and "gemm_n7168_k5120" in json.dumps(chats[0]["messages"])
    assert "DEMO REPLAY" not in done.stdout + done.stderr
    assert not any("DEMO" in note for note in result["notes"])


@pytest.mark.nvcc
def test_a_stopped_quickstart_says_how_to_continue_and_continues_with_the_demo(cpu_service, tmp_path):
    """Ctrl-C, the report of the stopped run, `ptxbench run --resume` (the demo model's name is resolved, not
    sent to litellm) and `quickstart --resume`: the three demo replies, each once, in order."""
    import signal

    from mini_ptx_agent.demo import demo_trajectory

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mini_ptx_agent.cli", "quickstart", "--run", "--service-url", cpu_service,
         "--output-root", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
    )  # fmt: skip
    first = proc.stdout.readline()  # printed before anything is evaluated
    assert first.startswith("run directory: "), first
    proc.send_signal(signal.SIGINT)
    rest, stderr = proc.communicate(timeout=300)
    run = Path(first.removeprefix("run directory: ").strip())
    assert proc.returncode == 130, first + rest + stderr
    assert f"continue with: ptxbench quickstart --resume {run}" in " ".join(stderr.split())
    assert "Traceback" not in stderr

    report = quickstart("--report", str(run), timeout=120)
    assert report.returncode == 0, report.stderr
    assert f"continue with: ptxbench quickstart --resume {run}" in report.stdout
    assert "Runner completed:      no" in report.stdout

    resumed = subprocess.run(
        [sys.executable, "-m", "mini_ptx_agent.cli", "run", "--resume", str(run), "--num-turns", "2",
         "--service-url", cpu_service],
        capture_output=True, text=True, env=_env(), timeout=840,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    done = quickstart("--resume", str(run), "--service-url", cpu_service)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Runner completed:      yes (LimitsExceeded after 3 of 3 turns)" in done.stdout
    trajectory = json.loads((run / "trajectories/exp_000.traj.json").read_text(encoding="utf-8"))
    replies = [m["content"] for m in trajectory["messages"] if m["role"] == "assistant"]
    assert replies == [m["content"] for m in demo_trajectory("cuda")["messages"] if m["role"] == "assistant"]
    assert json.loads((run / "plan.json").read_text(encoding="utf-8"))["model"] == "demo"
