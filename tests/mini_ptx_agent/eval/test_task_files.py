"""Task files in both shapes (ours and the public PTXBench one), where `ptxbench eval` finds them, and the result
schema the public verifier accepts (``schema: ptxbench.eval.v1``).

The model-level tests need nothing running; the command tests run the real `ptxbench eval` against a CPU-mode
FIBServe (CUDA kernels are built and analysed there, not executed)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from mini_ptx_agent import task_file
from mini_ptx_agent.environment.embedded import EmbeddedService
from mini_ptx_agent.environment.report import KernelReport
from mini_ptx_agent.task import TaskConfigError
from mini_ptx_agent.task_file import load_task_config, resolve_task_config, task_config_from
from test_eval_command import CUDA_ADD, TRITON_ADD, WORKLOAD, ptxbench

PUBLIC = {
    "task_id": "vector-add-test",
    "definition": "vector_add_f32",
    "workload_uuids": [WORKLOAD],
    "target_hardware": ["H100"],
    "nvcc_gencode": "arch=compute_90a,code=sm_90a",
    "tvm_ffi_dir": "/opt/tvm_ffi",
    "max_check_runs": 2,
    "target_speedup": 1.0,
}
"""A task file in the public PTXBench shape (the fields of the public Harbor tasks' tests/task.json)."""


def test_the_public_shape_maps_onto_a_cuda_task_with_its_memcheck_gate() -> None:
    task = task_config_from(PUBLIC | {"queue_timeout_sec": 300, "sanitizer_timeout_sec": 90})
    assert (task.task_id, task.definition, task.workloads) == (
        "vector-add-test",
        "vector_add_f32",
        [WORKLOAD],
    )
    assert (task.language, task.arch, task.target_speedup) == ("cuda", "sm_90a", 1.0)
    assert task.sanitizer and task.sanitizer_types == ["memcheck"] and task.sanitizer_runs == 2
    assert (task.timeout_s, task.sanitizer_timeout_s) == (300.0, 90.0)
    assert task_config_from(PUBLIC | {"max_check_runs": 0}).sanitizer is False
    blackwell = {"nvcc_gencode": "arch=compute_100a,code=sm_100a", "target_hardware": ["Blackwell"]}
    assert task_config_from(PUBLIC | blackwell).arch == "sm_100a"


def test_our_shape_is_read_as_before() -> None:
    task = task_config_from({"definition": "vector_add_f32", "language": "triton", "workloads": [WORKLOAD]})
    assert (task.language, task.sanitizer, task.task_id) == ("triton", False, None)


@pytest.mark.parametrize(
    ("data", "names"),
    [
        (PUBLIC | {"nvcc_flags": "-O3"}, ["nvcc_flags", "PTXBench public shape"]),
        ({"definition": "d", "workload": [WORKLOAD]}, ["workload", "PTXBench agent shape"]),
        (
            PUBLIC | {"language": "triton"},
            ["language", "belong(s) to the PTXBench agent shape", "do not mix"],
        ),
        (PUBLIC | {"target_hardware": ["Blackwell"]}, ["target_hardware", "use ['H100']"]),
        (PUBLIC | {"workload_uuids": []}, ["workload_uuids"]),
        ({k: v for k, v in PUBLIC.items() if k != "tvm_ffi_dir"}, ["tvm_ffi_dir", "Field required"]),
        ([PUBLIC], ["JSON object"]),
    ],
)
def test_a_task_file_that_does_not_fit_names_what_to_fix(data: object, names: list[str]) -> None:
    with pytest.raises(TaskConfigError) as caught:
        task_config_from(data)
    assert all(name in str(caught.value) for name in names), str(caught.value)


def test_the_task_file_comes_from_the_option_else_the_variable_else_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given, named, default = (tmp_path / name for name in ("given.json", "named.json", "default.json"))
    monkeypatch.setattr(task_file, "DEFAULT_TASK_CONFIG", default)
    monkeypatch.delenv("PTXBENCH_TASK_CONFIG", raising=False)
    with pytest.raises(
        TaskConfigError, match="pass --task-config FILE, set \\$PTXBENCH_TASK_CONFIG, or provide"
    ):
        resolve_task_config()
    default.write_text(json.dumps(PUBLIC))
    assert resolve_task_config() == default
    monkeypatch.setenv("PTXBENCH_TASK_CONFIG", str(named))
    assert resolve_task_config() == named
    assert resolve_task_config(given) == given
    with pytest.raises(TaskConfigError, match="cannot read task config"):
        load_task_config(resolve_task_config())  # named but missing: an error, not a fall-back


def test_a_result_written_before_the_rename_still_reads() -> None:
    old = {"schema_version": "ptxbench.eval/1", "status": "PASSED", "definition": "d", "language": "cuda",
           "target_speedup": 1.0}  # fmt: skip
    report = KernelReport.model_validate(old)
    assert report.model_dump(mode="json")["schema"] == "ptxbench.eval.v1"
    assert "schema_version" not in report.model_dump(mode="json")


def public_reward(result: dict) -> int:
    """The public PTXBench verifier's rule: 1 when the schema is its own and every workload passed."""
    return int(result.get("schema") == "ptxbench.eval.v1" and result.get("all_passed") is True)


@pytest.fixture(scope="module")
def fibserve() -> Iterator[str]:
    with EmbeddedService(devices=["cpu"]) as service:
        assert service.url
        yield service.url


@pytest.mark.slow
def test_the_public_verifier_rewards_our_result(fibserve: str, tmp_path: Path) -> None:
    kernel = tmp_path / "kernel.py"
    kernel.write_text(TRITON_ADD)
    task = tmp_path / "task.json"
    task.write_text(
        json.dumps({"definition": "vector_add_f32", "language": "triton", "workloads": [WORKLOAD]})
    )
    done = ptxbench(
        "eval", str(kernel), "--service-url", fibserve, "--json", env={"PTXBENCH_TASK_CONFIG": str(task)}
    )
    assert done.returncode == 0, done.stderr
    assert public_reward(json.loads(done.stdout)) == 1
    kernel.write_text(TRITON_ADD.replace("+ tl.load(y_ptr", "* tl.load(y_ptr"))
    done = ptxbench(
        "eval", str(kernel), "--service-url", fibserve, "--json", env={"PTXBENCH_TASK_CONFIG": str(task)}
    )
    assert done.returncode == 0 and public_reward(json.loads(done.stdout)) == 0


@pytest.mark.slow
@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_a_public_task_file_gates_on_memcheck_unless_told_not_to(fibserve: str, tmp_path: Path) -> None:
    kernel = tmp_path / "kernel.cu"
    kernel.write_text(CUDA_ADD)
    task = tmp_path / "task.json"
    task.write_text(json.dumps(PUBLIC))
    args = ("eval", str(kernel), "--task-config", str(task), "--service-url", fibserve, "--json")
    gated = ptxbench(*args)
    assert gated.returncode == 2  # memcheck asked for, and a CPU-only service has no compute-sanitizer lane
    error = json.loads(gated.stdout)["error"]
    assert "sanitize" in error and "tool_unavailable" in error
    done = ptxbench(*args, "--sanitizer-runs", "0")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["schema"] == "ptxbench.eval.v1" and report["task_id"] == "vector-add-test"
    assert report["status"] == "NOT_EXECUTED" and report["static_analysis"]["target"] == "sm_90a"
    assert len(report["kernel_sha256"]) == 64 and public_reward(report) == 0
