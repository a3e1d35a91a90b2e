"""Joining a Ray cluster as a driver, for ``fibserve serve --ray`` and ``ptxbench experiment run --ray``.

:func:`connect` checks first that something listens at a ``host:port`` address (``ray.init`` itself retries
an address where nothing listens for minutes, printing GCS warnings), turns off Ray's ``uv run`` hook (which
would upload the current directory to the cluster), keeps the caller's SIGTERM and SIGINT
handlers (``ray.init`` replaces them with ones that exit at once), and turns every failure into one
:class:`RayConnectError` that says what to do.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading

import ray

PROBE_TIMEOUT_S = 5.0
"""Longest wait for a TCP connection to the head's GCS port before the address is called unreachable (s)."""


class RayConnectError(RuntimeError):
    """No Ray cluster answers at the address; the message says how to start one or which address to give."""


def first_line(exc: BaseException) -> str:
    """``ExceptionType: first line of its message`` (Ray's messages run to many lines)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def probe(address: str) -> None:
    """Check that something listens at a ``host:port`` address within :data:`PROBE_TIMEOUT_S` ('auto' and
    other forms are left to ``ray.init``).

    Raises:
        RayConnectError: nothing answers there (the message says how to start a cluster).
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return  # 'auto', 'local' or a ray:// URL: ray.init resolves those and fails fast on its own
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=PROBE_TIMEOUT_S):
            pass
    except OSError as exc:
        raise RayConnectError(
            f"no Ray cluster at {address!r}: nothing answers on that port ({exc.strerror or exc}); start one "
            "with `ray start --head --port PORT` and pass HOST:PORT (or 'auto' on one of its nodes)"
        ) from None


def _no_uv_run_hook() -> None:
    """Turn off Ray's ``uv run`` hook for this driver.

    When any ancestor process is ``uv run`` (``uv run fibserve serve --ray``, ``uv run pytest``), Ray by
    default zips the driver's current directory, uploads it to the cluster as every job's working directory
    and starts each worker through ``uv run``: a user's files (a checkout, its ``.env``) would travel to every
    node, and each worker start would pay a uv environment check. The nodes' own install runs the workers
    instead (docs/scale-out.md). The switch, ``RAY_ENABLE_UV_RUN_RUNTIME_ENV``, is read once when Ray is
    imported, so the module constant is set here as well as the variable (for processes started from here).
    """
    os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] = "0"
    with contextlib.suppress(ImportError):
        from ray._private import ray_constants

        ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV = False


def connect(address: str, namespace: str) -> None:
    """``ray.init(address, namespace)`` as a driver that keeps its own signal handlers and logs.

    ``address``: 'auto' ($RAY_ADDRESS, or the cluster this host is a node of) or the head's ``host:port``.

    Raises:
        RayConnectError: nothing listens at ``host:port`` (checked within :data:`PROBE_TIMEOUT_S`), or
            ``ray.init`` failed (its first line quoted).
    """
    probe(address)
    _no_uv_run_hook()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        ray.init(address=address, namespace=namespace, log_to_driver=False, configure_logging=False)
    except Exception as exc:
        raise RayConnectError(
            f"could not connect to a Ray cluster at {address!r} ({first_line(exc)}); start one with "
            "`ray start --head` and pass its address (or 'auto' on one of its nodes)"
        ) from None
    finally:
        if threading.current_thread() is threading.main_thread():
            for sig, handler in handlers.items():
                if handler is not None:  # None: set outside Python, cannot be put back
                    signal.signal(sig, handler)
