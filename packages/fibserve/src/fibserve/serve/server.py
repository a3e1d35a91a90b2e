"""Run the FIBServe app under uvicorn, with a graceful shutdown that re-queues running work."""

from __future__ import annotations

import logging
import os

from .settings import ServeSettings


def serve(settings: ServeSettings, *, log_level: str = "info") -> None:
    """Load everything, bind ``settings.host:settings.port`` and serve until SIGINT or SIGTERM.

    On SIGINT/SIGTERM uvicorn stops accepting connections, gives open requests (long polls) a few seconds,
    then the app's lifespan puts every running task back in the queue and stops the lanes, so the next
    server on the same ``--state-dir`` runs them again.

    Raises:
        fibserve.trace.problems.TraceSetError, ValueError, RuntimeError: see :func:`create_app`.
    """
    import uvicorn

    from .app import create_app

    # Everything this server writes (the task store, tool-run scratch files, worker logs) holds candidates'
    # sources and results: private to its user. The store also sets its own modes (fibserve.serve.store).
    os.umask(0o077)

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if settings.host not in ("127.0.0.1", "localhost", "::1") and settings.token is None:
        logging.getLogger("fibserve.serve").warning(
            "binding %s without --token: anyone who can reach this port can run code on this machine's GPUs; "
            "set --token (or FIBSERVE_TOKEN)",
            settings.host,
        )
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        lifespan="on",
        timeout_graceful_shutdown=5,
        access_log=False,
    )
    uvicorn.Server(config).run()
