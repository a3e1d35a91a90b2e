"""The files of one PTXBench Harbor task, rendered as text (written by :mod:`mini_ptx_agent.harbor.export`).

A task folder (Harbor's layout, checked by ``harbor lint`` in the tests)::

    task.toml                 limits, the non-root agent user, a separate verifier, GPUs, the kernel artifact
    instruction.md            the agent's system prompt and task message for this definition (see below)
    environment/Dockerfile    FROM ptxbench-eval (ptxbench eval, FIBServe, CUDA 13, torch, triton, bubblewrap)
    environment/docker-compose.yaml   with --gpus N only: the security options bubblewrap needs in a container
    environment/task.json     the task file, read-only at /opt/ptxbench/task.json (what `ptxbench eval` reads)
    environment/reference/    definition.json, workloads.json, README.md
    tests/test.sh, task.json  the verifier: ``ptxbench harbor verify`` with its own copy of the task file
    solution/solve.sh         the oracle: copies a kernel known to pass to the kernel path

The instruction is the kernel agent's own prompt: the system prompt of the prompt tag
(:func:`~mini_ptx_agent.prompts.compose_system_prompt`) and the task message built from the live service's
definition and workloads (:func:`~mini_ptx_agent.prompts.first_user_message`), with only the deliverable changed
(write the file instead of replying with it). So a stock Harbor agent and `ptxbench run` see the same task.
"""

from __future__ import annotations

import json
from typing import Any

import tomli_w

from ..task import TaskConfig

KERNEL_DIR = "/workspace"
"""Where the agent writes its kernel in the task container (``kernel.cu`` or ``kernel.py``)."""

AGENT_USER = "ptxbench"
"""The non-root user of the ``ptxbench-eval`` image; agent and verifier run as it."""

AGENT_UID = "10001:10001"
"""Its uid and gid (numeric in the Dockerfile, so that the host can resolve it)."""

GPU_TYPES = {"sm_90a": ["H100", "H200"], "sm_100a": ["B200"]}
"""Harbor ``gpu_types`` that run each target."""


def service_env(gpus: int) -> dict[str, str]:
    """Environment of agent and verifier, resolved by Harbor from the host at run time (never written into an
    image). Without GPUs in the containers (the default) they use the standing FIBServe the host names in
    ``PTXBENCH_SERVICE_URL``, which Harbor then requires; with GPUs, that is optional and each container
    otherwise starts its own FIBServe."""
    url = "${PTXBENCH_SERVICE_URL}" if gpus == 0 else "${PTXBENCH_SERVICE_URL:-}"
    return {"SERVICE_URL": url, "FIBSERVE_TOKEN": "${FIBSERVE_TOKEN:-}"}


def kernel_path(task: TaskConfig) -> str:
    """The kernel file the agent writes and the verifier evaluates."""
    return f"{KERNEL_DIR}/{task.entry_file}"


def task_toml(
    task: TaskConfig,
    *,
    name: str,
    description: str,
    metadata: dict[str, Any],
    gpus: int,
    agent_timeout_s: float,
    verifier_timeout_s: float,
) -> str:
    """``task.toml`` (Harbor task schema 1.4)."""
    environment: dict[str, Any] = {"build_timeout_sec": 1800.0, "env": service_env(gpus)}
    if gpus > 0:
        environment |= {"gpus": gpus, "gpu_types": GPU_TYPES[task.arch]}
    document = {
        "schema_version": "1.4",
        # the verifier runs in its own container and gets only the kernel file from the agent's
        "artifacts": [kernel_path(task)],
        "task": {
            "name": f"ptxbench/{name}",
            "description": description,
            "keywords": ["ptxbench", "gpu-kernels", task.language, task.arch],
        },
        "metadata": metadata,
        "agent": {"timeout_sec": float(agent_timeout_s), "user": AGENT_USER},
        "verifier": {
            "timeout_sec": float(verifier_timeout_s),
            "user": AGENT_USER,
            "environment_mode": "separate",
            "env": service_env(gpus),
        },
        "environment": environment,
    }
    return tomli_w.dumps(document)


def dockerfile(task: TaskConfig, *, name: str, image: str) -> str:
    """``environment/Dockerfile``: the evaluator image plus this task's read-only task file and reference."""
    return f"""\
# PTXBench Harbor task {name}: {task.definition}, {task.language}, {task.arch}.
# The base image is the evaluator image of the PTXBench repository (ptxbench eval, FIBServe, CUDA 13, torch,
# triton, compute-sanitizer, ncu, bubblewrap); build it first from the repository root:
#   docker build -f docker/Dockerfile.eval -t ptxbench-eval:dev .
# Pin it by digest (ptxbench harbor export --image ptxbench-eval@sha256:...) for a published task.
ARG PTXBENCH_EVAL_IMAGE={image}
FROM ${{PTXBENCH_EVAL_IMAGE}}

USER 0
COPY task.json /opt/ptxbench/task.json
COPY reference/ /opt/ptxbench/reference/
RUN chmod -R a=rX /opt/ptxbench

USER {AGENT_UID}
WORKDIR {KERNEL_DIR}
"""


