"""The FIBServe FastAPI application.

``create_app(settings)`` loads the trace sets, opens the task store and returns the app; lanes start in the
app's lifespan and stop (re-queueing their running tasks) when it ends. Endpoint shapes are the models of
:mod:`fibserve.api` (OpenAPI at ``/docs``), the handlers those of :mod:`fibserve.serve.routes`;
``POST /compile`` answers synchronously with the static analysis (it needs no GPU, so it runs on a bounded pool
of its own instead of waiting behind GPU work in the lanes' queue); queued CUDA candidates are built ahead of
the lanes on another bounded pool (:mod:`fibserve.serve.build_ahead`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

import fibserve
from fibserve.api import ErrorBody
from fibserve.datasets.catalog import Catalog
from fibserve.tools.executables import ToolPaths

from . import routes
from .build_ahead import BuildAhead, lane_archs
from .compile_slots import FairSlots
from .errors import GuardMiddleware, install_error_handlers
from .scheduler import ResourceCloser, ResourceFactory, Scheduler, TaskHandler
from .settings import ServeSettings, resolve_devices
from .state import ServerState
from .store import TaskStore
from .waiters import TaskWaiters

log = logging.getLogger("fibserve.serve")

OPEN_PATHS = frozenset({"/health", "/docs", "/docs/oauth2-redirect", "/openapi.json", "/redoc"})
"""Paths that need no bearer token."""

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (401, 403, 404, 413, 422, 503)
}


def create_app(
    settings: ServeSettings,
    *,
    catalog: Catalog | None = None,
    handler: TaskHandler | None = None,
    factory: ResourceFactory | None = None,
    closer: ResourceCloser | None = None,
) -> FastAPI:
    """Build the FIBServe app.

    Args:
        settings: server options.
        catalog: definitions and workloads (default: loaded from ``settings.roots``).
        handler, factory, closer: how lanes run tasks and build/release their per-device Evaluator
            (default: :mod:`fibserve.serve.work`, the real evaluator and tools).

    Raises:
        fibserve.trace.problems.TraceSetError: a trace-set root has errors.
        ValueError: a requested device does not exist, the evaluation config file is invalid, or
            ``FIBSERVE_CACHE_MAX_GB`` is not a positive number.
        RuntimeError: the task store cannot be opened.
    """
    from . import work

    _announce_sandbox(settings)
    if settings.eval_config is not None:
        from fibserve.bench.config import resolve_config

        resolve_config(None, config_path=settings.eval_config)  # a broken file fails here, not in every task
    from fibserve.build.cache import default_max_bytes

    default_max_bytes()  # a malformed FIBSERVE_CACHE_MAX_GB fails here, not in every build
    tools = ToolPaths.discover()
    catalog = catalog or Catalog.load(settings.roots)
    if settings.ray_address is not None and importlib.util.find_spec("ray") is None:
        raise RuntimeError("--ray needs Ray on this host: install fibserve with its extra, fibserve[ray]")
    # Under --ray the lanes are the cluster's GPUs: the front door needs none of its own.
    devices = resolve_devices(settings.devices) if settings.ray_address is None else []
    state = ServerState(
        settings=settings,
        catalog=catalog,
        store=TaskStore(settings.db_path, ttl_s=settings.task_ttl_s, max_attempts=settings.max_attempts),
        devices=devices,
        tools=tools,
        handler=handler or work.TaskWork(catalog, settings, tools),
        factory=factory or work.evaluator_factory(settings, catalog.roots),
        closer=closer or work.close_evaluator,
    )
    app = FastAPI(
        title="FIBServe",
        version=fibserve.__version__,
        description=(
            "Evaluation, sanitizer and profiler service for FlashInfer Trace definitions. Submit work with "
            "POST /evaluate, /sanitize or /profile (202 with a task id), then long-poll GET /tasks/{id}?timeout=S. "
            "POST /compile answers at once with the static analysis. Errors are `{error: {code, message}}`."
        ),
        lifespan=_lifespan,
        responses=_ERRORS,
    )
    app.state.fib = state
    install_error_handlers(app)
    app.add_middleware(
        GuardMiddleware,
        token=settings.token.get_secret_value() if settings.token else None,
        max_body_bytes=settings.max_body_bytes,
        open_paths=OPEN_PATHS,
    )
    app.include_router(routes.router)
    return app


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    state: ServerState = app.state.fib
    state.waiters = TaskWaiters(asyncio.get_running_loop())
    state.compile_slots = FairSlots(state.settings.compile_concurrency)
    settings = state.settings
    if settings.ray_address is None and settings.build_workers > 0:
        state.build_ahead = BuildAhead(
            state.store,
            state.catalog,
            lane_archs(state.devices),
            workers=settings.build_workers,
            eval_config=settings.eval_config,
        )
    requeued, failed = state.store.recover(build_ahead=state.build_ahead is not None)
    state.requeued_at_start = requeued
    if requeued or failed:
        log.warning(
            "recovered the task store: %d re-queued, %d failed after repeated restarts",
            len(requeued),
            len(failed),
        )
    if settings.ray_address is not None:
        from .ray_lanes import RayScheduler  # the only import of Ray, and only under --ray

        state.scheduler = RayScheduler(state.store, state.settings, on_finish=state.waiters.notify_threadsafe)
    else:
        state.scheduler = Scheduler(
            state.store,
            state.devices,
            state.handler,
            state.factory,
            state.closer,
            on_finish=state.waiters.notify_threadsafe,
        )
    state.scheduler.start()
    if state.build_ahead is not None:
        state.build_ahead.start()
    sweeper = asyncio.create_task(_sweep(state.store))
    try:
        yield
    finally:
        sweeper.cancel()
        if state.build_ahead is not None:
            await asyncio.to_thread(state.build_ahead.stop)
        requeued_now = await asyncio.to_thread(state.scheduler.stop)
        if requeued_now:
            log.warning("shutdown: re-queued running tasks %s", requeued_now)
        state.store.close()


async def _sweep(store: TaskStore, every_s: float = 60.0) -> None:
    while True:
        await asyncio.sleep(every_s)
        try:
            store.expire()
        except Exception:
            log.exception("expiring old tasks failed")


def _announce_sandbox(settings: ServeSettings) -> None:
    """Apply ``--unsafe-no-sandbox`` and say at start-up how candidates will run."""
    from fibserve import sandbox

    if settings.unsafe_no_sandbox:
        sandbox.allow_unsafe()
    current = sandbox.status()
    if current.mode == "bwrap":
        log.info("sandbox: %s", current.detail)
    elif current.mode == "unsafe-none":
        log.warning("%s", current.detail.upper())
    else:
        log.error("candidates will be refused: %s", current.detail)
