"""fibserve.sandbox: the one way candidate code runs or is compiled (the lowest layer; standard library only).

Public API::

    status() / require() / allow_unsafe()         # the one switch (bwrap, unsafe-none, unavailable)
    Sandbox(argv, mounts=Mounts(...), limits=Limits(...))   # a long-lived confined process tree
    Sandbox.adopt(ForkedProcess(pid, status_fd), ...)      # one forked into a nested sandbox (nest)
    run(argv, mounts=..., limits=..., timeout_s=...)         # a one-shot confined command
    Limits, LimitHit, LimitName                   # resource limits and how a hit one is named
    sandbox_env(), service_env()                  # environments from allowlists
    Redactor                                      # secrets and their simple encodings -> <redacted>

Used by :mod:`fibserve.build` (nvcc), :mod:`fibserve.bench` (evaluation workers, the Triton JIT inside them)
and :mod:`fibserve.tools` (compute-sanitizer, ncu); what it isolates and what it does not is in
``docs/security.md``.
"""

from .env import is_secret_name, sandbox_env, service_env
from .limits import BUILD_LIMITS, WORKER_LIMITS, LimitHit, LimitName, Limits, limit_of_errno
from .mounts import WORK_DIR, Mounts
from .process import Completed, ForkedProcess, Sandbox, run
from .redact import REDACTED, Redactor, secret_values
from .switch import (
    INSTALL_HINT,
    UNSAFE_ENV,
    UNSAFE_NOTE,
    SandboxStatus,
    SandboxUnavailable,
    allow_unsafe,
    require,
    status,
)

__all__ = [
    "BUILD_LIMITS",
    "INSTALL_HINT",
    "REDACTED",
    "UNSAFE_ENV",
    "UNSAFE_NOTE",
    "WORKER_LIMITS",
    "WORK_DIR",
    "Completed",
    "ForkedProcess",
    "LimitHit",
    "LimitName",
    "Limits",
    "Mounts",
    "Redactor",
    "Sandbox",
    "SandboxStatus",
    "SandboxUnavailable",
    "allow_unsafe",
    "is_secret_name",
    "limit_of_errno",
    "require",
    "run",
    "sandbox_env",
    "secret_values",
    "service_env",
    "status",
]
