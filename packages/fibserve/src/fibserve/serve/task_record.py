"""A task as the store holds it: its status, its decoded row, and what a submission adds to the queue."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

from .queue_order import Prebuild


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
    """Submission order; each client's share of the queue is served in increasing ``seq``."""
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
    client: str
    """Who submitted it (the peer address); queued tasks are shared fairly between clients."""
    prebuild: Prebuild | None
    """Where its build-ahead stands; None when nothing is built ahead for it."""


@dataclass(frozen=True)
class Submission:
    """One task to queue: its normalized solution name, its validated request body, whether to build it ahead."""

    solution: str
    request: dict[str, Any]
    prebuild: bool = False


def decode(row: sqlite3.Row) -> TaskRecord:
    """A row of the ``tasks`` table as a :class:`TaskRecord` (its JSON columns parsed)."""
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
        client=row["client"],
        prebuild=None if row["prebuild"] is None else Prebuild(row["prebuild"]),
    )
