"""Quickstart settings from options and environment, and the --check decisions that need no service."""

from __future__ import annotations

from pathlib import Path

import pytest
from mini_ptx_agent.quickstart.check import check_model, check_toolchain, gpu_line
from mini_ptx_agent.quickstart.run import no_gpu_for_certain
from mini_ptx_agent.quickstart.settings import (
    QUICKSTART_WORKLOAD,
    QuickstartError,
    QuickstartSettings,
    quickstart_task,
)


def _settings(**kwargs) -> QuickstartSettings:
    environ = kwargs.pop("environ", {})
    return QuickstartSettings.resolve(environ=environ, **kwargs)


def test_output_root_precedence():
    assert _settings().output_root == Path("data/eval_runs")
    assert _settings(environ={"PTXBENCH_ROOT": "/r"}).output_root == Path("/r/data/eval_runs")
    both = {"PTXBENCH_ROOT": "/r", "PTXBENCH_DATA_ROOT": "/d"}
    assert _settings(environ=both).output_root == Path("/d/eval_runs")
    assert _settings(environ=both, output_root=Path("/o")).output_root == Path("/o")


def test_dataset_roots_relative_entries_live_under_the_tracesets_root():
    env = {"DATASET_ROOTS": "flashinfer-trace:/abs/set::", "PTXBENCH_TRACESETS_ROOT": "/sets"}
    assert _settings(environ=env).dataset_roots == [Path("/sets/flashinfer-trace"), Path("/abs/set")]
    assert _settings(environ={"DATASET_ROOTS": "rel"}).dataset_roots == [Path("rel")]
    assert _settings().dataset_roots == []


def test_options_win_over_environment_and_urls_lose_their_trailing_slash():
    env = {"MODEL_NAME": "env-model", "SERVICE_URL": "http://env:1/", "ACCRL_MODEL_HOST": "h:1"}
    settings = _settings(environ=env)
    assert (settings.model, settings.service_url, settings.model_host) == ("env-model", "http://env:1", "h:1")
    settings = _settings(environ=env, model="opt", service_url="http://opt:2", model_host="o:2")
    assert (settings.model, settings.service_url, settings.model_host) == ("opt", "http://opt:2", "o:2")


def test_unknown_language_is_a_clear_error():
    with pytest.raises(QuickstartError, match="cuda or triton"):
        _settings(language="rust")


def test_the_task_is_the_m8192_workload_at_target_one():
    task = quickstart_task("triton")
    assert task.workloads == [QUICKSTART_WORKLOAD]
    assert (task.definition, task.target_speedup, task.arch, task.entry_file) == (
        "gemm_n7168_k5120", 1.0, "sm_90a", "kernel.py",
    )  # fmt: skip


def test_check_model_demo_is_ok_and_says_so():
    line = check_model(_settings())
    assert line.ok and "demo model: replay" in line.detail


def test_check_model_host_without_name_fails():
    line = check_model(_settings(environ={"ACCRL_MODEL_HOST": "127.0.0.1:9"}))
    assert not line.ok and "MODEL_NAME" in line.detail


def test_check_model_unreadable_replay_fails(tmp_path):
    line = check_model(_settings(model=f"replay:{tmp_path / 'missing.json'}"))
    assert not line.ok and "does not exist" in line.detail


def test_no_gpu_is_cpu_mode_for_cuda_but_a_failure_for_triton_or_when_required():
    cuda = gpu_line(_settings(), ["cpu"], embedded=True)
    assert cuda.ok and "not executed" in cuda.detail
    assert not gpu_line(_settings(language="triton"), ["cpu"], embedded=True).ok
    assert not gpu_line(_settings(require_gpu=True), ["cpu"], embedded=True).ok
    assert gpu_line(_settings(language="triton"), ["cuda:0", "cuda:1"], embedded=False).ok


def test_nvcc_is_not_needed_here_for_a_remote_service(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert check_toolchain(_settings(service_url="http://x:1"), {"nvcc": "/usr/bin/nvcc"}).ok
    assert not check_toolchain(_settings()).ok
    assert check_toolchain(_settings(language="triton")).ok


def test_hidden_devices_rule_a_gpu_out_without_asking_torch():
    assert no_gpu_for_certain({"CUDA_VISIBLE_DEVICES": ""})
    assert no_gpu_for_certain({"CUDA_VISIBLE_DEVICES": "-1"})
    assert no_gpu_for_certain({"CUDA_VISIBLE_DEVICES": " -1,0"})
