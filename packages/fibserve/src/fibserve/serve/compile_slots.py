"""Fair ``POST /compile`` slots: no client's compiles can keep another client's waiting.

A compile may run for minutes (a template-instantiation bomb ran until the time limit and held the only slot
for 5 minutes while an honest compile waited). So one client (one peer address) holds at most ``total - 1``
of the slots, always leaving one for anybody else, and waiting requests are admitted in turn by client (the
least-served first) rather than first come, first served, so a client with many queued requests does not get
all the slots that free up. Behind a proxy every client has the proxy's address: run the proxy per client.

A compile runs in a thread, which cannot be stopped: one whose caller stopped waiting (its time limit) keeps
its slot until the thread ends (:meth:`FairSlots.run`), so that a client cannot run more compiles than its
slots by letting each time out.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

T = TypeVar("T")


class FairSlots:
    """``total`` concurrent compiles, shared fairly between client addresses (see the module docstring).

    Create it inside the running event loop (it holds an ``asyncio.Condition``).
    """

    def __init__(self, total: int) -> None:
        self.total = total
        self._running: Counter[str] = Counter()
        self._waiting: deque[str] = deque()
        self._changed = asyncio.Condition()
        self._threads: set[asyncio.Task[object]] = set()
        """Compiles still running, whoever still waits for them (a reference keeps each task alive)."""

    def _may_start(self, client: str) -> bool:
        if sum(self._running.values()) >= self.total:
            return False
        cap = max(1, self.total - 1)
        eligible = [c for c in dict.fromkeys(self._waiting) if self._running[c] < cap]
        # take turns: the least-served eligible client first, then the earliest to arrive
        return bool(eligible) and client == min(
            eligible, key=lambda c: (self._running[c], self._waiting.index(c))
        )

    @contextlib.asynccontextmanager
    async def slot(self, client: str) -> AsyncIterator[None]:
        """Hold one slot for ``client`` (its peer address) while the block runs."""
        async with self._changed:
            self._waiting.append(client)
            try:
                await self._changed.wait_for(lambda: self._may_start(client))
            finally:
                self._waiting.remove(client)
                # a waiter cancelled as a slot freed took the wake-up with it: the next in turn must look again
                self._changed.notify_all()
            self._running[client] += 1
            self._changed.notify_all()
        try:
            yield
        finally:
            async with self._changed:
                self._running[client] -= 1
                if not self._running[client]:
                    del self._running[client]
                self._changed.notify_all()

    async def run(self, client: str, work: Callable[[], T], timeout: float) -> T:
        """``work()`` in a thread once ``client`` has a slot; returns what it returns.

        The slot is held until ``work`` returns, also when the caller stops waiting: after ``timeout`` seconds
        of it running (not of waiting for the slot), or when the caller is cancelled (a server shutting down;
        uvicorn does not cancel a handler whose client hung up). A caller cancelled before its slot came starts
        nothing.

        Raises:
            TimeoutError: ``work`` ran longer than ``timeout`` seconds (it goes on, holding the slot).
            Exception: whatever ``work`` raised.
        """
        started = asyncio.Event()

        async def held() -> T:
            async with self.slot(client):
                started.set()
                return await asyncio.to_thread(work)

        task = asyncio.create_task(held())
        self._threads.add(task)
        task.add_done_callback(self._threads.discard)
        # its exception is retrieved even when nobody awaits it any more (no "never retrieved" warning)
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        waiting = asyncio.create_task(started.wait())
        try:
            await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            if not started.is_set():
                task.cancel()
            raise
        finally:
            waiting.cancel()
        return await asyncio.wait_for(asyncio.shield(task), timeout)
