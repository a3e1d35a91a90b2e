"""Which queued task goes next: a fair share for every client, and built work before work still compiling.

The task store (:class:`fibserve.serve.store.TaskStore`) answers two questions with the SQL here: which pending
task a lane claims (:meth:`~fibserve.serve.store.TaskStore.claim`), and which one the build-ahead pool compiles
next (:meth:`~fibserve.serve.store.TaskStore.claim_build`, :mod:`fibserve.serve.build_ahead`).

- **A fair share for every client.** Each task records the client that submitted it (its peer address). A
  client's outstanding tasks (pending or running) are numbered in submission order: its *turn*. Tasks are
  served by turn: every client's first outstanding task goes before anyone's second. Among equal turns the
  client whose last task started longest ago (or never) goes first, then submission order. So a client that
  queued a batch of 500 candidates delays another client's single request by the batch's tasks already
  running, at most one per lane, not by 500; two clients with batches alternate; a client with fewer tasks
  running gets the next free lane. The share is of the queue and of the lanes, not of the past: a client that
  had many tasks served earlier is held back only until the others' turns have caught up.
- **Built work first.** A CUDA/C++ candidate's build (nvcc) runs ahead in the build-ahead pool while the lane
  evaluates other tasks. A lane takes a task whose build is done, or that has nothing to build ahead, before
  one still being built, and one being built (it then waits for that build, never starts a second) before one
  whose build has not started; within each group by fair share. A task waiting for its build is never starved:
  the pool builds in the same fair order, and a lane with nothing built takes it and builds it itself.
"""

from __future__ import annotations

from enum import StrEnum


class Prebuild(StrEnum):
    """Where a queued task's build-ahead stands (the store's ``prebuild`` column; NULL: nothing to build ahead)."""

    WAITING = "waiting"
    """The pool has not started it."""
    BUILDING = "building"
    """The pool is compiling it."""
    BUILT = "built"
    """The pool has finished it (its build, or its compile error, is in the build cache)."""


_OUTSTANDING = """
WITH outstanding AS (
    SELECT seq, status, prebuild, client, ROW_NUMBER() OVER (PARTITION BY client ORDER BY seq) AS turn
    FROM tasks WHERE status IN ('pending', 'running')
),
waiting_clients AS (SELECT DISTINCT client FROM outstanding WHERE status = 'pending'),
served AS (
    SELECT client, (SELECT MAX(started_at) FROM tasks WHERE tasks.client = waiting_clients.client) AS last
    FROM waiting_clients
)
"""

NEXT_FOR_LANE = (
    _OUTSTANDING
    + """SELECT seq FROM outstanding JOIN served USING (client) WHERE status = 'pending'
ORDER BY CASE prebuild WHEN 'waiting' THEN 2 WHEN 'building' THEN 1 ELSE 0 END, turn, last, seq LIMIT 1"""
)
"""The ``seq`` of the task a lane claims next (see the module docstring)."""

NEXT_TO_BUILD = (
    _OUTSTANDING
    + """SELECT seq FROM outstanding JOIN served USING (client) WHERE status = 'pending' AND prebuild = 'waiting'
ORDER BY turn, last, seq LIMIT 1"""
)
"""The ``seq`` of the task the build-ahead pool compiles next: the earliest, in the lanes' fair order, of those
whose build has not started."""