COMPOSE = """\
# Written for tasks whose containers start their own FIBServe (ptxbench harbor export --gpus N).
# bubblewrap confines every compiler and candidate process of FIBServe inside this container; it creates
# user, PID, network and mount namespaces and mounts a fresh /proc, which Docker's default seccomp and AppArmor
# profiles and its masked /proc paths forbid. No privileges or capabilities are added.
services:
  main:
    security_opt:
      - seccomp=unconfined
      - apparmor=unconfined
      - systempaths=unconfined
"""
"""``environment/docker-compose.yaml`` (Harbor merges it into the main service)."""


def test_sh(task: TaskConfig, *, name: str, reward: str, instruction_evidence: bool) -> str:
    """``tests/test.sh``: the verifier (``ptxbench harbor verify``). ``PTXBENCH_KERNEL`` and
    ``PTXBENCH_VERIFIER_LOGS`` override the container paths, for running it outside Harbor."""
    evidence = " --instruction-evidence" if instruction_evidence else ""
    return f"""\
#!/bin/bash
# Verifier of the PTXBench Harbor task {name}: `ptxbench eval` on the agent's kernel with this folder's
# task.json (FIBServe from $SERVICE_URL, else one started in this container), then reward.json ({reward}
# reward), evaluation.json (the ptxbench.eval.v1 result) and verifier.json in the verifier's log folder.
# A service failure writes no reward.json, so Harbor records a verifier error, not a zero for the agent.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
exec ptxbench harbor verify "${{PTXBENCH_KERNEL:-{kernel_path(task)}}}" \\
    --task-config "$here/task.json" \\
    --logs-dir "${{PTXBENCH_VERIFIER_LOGS:-/logs/verifier}}" \\
    --reward {reward}{evidence}
"""


def solve_sh(task: TaskConfig, *, name: str, oracle_file: str | None, origin: str | None) -> str:
    """``solution/solve.sh``: copy the oracle kernel to the kernel path, or fail saying there is none."""
    if oracle_file is None:
        return f"""\
#!/bin/bash
# PTXBench Harbor task {name}: there is no oracle kernel for {task.definition} in {task.language}.
echo "no oracle kernel for {task.definition} ({task.language}): nothing to submit" >&2
exit 1
"""
    return f"""\
#!/bin/bash
# Oracle of the PTXBench Harbor task {name}: a kernel known to pass ({origin}).
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
cp "$here/{oracle_file}" "${{PTXBENCH_KERNEL:-{kernel_path(task)}}}"
"""


def reference_readme(task: TaskConfig, *, name: str) -> str:
    """``environment/reference/README.md`` (``/opt/ptxbench/reference/README.md`` in the container)."""
    return f"""\
# {name}

- `definition.json`: the FlashInfer Trace definition `{task.definition}` as the evaluation service serves it
  (axes, inputs, outputs in calling order, the PyTorch reference that is the correctness oracle).
- `workloads.json`: the workloads the kernel is evaluated on.
- `/opt/ptxbench/task.json`: the task file (definition, workloads, language, target {task.target_speedup:g}x,
  sanitizer gate); read-only.

Write the kernel to `{kernel_path(task)}`, then check it with `ptxbench eval {kernel_path(task)}` (add `--json`
for the full result). The same command grades it when the task ends.
"""


def instruction(task: TaskConfig, *, system_prompt: str, task_message: str, reward: str) -> str:
    """``instruction.md``: how the task works here, then the agent's system prompt and task message."""
    grading = (
        "Reward: 1 when every workload passes, else 0."
        if reward == "binary"
        else "Reward: 0 unless every workload passes; then 0.5, plus up to 0.3 for speed (the minimum speedup "
        "against the baseline over the target, capped at 1) and 0.2 when the compiled kernel uses the "
        "target's instruction families (wgmma or TMA on sm_90a, tcgen05 on sm_100a)."
    )
    return f"""\
# PTXBench: {task.definition} ({task.language}, {task.arch})

Write one {"CUDA (`.cu`, tvm-ffi binding)" if task.language == "cuda" else "Triton (`.py`)"} kernel file to
`{kernel_path(task)}`. There is no starter kernel. Evaluate it as often as you like with

    ptxbench eval {kernel_path(task)}

which builds it, checks it against the definition's PyTorch reference on every workload and times it against the
baseline (add `--json` for the full result). The definition and workloads are also in `/opt/ptxbench/reference/`.
When you stop, the same evaluation grades the file that is there. {grading}

The rest of this file is exactly what the PTXBench kernel agent is given: its system prompt, then its task
message. Where they speak of replies and turns, here you write the file and run `ptxbench eval` yourself.

---

{system_prompt.rstrip()}

---

{task_message.rstrip()}
"""


def task_json(task: TaskConfig) -> str:
    """The task file (our shape), as written to ``environment/task.json`` and ``tests/task.json``."""
    return json.dumps(task.model_dump(mode="json", exclude_defaults=False), indent=2) + "\n"
