"""FIBServe HTTP service: FastAPI app, scheduler (one lane per device), durable SQLite task store.

Start it with ``fibserve serve`` (or :func:`serve`); talk to it with :class:`fibserve.client.FIBServeClient`.
The endpoints and their request and answer shapes are documented by the OpenAPI page it serves at ``/docs``.

Choices made here (and why):

- ``POST /compile`` answers synchronously with :class:`fibserve.analysis.report.Analysis`. Static analysis
  needs no GPU, so it runs on a bounded pool of its own (``compile_concurrency``) instead of waiting in the
  lanes' queue behind GPU work.
- The queue is shared fairly between clients (their peer addresses): each client's n-th outstanding task goes
  before anyone's n+1-th, so a batch (``POST /evaluate/batch``) cannot starve a single request. Queued CUDA
  candidates are built on a bounded CPU pool while the lanes work, and lanes take built work first
  (:mod:`fibserve.serve.queue_order`, :mod:`fibserve.serve.build_ahead`).
- Task statuses stay four (``pending``, ``running``, ``completed``, ``failed``): a cancelled
  task is ``failed`` with error code ``cancelled``, so clients that wait for a final status keep working.
  ``failed`` always means a task-level (service) failure with ``error.code``; a candidate that does not
  compile, crashes or is wrong makes a ``completed`` task whose traces say so (a harness failure is never the candidate's).
- The task store is the queue: an accepted task is committed (WAL, ``synchronous=FULL``) before the 202
  answer. A restart re-queues tasks left ``running``; one that was claimed ``max_attempts`` times (it may be
  what kills the server) is failed with code ``server_restarted``. One server per state directory (an
  exclusive ``flock``, dropped by the kernel even on SIGKILL).
- ``/health``, ``/docs`` and ``/openapi.json`` need no token, so load balancers and people can look; every
  other path needs ``Authorization: Bearer <token>`` when the server has one.
- A lane whose Evaluator lost its own CUDA context (sticky for the process) stops taking tasks and
  ``/health`` says to restart; queued tasks wait instead of failing.

Importing this package does not import FastAPI; the app object comes from ``fibserve.serve.app.create_app``.
"""

from fibserve.api import normalize_solution_name

from .server import serve
from .settings import ServeSettings

__all__ = ["ServeSettings", "normalize_solution_name", "serve"]
