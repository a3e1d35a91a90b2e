"""ServeSettings: everything `fibserve serve` is started with, as one validated pydantic model."""

from __future__ import annotations

import os
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

TOKEN_ENV = "FIBSERVE_TOKEN"
"""Environment variable holding the bearer token when ``--token`` is not given."""

DATA_ROOT_ENV = "PTXBENCH_DATA_ROOT"
"""Environment variable naming the data directory (default ``data/`` under the working directory)."""

_DEVICE = re.compile(r"^(cpu|cuda:\d+)$")


def default_state_dir() -> Path:
    """``$PTXBENCH_DATA_ROOT/fibserve-state``, or ``data/fibserve-state`` under the working directory."""
    root = os.environ.get(DATA_ROOT_ENV)
    return (Path(root) if root else Path.cwd() / "data") / "fibserve-state"


class ServeSettings(BaseModel):
    """Options of one FIBServe server process (the CLI fills this; tests build it directly)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    roots: list[Path] = Field(default_factory=list)
    """Trace-set roots; empty means ``$DATASET_ROOTS`` or the bundled default trace set."""
    devices: list[str] | None = None
    """Worker lanes, e.g. ``["cuda:0", "cuda:1"]``; None means every visible GPU, or ``["cpu"]`` without one."""
    host: str = "127.0.0.1"
    """Interface to bind; only loopback by default, since candidates run arbitrary code."""
    port: int = Field(10000, ge=0, le=65535)
    """TCP port (0 picks a free one)."""
    token: SecretStr | None = None
    """Bearer token every request except ``/health`` and the docs must carry; None disables auth."""
    locked_tolerances: bool | None = None
    """Refuse requests that set ``atol``/``rtol`` (403 ``tolerances_locked``), so only the evaluation config
    decides what is correct. None: locked exactly when a token is set (see :attr:`tolerances_locked`)."""
    state_dir: Path = Field(default_factory=default_state_dir)
    """Directory of the task database (``tasks.sqlite3``) and scratch files of tool runs."""
    max_body_mb: float = Field(32.0, gt=0, le=4096)
    """Largest request body in MiB; larger bodies get 413."""
    max_sources: int = Field(64, ge=1, le=10_000)
    """Most source files in one solution; more get 413 ``too_many_sources`` (each file is written to the
    build cache, and 300,000 tiny files once kept a lane busy for 113 s). At most
    :data:`fibserve.api.MAX_SOURCES_PER_REQUEST`, which every request is held to before validation."""
    max_source_mb: float = Field(8.0, gt=0, le=4096)
    """Largest total size of a solution's sources (paths and contents, UTF-8 MiB); more gets 413
    ``sources_too_large``."""
    task_ttl_s: float = Field(7 * 24 * 3600.0, gt=0)
    """Seconds a finished task's answer is kept before it expires."""
    max_attempts: int = Field(3, ge=1, le=100)
    """Times a task may be claimed across server restarts before it is failed as ``server_restarted``."""
    eval_config: Path | None = None
    """Operator evaluation config (YAML with defaults/op_type/definitions) laid over the packaged defaults."""
    max_long_poll_s: float = Field(120.0, gt=0, le=3600)
    """Upper bound on ``GET /tasks/{id}?timeout=`` (seconds)."""
    compile_concurrency: int = Field(default_factory=lambda: max(2, (os.cpu_count() or 2) // 2), ge=1)
    """``POST /compile`` requests analysed at the same time (each may run nvcc and ptxas); one client holds at
    most all but one of them (:mod:`fibserve.serve.compile_slots`)."""
    build_workers: int = Field(default_factory=lambda: max(1, (os.cpu_count() or 2) // 2), ge=0, le=256)
    """Builds of queued CUDA/C++ candidates run ahead of the lanes at the same time (nvcc processes; half the
    cores by default, beside the ``compile_concurrency`` slots of ``POST /compile``); 0 turns the build-ahead
    pool off, and each lane builds what it takes (:mod:`fibserve.serve.build_ahead`). Not used under ``--ray``:
    a Ray lane builds on its own node."""
    compile_timeout_s: float = Field(600.0, gt=0)
    """Time limit of one ``POST /compile`` (seconds)."""
    tool_timeout_s: float = Field(600.0, gt=0)
    """Default limit on one compute-sanitizer or ncu run when the request gives none (seconds)."""
    max_timeout_s: float = Field(600.0, gt=0, le=3600)
    """Longest ``timeout`` a request may ask for (seconds): a larger one is refused (422 ``timeout_too_long``),
    so no client can hold a lane for an hour with one hanging candidate."""
    ray_address: str | None = None
    """Run the lanes on a Ray cluster (``serve --ray``): ``auto`` (``$RAY_ADDRESS``, or the cluster this host
    belongs to) or the head's ``host:port``. Each lane is an actor owning one GPU (``num_gpus=1``), or with
    ``devices=["cpu"]`` one CPU and one unit of the custom resource
    :data:`fibserve.serve.ray_lanes.CPU_LANE_RESOURCE`. None: lanes are threads of this process."""
    unsafe_no_sandbox: bool = False
    """Run candidates without bubblewrap (``--unsafe-no-sandbox``): only where every candidate is trusted."""
    legacy: bool = False
    """Read request solutions in the 2025 FlashInfer Trace format (``--legacy``): a Python or Triton solution
    that does not set ``destination_passing_style`` is value-returning, and a dict it returns is read by
    output name (:func:`fibserve.trace.legacy.as_legacy`). Trace sets are always loaded through the legacy
    migration."""

    @field_validator("devices")
    @classmethod
    def _check_devices(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("devices is empty; give e.g. cuda:0,cuda:1 or cpu, or omit it for all GPUs")
        for device in value:
            if not _DEVICE.match(device):
                raise ValueError(f"device {device!r} is not 'cpu' or 'cuda:N'")
        return value

    @field_validator("ray_address")
    @classmethod
    def _check_ray_address(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("--ray needs an address: 'auto' or the head node's host:port")
        return value

    @model_validator(mode="after")
    def _check_ray_devices(self) -> ServeSettings:
        """Refuse ``devices`` that a Ray cluster cannot honour (its lanes are its GPUs, or CPU lanes)."""
        if self.ray_address is not None and self.devices not in (None, ["cpu"]):
            raise ValueError(
                f"with --ray the lanes are the cluster's GPUs (one actor per GPU); --devices {','.join(self.devices)} "
                "cannot be honoured: omit --devices, or give --devices cpu for CPU lanes"
            )
        return self

    @property
    def tolerances_locked(self) -> bool:
        """Whether request tolerances are refused: ``locked_tolerances``, or by default whether a token is set.

        A token means the server is shared with clients its operator does not control (a benchmark or an RL
        reward service), where a client that sends ``atol: 1e308`` would make any wrong kernel PASS; a server
        without one is a person's own (the quickstart's embedded server, offline experiments with tolerances).
        """
        return self.token is not None if self.locked_tolerances is None else self.locked_tolerances

    @property
    def max_body_bytes(self) -> int:
        """``max_body_mb`` in bytes."""
        return int(self.max_body_mb * 1024 * 1024)

    @property
    def max_source_bytes(self) -> int:
        """``max_source_mb`` in bytes."""
        return int(self.max_source_mb * 1024 * 1024)

    @property
    def db_path(self) -> Path:
        """The SQLite task database."""
        return self.state_dir / "tasks.sqlite3"


def resolve_devices(requested: list[str] | None) -> list[str]:
    """The lane devices: ``requested`` checked against the visible GPUs, or all GPUs, or ``["cpu"]``.

    Raises:
        ValueError: a device does not exist here (:class:`fibserve.bench.device.DeviceProblem`; the message
            says how many GPUs are visible).
    """
    import torch

    from fibserve.bench.device import resolve_device

    if requested is None:
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return [f"cuda:{i}" for i in range(count)] or ["cpu"]
    return [resolve_device(device, flag="--devices") for device in requested]
