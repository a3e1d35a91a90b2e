"""Environments built from allowlists: for sandboxed processes, and for a FIBServe started by another program.

A child never inherits its parent's environment here. :func:`sandbox_env` is what candidate code (and the
compiler, and the tools) get: a few system variables, the GPU selection, and private caches in the work
dir. :func:`service_env` is what an embedded ``fibserve serve`` gets from the agent that starts it: the
variables FIBServe reads, and nothing that looks like a credential, so the agent's API keys are in no process
that serves candidates.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

SANDBOX_KEPT = (
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH",
)  # fmt: skip
"""Variables a sandboxed process keeps from the service (none of them can hold a secret)."""

SERVICE_KEPT = frozenset(
    {
        *("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "XDG_CACHE_HOME"),
        *("VIRTUAL_ENV", "PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE"),
        *("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"),
        *("DATASET_ROOTS", "TVM_FFI_CUDA_ARCH_LIST", "FIBSERVE_INPUT_SECRET"),
    }
)
"""Variables an embedded FIBServe keeps by name. ``FIBSERVE_INPUT_SECRET`` is the service's own seed
secret: the service reads it, candidates never see the service's environment."""

SERVICE_PREFIXES = ("FIBSERVE_", "PTXBENCH_", "TRITON_", "NCCL_", "TORCH_", "NVSHMEM_")
"""Prefixes of variables an embedded FIBServe keeps, unless the name looks like a credential."""

_SECRET_NAME = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTH)($|_)")
"""Names of variables that hold credentials (``OPENAI_API_KEY``, ``FIBSERVE_TOKEN``, ``HF_TOKEN``)."""


def is_secret_name(name: str) -> bool:
    """Whether an environment variable named ``name`` holds a credential."""
    return bool(_SECRET_NAME.search(name))


def sandbox_env(
    work: Path, *, python_path: str | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a sandboxed process whose work dir (as it sees it) is ``work``.

    HOME, TMPDIR and the Triton and CUDA caches point into ``work``; ``python_path`` becomes PYTHONPATH;
    ``extra`` (set by the service, never by a client) is added last.
    """
    env = {name: os.environ[name] for name in SANDBOX_KEPT if name in os.environ}
    env.update(
        HOME=str(work),
        TMPDIR=str(work),
        USER="nobody",
        LOGNAME="nobody",
        TRITON_CACHE_DIR=str(work / "triton"),
        CUDA_CACHE_PATH=str(work / "nv"),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONNOUSERSITE="1",
    )
    if python_path is not None:
        env["PYTHONPATH"] = python_path
    env.update(extra or {})
    return env


def service_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a ``fibserve serve`` child of another program (default: of ``os.environ``).

    Keeps :data:`SERVICE_KEPT` and names starting with :data:`SERVICE_PREFIXES`, and drops every name that
    looks like a credential (``FIBSERVE_TOKEN`` included) except the service's own ``FIBSERVE_INPUT_SECRET``.
    """
    source = os.environ if environ is None else environ
    kept = {}
    for name, value in source.items():
        wanted = name in SERVICE_KEPT or name.startswith(SERVICE_PREFIXES)
        if wanted and (name == "FIBSERVE_INPUT_SECRET" or not is_secret_name(name)):
            kept[name] = value
    return kept
