"""Durable task store: one SQLite database in WAL mode under the server's state directory.

The store is the queue. A task row is written (and fsynced) before the server answers the submission, so an
accepted task survives any crash of the server process, SIGKILL included. Lanes claim pending rows atomically,
in the order of :mod:`fibserve.serve.queue_order` (a fair share per client, built work first); a restart turns
rows left ``running`` back into ``pending`` (or fails them after ``max_attempts`` claims, so a task that kills
the server cannot loop forever). Finished rows keep their answer until ``expires_at`` (finish time plus the
TTL) and are then deleted.

Statuses are four: ``pending``, ``running``, ``completed``, ``failed``. A cancelled
task is ``failed`` with error code ``cancelled`` so that clients that wait for one of the two final statuses
keep working.

Requests, results and errors are stored as standard JSON in the convention of :mod:`fibserve.serve.json_values`
(a NaN error is the string ``"NaN"``), so what a lane recorded reads back exactly.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from .json_values import dumps
from .queue_order import NEXT_FOR_LANE, NEXT_TO_BUILD, Prebuild
from .task_record import Submission, TaskRecord, TaskStatus, decode

SCHEMA_VERSION = 2
"""Version of the table layout, stored in ``PRAGMA user_version``. Version 1 (without ``client`` and
``prebuild``) is migrated in place; any other is refused."""

_MIGRATIONS = {
    1: (
        "ALTER TABLE tasks ADD COLUMN client TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE tasks ADD COLUMN prebuild TEXT",
    )
}
"""Statements that bring a database of the key's version to :data:`SCHEMA_VERSION`."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    definition TEXT NOT NULL,
    solution TEXT NOT NULL,
    request TEXT NOT NULL,
    result TEXT,
    error TEXT,
    lane TEXT,
    attempt INTEGER NOT NULL DEFAULT 0,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    expires_at REAL,
    client TEXT NOT NULL DEFAULT '',
    prebuild TEXT
);
CREATE INDEX IF NOT EXISTS tasks_by_status ON tasks (status, seq);
CREATE INDEX IF NOT EXISTS tasks_by_client ON tasks (status, client, seq);
CREATE INDEX IF NOT EXISTS tasks_by_client_start ON tasks (client, started_at);
CREATE INDEX IF NOT EXISTS tasks_by_expiry ON tasks (expires_at);
"""


class TaskStore:
    """SQLite-backed task table shared by the HTTP handlers (submit, read, cancel) and the lanes (claim, finish).

    One connection guarded by a lock: SQLite serializes writers anyway, and every statement here is short.
    ``synchronous=FULL`` makes each commit durable against power loss as well as process death.

    Args:
        path: database file; its directory is created. The directory is made ``0700`` and the database, its
            ``-wal`` and ``-shm`` files (SQLite gives those the database's mode) and the lock ``0600``: the
            store holds every candidate's source and result.
        ttl_s: seconds a finished task's answer is kept (then it is deleted and reads answer "unknown task").
        max_attempts: claims after which a task left running by a dead server is failed instead of re-queued.
        exclusive: hold an exclusive lock (``<path>.lock``, ``flock``) for the store's lifetime, so that a
            second server on the same state directory is refused instead of re-queueing the first one's
            running tasks. The kernel drops the lock when the process dies, SIGKILL included.

    Raises:
        RuntimeError: the file holds a different schema version, or (``exclusive``) another process holds it.
    """

    def __init__(
        self, path: Path, *, ttl_s: float = 24 * 3600.0, max_attempts: int = 3, exclusive: bool = True
    ) -> None:
        self.path = Path(path)
        self.ttl_s = float(ttl_s)
        self.max_attempts = int(max_attempts)
        _make_private(self.path)
        self._owner = None
        if exclusive:
            lock = self.path.with_name(self.path.name + ".lock")
            self._owner = os.fdopen(os.open(lock, os.O_WRONLY | os.O_CREAT, 0o600), "w")  # held open
            try:
                fcntl.flock(self._owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._owner.close()
                raise RuntimeError(
                    f"another FIBServe server is using the task store {self.path}; stop it or give this one "
                    "its own --state-dir"
                ) from None
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            str(self.path), check_same_thread=False, isolation_level=None, timeout=30.0
        )
        self._db.row_factory = sqlite3.Row
        mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise RuntimeError(
                f"SQLite refused WAL mode for {self.path} (got {mode!r}); use a local file system"
            )
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=30000")
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION, *_MIGRATIONS):
            raise RuntimeError(
                f"task store {self.path} has schema version {version}, this server writes {SCHEMA_VERSION}; "
                "point --state-dir at a new directory or delete the old file"
            )
        for statement in _MIGRATIONS.get(version, ()):
            self._db.execute(statement)
        self._db.executescript(_SCHEMA)
        self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    # -- submission and reading ---------------------------------------------------------------------------

    def submit(
        self,
        kind: str,
        definition: str,
        solution: str,
        request: dict[str, Any],
        *,
        client: str = "",
        prebuild: bool = False,
    ) -> TaskRecord:
        """Insert a pending task and return it; the row is committed before this returns.

        Args:
            client: who submits it (its peer address), for the fair share of :mod:`fibserve.serve.queue_order`.
            prebuild: the build-ahead pool is to build it before a lane takes it (:meth:`claim_build`).
        """
        return self.submit_many(kind, definition, [Submission(solution, request, prebuild)], client=client)[0]

    def submit_many(
        self, kind: str, definition: str, submissions: list[Submission], *, client: str = ""
    ) -> list[TaskRecord]:
        """Insert one pending task per submission, all or none, in one transaction committed before this returns.

        Returns:
            The tasks, in the order of ``submissions`` (their ``seq`` in that order too).
        """
        now = time.time()
        waiting = Prebuild.WAITING.value
        records = []
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for item in submissions:
                    row = self._db.execute(
                        "INSERT INTO tasks (id, kind, status, definition, solution, request, created_at, client, "
                        "prebuild) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *",
                        (uuid.uuid4().hex, kind, TaskStatus.PENDING.value, definition, item.solution,
                         dumps(item.request), now, client, waiting if item.prebuild else None),
                    ).fetchone()  # fmt: skip
                    records.append(decode(row))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return records

    def get(self, task_id: str) -> TaskRecord | None:
        """The task, or None when it is unknown or its answer has expired."""
        with self._lock:
            row = self._db.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
        if row is None:
            return None
        record = decode(row)
        if record.expires_at is not None and record.expires_at < time.time():
            return None
        return record

    def counts(self) -> dict[TaskStatus, int]:
        """Number of tasks in each status (expired rows not yet swept are counted as finished)."""
        with self._lock:
            rows = self._db.execute("SELECT status, COUNT(*) FROM tasks GROUP BY status").fetchall()
        counts = dict.fromkeys(TaskStatus, 0)
        for status, count in rows:
            counts[TaskStatus(status)] = count
        return counts

    # -- lanes ----------------------------------------------------------------------------------------------

    def claim(self, lane: str) -> TaskRecord | None:
        """Atomically move the next pending task (:data:`fibserve.serve.queue_order.NEXT_FOR_LANE`: fair share
        between clients, built work first) to running on ``lane``; None when the queue is empty."""
        now = time.time()
        with self._lock:
            row = self._db.execute(
                f"UPDATE tasks SET status = ?, lane = ?, attempt = attempt + 1, started_at = ? "
                f"WHERE seq = ({NEXT_FOR_LANE}) RETURNING *",
                (TaskStatus.RUNNING.value, lane, now),
            ).fetchone()
        return None if row is None else decode(row)

    def claim_build(self) -> TaskRecord | None:
        """Atomically mark the next pending task waiting for its build-ahead
        (:data:`fibserve.serve.queue_order.NEXT_TO_BUILD`) as being built, and return it; None when there is none."""
        with self._lock:
            row = self._db.execute(
                f"UPDATE tasks SET prebuild = ? WHERE seq = ({NEXT_TO_BUILD}) RETURNING *",
                (Prebuild.BUILDING.value,),
            ).fetchone()
        return None if row is None else decode(row)

    def build_done(self, task_id: str) -> None:
        """Record that the build-ahead of ``task_id`` has finished (whatever its outcome: the cache holds it)."""
        with self._lock:
            self._db.execute(
                "UPDATE tasks SET prebuild = ? WHERE id = ? AND prebuild = ?",
                (Prebuild.BUILT.value, task_id, Prebuild.BUILDING.value),
            )

    def prebuild_counts(self) -> dict[Prebuild, int]:
        """Number of pending tasks in each build-ahead state."""
        with self._lock:
            rows = self._db.execute(
                "SELECT prebuild, COUNT(*) FROM tasks WHERE status = ? AND prebuild IS NOT NULL GROUP BY prebuild",
                (TaskStatus.PENDING.value,),
            ).fetchall()
        counts = dict.fromkeys(Prebuild, 0)
        for state, count in rows:
            counts[Prebuild(state)] = count
        return counts

    def finish(
        self,
        task_id: str,
        attempt: int,
        status: TaskStatus,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> bool:
        """Record the outcome of claim number ``attempt``.

        Returns False (and changes nothing) when the task is no longer running under that attempt: it was
        re-queued by a shutdown or already finished, so a late result from an abandoned run cannot overwrite it.
        """
        if not status.is_final:
            raise ValueError(f"finish needs a final status, got {status.value!r}")
        now = time.time()
        with self._lock:
            cursor = self._db.execute(
                "UPDATE tasks SET status = ?, result = ?, error = ?, finished_at = ?, expires_at = ? "
                "WHERE id = ? AND status = ? AND attempt = ?",
                (
                    status.value,
                    None if result is None else dumps(result),
                    None if error is None else dumps(error),
                    now,
                    now + self.ttl_s,
                    task_id,
                    TaskStatus.RUNNING.value,
                    attempt,
                ),
            )
        return cursor.rowcount == 1

    def requeue(self, task_id: str, attempt: int) -> bool:
        """Put a running task back at its place in the queue (graceful shutdown); False if it moved on."""
        with self._lock:
            cursor = self._db.execute(
                "UPDATE tasks SET status = ?, lane = NULL, started_at = NULL "
                "WHERE id = ? AND status = ? AND attempt = ?",
                (TaskStatus.PENDING.value, task_id, TaskStatus.RUNNING.value, attempt),
            )
        return cursor.rowcount == 1

    def recover(self, *, build_ahead: bool = True) -> tuple[list[str], list[str]]:
        """At startup: re-queue tasks a dead server left running; fail those claimed ``max_attempts`` times.

        Builds-ahead the dead server left running start again (``build_ahead``), or, for a server without a
        build-ahead pool, are forgotten, so that no task waits behind built work for a build that never comes.

        Returns:
            (ids re-queued, ids failed with error code ``server_restarted``).
        """
        now = time.time()
        error = {
            "code": "server_restarted",
            "message": (
                f"the server stopped while running this task {self.max_attempts} times; it was not retried "
                "again (the task may crash the server; check its inputs or the server log)"
            ),
        }
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                failed = [
                    r[0]
                    for r in self._db.execute(
                        "UPDATE tasks SET status = ?, error = ?, finished_at = ?, expires_at = ? "
                        "WHERE status = ? AND attempt >= ? RETURNING id",
                        (
                            TaskStatus.FAILED.value,
                            dumps(error),
                            now,
                            now + self.ttl_s,
                            TaskStatus.RUNNING.value,
                            self.max_attempts,
                        ),
                    ).fetchall()
                ]
                requeued = [
                    r[0]
                    for r in self._db.execute(
                        "UPDATE tasks SET status = ?, lane = NULL, started_at = NULL WHERE status = ? RETURNING id",
                        (TaskStatus.PENDING.value, TaskStatus.RUNNING.value),
                    ).fetchall()
                ]
                if build_ahead:
                    self._db.execute(
                        "UPDATE tasks SET prebuild = ? WHERE prebuild = ?",
                        (Prebuild.WAITING.value, Prebuild.BUILDING.value),
                    )
                else:
                    self._db.execute(
                        "UPDATE tasks SET prebuild = NULL WHERE prebuild != ?", (Prebuild.BUILT.value,)
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return requeued, failed

    # -- cancel and expiry ----------------------------------------------------------------------------------

    def cancel(self, task_id: str) -> TaskRecord | None:
        """Cancel a task: a pending one fails at once with code ``cancelled``; a running one is flagged.

        A finished task is left as it is. Returns the task after the change, or None when it is unknown.
        """
        now = time.time()
        error = {
            "code": "cancelled",
            "message": "the task was cancelled by a DELETE request before it finished",
        }
        with self._lock:
            self._db.execute(
                "UPDATE tasks SET status = ?, error = ?, finished_at = ?, expires_at = ? WHERE id = ? AND status = ?",
                (
                    TaskStatus.FAILED.value,
                    dumps(error),
                    now,
                    now + self.ttl_s,
                    task_id,
                    TaskStatus.PENDING.value,
                ),
            )
            self._db.execute(
                "UPDATE tasks SET cancel_requested = 1 WHERE id = ? AND status = ?",
                (task_id, TaskStatus.RUNNING.value),
            )
        return self.get(task_id)

    def cancel_requested(self, task_id: str) -> bool:
        """Whether a cancel arrived for this (running) task."""
        with self._lock:
            row = self._db.execute("SELECT cancel_requested FROM tasks WHERE id = ?", (task_id,)).fetchone()
        return bool(row and row[0])

    def expire(self) -> int:
        """Delete finished tasks whose TTL has passed; returns how many were deleted."""
        with self._lock:
            cursor = self._db.execute(
                "DELETE FROM tasks WHERE expires_at IS NOT NULL AND expires_at < ?", (time.time(),)
            )
        return cursor.rowcount

    def close(self) -> None:
        """Close the database (checkpointing the WAL into the main file)."""
        with self._lock:
            self._db.close()
        if self._owner is not None:
            self._owner.close()


def _make_private(path: Path) -> None:
    """Create ``path``'s directory as ``0700`` and ``path`` as ``0600``, tightening ones that exist already."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    for file in (path, *(path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", ".lock"))):
        if file.exists():
            os.chmod(file, 0o600)
