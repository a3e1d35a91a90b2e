"""Durable task store: one SQLite database in WAL mode under the server's state directory.

The store is the queue. A task row is written (and fsynced) before the server answers the submission, so an
accepted task survives any crash of the server process, SIGKILL included. Lanes claim the oldest pending row
atomically; a restart turns rows left ``running`` back into ``pending`` (or fails them after
``max_attempts`` claims, so a task that kills the server cannot loop forever). Finished rows keep their answer
until ``expires_at`` (finish time plus the TTL) and are then deleted.

Statuses are four: ``pending``, ``running``, ``completed``, ``failed``. A cancelled
task is ``failed`` with error code ``cancelled`` so that clients that wait for one of the two final statuses
keep working.

Requests, results and errors are stored as standard JSON in the convention of :mod:`fibserve.serve.json_values`
(a NaN error is the string ``"NaN"``), so what a lane recorded reads back exactly.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import threading
import time
import uuid
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from .json_values import dumps

SCHEMA_VERSION = 1
"""Version of the table layout, stored in ``PRAGMA user_version``; a mismatch is refused, not migrated."""

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
    expires_at REAL
);
CREATE INDEX IF NOT EXISTS tasks_by_status ON tasks (status, seq);
CREATE INDEX IF NOT EXISTS tasks_by_expiry ON tasks (expires_at);
"""


class TaskStatus(StrEnum):
    """Life cycle of a task: pending -> running -> completed | failed (pending -> failed on cancel)."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"

    @property
    def is_final(self) -> bool:
        """Whether the task has finished (completed or failed) and its answer will not change."""
        return self in (TaskStatus.COMPLETED, TaskStatus.FAILED)


class TaskRecord(BaseModel):
    """One row of the store, decoded. Times are Unix seconds (float)."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    id: str
    """Task id (32 hex digits)."""
    seq: int
    """Submission order; the queue is served in increasing ``seq``."""
    kind: str
    """``evaluate``, ``sanitize`` or ``profile``."""
    status: TaskStatus
    """Where the task is in its life cycle."""
    definition: str
    """Name of the definition the solution implements."""
    solution: str
    """Normalized solution name."""
    request: dict[str, Any]
    """The validated request body as JSON (solution included), exactly what the lane runs."""
    result: dict[str, Any] | None
    """Kind-specific answer fields once finished (traces, analysis, logs, tool reports)."""
    error: dict[str, Any] | None
    """``{code, message}`` when the task failed at the task level (never the candidate's own failure)."""
    lane: str | None
    """Device of the lane that ran (or runs) it."""
    attempt: int
    """How many times a lane has claimed it (more than one after restarts)."""
    cancel_requested: bool
    """Whether a cancel arrived while it was running."""
    created_at: float
    """When it was accepted."""
    started_at: float | None
    """When the current (or last) attempt started."""
    finished_at: float | None
    """When it reached its final status."""
    expires_at: float | None
    """When its answer is deleted (finish time plus the TTL)."""


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
        if version not in (0, SCHEMA_VERSION):
            raise RuntimeError(
                f"task store {self.path} has schema version {version}, this server writes {SCHEMA_VERSION}; "
                "point --state-dir at a new directory or delete the old file"
            )
        self._db.executescript(_SCHEMA)
        self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    # -- submission and reading ---------------------------------------------------------------------------

    def submit(self, kind: str, definition: str, solution: str, request: dict[str, Any]) -> TaskRecord:
        """Insert a pending task and return it; the row is committed before this returns."""
        task_id = uuid.uuid4().hex
        now = time.time()
        with self._lock:
            self._db.execute(
                "INSERT INTO tasks (id, kind, status, definition, solution, request, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (task_id, kind, TaskStatus.PENDING.value, definition, solution, dumps(request), now),
            )
            row = self._db.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
        return _decode(row)

    def get(self, task_id: str) -> TaskRecord | None:
        """The task, or None when it is unknown or its answer has expired."""
        with self._lock:
            row = self._db.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
        if row is None:
            return None
        record = _decode(row)
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
        """Atomically move the oldest pending task to running on ``lane``; None when the queue is empty."""
        now = time.time()
        with self._lock:
            row = self._db.execute(
                "UPDATE tasks SET status = ?, lane = ?, attempt = attempt + 1, started_at = ? "
                "WHERE seq = (SELECT seq FROM tasks WHERE status = ? ORDER BY seq LIMIT 1) RETURNING *",
                (TaskStatus.RUNNING.value, lane, now, TaskStatus.PENDING.value),
            ).fetchone()
        return None if row is None else _decode(row)

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

    def recover(self) -> tuple[list[str], list[str]]:
        """At startup: re-queue tasks a dead server left running; fail those claimed ``max_attempts`` times.

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


def _decode(row: sqlite3.Row) -> TaskRecord:
    return TaskRecord(
        id=row["id"],
        seq=row["seq"],
        kind=row["kind"],
        status=TaskStatus(row["status"]),
        definition=row["definition"],
        solution=row["solution"],
        request=json.loads(row["request"]),
        result=None if row["result"] is None else json.loads(row["result"]),
        error=None if row["error"] is None else json.loads(row["error"]),
        lane=row["lane"],
        attempt=row["attempt"],
        cancel_requested=bool(row["cancel_requested"]),
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        expires_at=row["expires_at"],
    )
