"""What the route handlers of one FIBServe app share (:class:`ServerState`, on ``app.state.fib``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fibserve.datasets.catalog import Catalog
from fibserve.tools.executables import ToolPaths

from .build_ahead import BuildAhead
from .compile_slots import FairSlots
from .scheduler import ResourceCloser, ResourceFactory, Scheduler, TaskHandler
from .settings import ServeSettings
from .store import TaskStore
from .waiters import TaskWaiters


@dataclass
class ServerState:
    """What the handlers share: settings, catalog, store, scheduler, wake-ups, tools.

    ``create_app`` fills the first fields; the app's lifespan adds the scheduler, the build-ahead pool, the
    long-poll wake-ups and the ``POST /compile`` slots (they need the running event loop), and leaves them None
    before it starts (the pool stays None when it is off).
    """

    settings: ServeSettings
    catalog: Catalog
    store: TaskStore
    devices: list[str]
    tools: ToolPaths
    handler: TaskHandler
    factory: ResourceFactory
    closer: ResourceCloser | None
    scheduler: Scheduler | None = None
    build_ahead: BuildAhead | None = None
    waiters: TaskWaiters | None = None
    compile_slots: FairSlots | None = None
    requeued_at_start: list[str] = field(default_factory=list)
