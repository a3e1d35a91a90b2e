"""Long-poll wake-ups: lanes (threads) announce finished tasks; handlers (asyncio) wait for them."""

from __future__ import annotations

import asyncio
from collections import defaultdict


class TaskWaiters:
    """Per-task asyncio events, set from any thread through the event loop.

    Waiters always re-read the store after waking (and at least every ``recheck_s`` seconds), so a missed
    or early wake-up costs latency, never correctness.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, recheck_s: float = 1.0) -> None:
        self._loop = loop
        self._events: dict[str, set[asyncio.Event]] = defaultdict(set)
        self.recheck_s = recheck_s

    def notify_threadsafe(self, task_id: str) -> None:
        """Wake everyone waiting for ``task_id`` (callable from a lane thread)."""
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.notify, task_id)

    def notify(self, task_id: str) -> None:
        """Wake everyone waiting for ``task_id`` (call on the event loop)."""
        for event in self._events.pop(task_id, ()):
            event.set()

    async def wait(self, task_ids: list[str], timeout_s: float) -> None:
        """Sleep until one of ``task_ids`` is announced or ``min(timeout_s, recheck_s)`` passes."""
        if timeout_s <= 0:
            return
        event = asyncio.Event()
        for task_id in task_ids:
            self._events[task_id].add(event)
        try:
            await asyncio.wait_for(event.wait(), timeout=min(timeout_s, self.recheck_s))
        except TimeoutError:
            pass
        finally:
            for task_id in task_ids:
                waiting = self._events.get(task_id)
                if waiting is not None:
                    waiting.discard(event)
                    if not waiting:
                        del self._events[task_id]
