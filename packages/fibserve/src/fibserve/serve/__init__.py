"""FIBServe HTTP service: FastAPI app, scheduler (one lane per device), durable SQLite task store.

Start it with ``fibserve serve`` or :func:`serve`; talk to it with :class:`fibserve.client.FIBServeClient`.
Importing this package does not import FastAPI; use ``fibserve.serve.app.create_app`` for the app object.
"""

from .models import normalize_solution_name
from .server import serve
from .settings import ServeSettings

__all__ = ["ServeSettings", "normalize_solution_name", "serve"]
