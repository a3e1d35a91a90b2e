"""`ptxbench harbor export` and the exported verifier, against a real FIBServe on 127.0.0.1 with CPU lanes.

Two CPU definitions (float32, Triton on the interpreter) are exported once per module; Harbor's own checks
(`harbor lint` with every rule, Harbor's Task model) read them in Harbor's Python 3.12 environment; the exported
``tests/test.sh`` runs for real on the oracle kernel (passes) and on a wrong kernel (fails), and writes the
reward files Harbor reads.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from harbor_env import run_checks
from mini_ptx_agent.prompts import compose_system_prompt, first_user_message
from run_cli import ptxbench
from serve_helpers import ServerProcess, free_port

pytestmark = pytest.mark.slow

DEFINITIONS = ("rmsnorm_f32", "vector_add_f32")
TASKS = tuple(f"{name}-triton" for name in DEFINITIONS)


@pytest.fixture(scope="module")
def tasks(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("harbor") / "tasks"
    args = [f"--definition={name}" for name in DEFINITIONS]
    done = ptxbench(
        "harbor", "export", str(out), *args, "--language", "triton", "--reward", "graded",
        "--sanitizer-runs", "0", "--service-url", server.url, "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    exported = json.loads(done.stdout)
    assert [t["name"] for t in exported] == list(TASKS)
    assert all(t["oracle"] and t["workloads"] == 3 for t in exported)
    return out


def test_harbor_lint_and_harbors_task_model_accept_the_tasks(tasks: Path) -> None:
    checked = run_checks("tasks", *(str(tasks / name) for name in TASKS))
    assert checked["lint_rc"] == 0, checked["lint"] + checked["lint_err"]
    assert json.loads(checked["lint"]) == []  # every rule, root-agent and unpinned-image included
    for name in TASKS:
        task = checked["tasks"][name]
        assert task["name"] == f"ptxbench/{name}" and task["agent_user"] == "ptxbench"
        assert task["verifier_mode"] == "separate" and task["artifacts"] == ["/workspace/kernel.py"]
        assert task["has_solution"] and task["instruction_chars"] > 5000 and task["gpus"] is None


def test_instruction_is_the_agents_own_prompt_for_the_served_definition(
    tasks: Path, server: ServerProcess
) -> None:
    from fibserve.client import FIBServeClient

    with FIBServeClient(server.url) as client:
        definition = client.definition("rmsnorm_f32")
        workloads = client.workloads("rmsnorm_f32")
    instruction = (tasks / "rmsnorm_f32-triton" / "instruction.md").read_text()
    closing = "Write the complete file to `/workspace/kernel.py`."
    message = first_user_message(
        definition.model_dump(mode="json"), language="triton", target_speedup=1.0, workloads=workloads,
        closing=closing,
    )  # fmt: skip
    assert compose_system_prompt("triton-hopper").rstrip() in instruction
    assert message.rstrip() in instruction and instruction.rstrip().endswith(closing)
    reference = tasks / "rmsnorm_f32-triton" / "environment" / "reference"
    assert json.loads((reference / "definition.json").read_text()) == definition.model_dump(mode="json")
    assert [w["uuid"] for w in json.loads((reference / "workloads.json").read_text())] == [
        w.uuid for w in workloads
    ]


def test_task_file_is_the_same_for_agent_and_verifier_and_the_dockerfile_lints(tasks: Path) -> None:
    folder = tasks / "vector_add_f32-triton"
    environment, verifier = (folder / "environment" / "task.json"), (folder / "tests" / "task.json")
    assert environment.read_text() == verifier.read_text()
    task = json.loads(verifier.read_text())
    assert (
        task["task_id"] == "vector_add_f32-triton"
        and task["language"] == "triton"
        and len(task["workloads"]) == 3
    )
    config = tomllib.loads((folder / "task.toml").read_text())
    assert (
        config["verifier"]["env"]["SERVICE_URL"] == "${PTXBENCH_SERVICE_URL}"
    )  # required: no GPU in containers
    assert not (folder / "environment" / "docker-compose.yaml").exists()
    hadolint = shutil.which("hadolint")
    if hadolint is not None:
        done = subprocess.run(
            [hadolint, "--no-color", str(folder / "environment" / "Dockerfile")], capture_output=True
        )
        assert done.returncode == 0, done.stdout


def _verify(folder: Path, kernel: Path, logs: Path, service: str) -> subprocess.CompletedProcess:
    """The exported tests/test.sh, run as Harbor runs it, with the container paths pointed at tmp folders."""
    env = {k: v for k, v in os.environ.items() if k not in ("SERVICE_URL", "FIBSERVE_TOKEN")}
    env |= {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}", "SERVICE_URL": service,
        "PTXBENCH_KERNEL": str(kernel), "PTXBENCH_VERIFIER_LOGS": str(logs),
    }  # fmt: skip
    return subprocess.run(
        ["bash", str(folder / "tests" / "test.sh")], capture_output=True, text=True, timeout=600, env=env
    )


def test_oracle_kernel_passes_the_verifier(tasks: Path, server: ServerProcess, tmp_path: Path) -> None:
    folder = tasks / "rmsnorm_f32-triton"
    kernel = tmp_path / "kernel.py"
    solve = subprocess.run(
        ["bash", str(folder / "solution" / "solve.sh")], env=os.environ | {"PTXBENCH_KERNEL": str(kernel)}
    )
    assert solve.returncode == 0 and kernel.read_text() == (folder / "solution" / "kernel.py").read_text()
    done = _verify(folder, kernel, tmp_path / "logs", server.url)
    assert done.returncode == 0, done.stdout + done.stderr
    rewards = json.loads((tmp_path / "logs" / "reward.json").read_text())
    # graded: correct on the CPU interpreter earns the correctness half; no GPU timing, no compiled verdict
    assert rewards == {
        "reward": 0.5, "correctness": 1.0, "speedup": 0.0, "speedup_score": 0.0, "architecture": 0.0,
        "target_met": 0.0,
    }  # fmt: skip
    evaluation = json.loads((tmp_path / "logs" / "evaluation.json").read_text())
    assert evaluation["schema"] == "ptxbench.eval.v1" and evaluation["all_passed"] is True
    assert evaluation["task_id"] == "rmsnorm_f32-triton" and len(evaluation["kernel_sha256"]) == 64
    verdict = json.loads((tmp_path / "logs" / "verifier.json").read_text())
    assert verdict["status"] == "PASSED" and verdict["reward_mode"] == "graded"


def test_wrong_kernel_and_missing_kernel_earn_nothing(
    tasks: Path, server: ServerProcess, tmp_path: Path
) -> None:
    folder = tasks / "vector_add_f32-triton"
    wrong = tmp_path / "kernel.py"
    oracle = (folder / "solution" / "kernel.py").read_text()
    wrong.write_text(
        oracle.replace("tl.load(x_ptr + index, mask=inside) +", "tl.load(x_ptr + index, mask=inside) *")
    )
    assert wrong.read_text() != oracle
    done = _verify(folder, wrong, tmp_path / "wrong", server.url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / "wrong" / "reward.json").read_text())["reward"] == 0.0
    assert json.loads((tmp_path / "wrong" / "verifier.json").read_text())["status"] == "INCORRECT_NUMERICAL"
    done = _verify(folder, tmp_path / "absent.py", tmp_path / "absent", server.url)
    assert done.returncode == 0 and "did not write one" in done.stdout
    assert json.loads((tmp_path / "absent" / "reward.json").read_text())["reward"] == 0.0


def test_a_service_that_is_down_writes_no_reward(tasks: Path, tmp_path: Path) -> None:
    folder = tasks / "vector_add_f32-triton"
    kernel = tmp_path / "kernel.py"
    shutil.copyfile(folder / "solution" / "kernel.py", kernel)
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "reward.json").write_text('{"reward": 1}')  # stale, from an earlier trial
    done = _verify(folder, kernel, logs, f"http://127.0.0.1:{free_port()}")
    assert done.returncode == 2
    assert not (logs / "reward.json").exists()  # Harbor records a verifier error, not a zero for the agent
    assert json.loads((logs / "verifier.json").read_text())["status"] == "INFRASTRUCTURE_ERROR"


def test_gpu_tasks_start_their_own_fibserve_with_bubblewrap_allowed(
    server: ServerProcess, tmp_path: Path
) -> None:
    done = ptxbench(
        "harbor", "export", str(tmp_path), "--definition", "vector_add_f32", "--gpus", "1",
        "--service-url", server.url,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "vector_add_f32-cuda"
    config = tomllib.loads((folder / "task.toml").read_text())
    assert config["environment"]["gpus"] == 1 and config["environment"]["gpu_types"] == ["H100", "H200"]
    assert config["verifier"]["env"]["SERVICE_URL"] == "${PTXBENCH_SERVICE_URL:-}"
    service = yaml.safe_load((folder / "environment" / "docker-compose.yaml").read_text())["services"]["main"]
    assert set(service) == {"security_opt"}  # no privileges, capabilities or mounts added
    assert {"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"} == set(
        service["security_opt"]
    )
    solve = (folder / "solution" / "solve.sh").read_text()
    assert "no oracle kernel for vector_add_f32 (cuda)" in solve and "exit 1" in solve
    again = ptxbench(
        "harbor", "export", str(tmp_path), "--definition", "vector_add_f32", "--service-url", server.url
    )
    assert again.returncode == 2 and "pass --force" in again.stderr
    typo = ptxbench(
        "harbor", "export", str(tmp_path / "x"), "--definition", "vector_ad_f32", "--service-url", server.url
    )
    assert (
        typo.returncode == 2
        and "did you mean vector_add_f32" in typo.stderr
        and not (tmp_path / "x").exists()
    )
