"""Environments from allowlists: a sandbox and an embedded FIBServe never inherit a credential."""

from __future__ import annotations

from pathlib import Path

from fibserve.sandbox import sandbox_env, service_env

AGENT_ENV = {
    "PATH": "/usr/bin",
    "HOME": "/home/me",
    "OPENAI_API_KEY": "sk-1",
    "ANTHROPIC_API_KEY": "sk-2",
    "ACCRL_MODEL_API_KEY": "sk-3",
    "ACCRL_MODEL_HOST": "10.0.0.1:8000",
    "MODEL_NAME": "some-model",
    "FIBSERVE_TOKEN": "t-1",
    "FIBSERVE_CACHE_DIR": "/cache",
    "FIBSERVE_INPUT_SECRET": "00ff",
    "FIBSERVE_AUTH_HEADER": "Bearer x",
    "HF_TOKEN": "hf-1",
    "AWS_SECRET_ACCESS_KEY": "a-1",
    "DATASET_ROOTS": "/data",
    "PTXBENCH_DATA_ROOT": "/runs",
    "CUDA_VISIBLE_DEVICES": "0",
}


def test_an_embedded_fibserve_gets_its_own_variables_and_no_credential() -> None:
    env = service_env(AGENT_ENV)
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/home/me",
        "FIBSERVE_CACHE_DIR": "/cache",
        "FIBSERVE_INPUT_SECRET": "00ff",
        "DATASET_ROOTS": "/data",
        "PTXBENCH_DATA_ROOT": "/runs",
        "CUDA_VISIBLE_DEVICES": "0",
    }


def test_a_sandbox_gets_system_variables_and_private_caches(monkeypatch) -> None:
    for name, value in AGENT_ENV.items():
        monkeypatch.setenv(name, value)
    env = sandbox_env(Path("/tmp"), extra={"TRITON_INTERPRET": "1"})
    assert (
        env["HOME"] == "/tmp" and env["TRITON_CACHE_DIR"] == "/tmp/triton" and env["TRITON_INTERPRET"] == "1"
    )
    assert set(env) <= {
        *("PATH", "CUDA_VISIBLE_DEVICES", "HOME", "TMPDIR", "USER", "LOGNAME", "TRITON_CACHE_DIR"),
        *("CUDA_CACHE_PATH", "PYTHONDONTWRITEBYTECODE", "PYTHONNOUSERSITE", "TRITON_INTERPRET"),
        *(
            "LANG",
            "LC_ALL",
            "LC_CTYPE",
            "LD_LIBRARY_PATH",
            "CUDA_HOME",
            "CUDA_PATH",
            "NVIDIA_VISIBLE_DEVICES",
        ),
    }
