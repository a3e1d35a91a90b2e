"""``POST /compile`` slots are fair between clients (:mod:`fibserve.serve.compile_slots`).

A template-instantiation bomb held the only compile slot for 5 minutes while an honest compile waited. Now one
client holds at most all slots but one, and waiting clients take turns.
"""

from __future__ import annotations

import asyncio

import pytest
from fibserve.serve.compile_slots import FairSlots


async def _scenario(total: int, arrivals: list[str], hold_s: float = 0.3) -> list[str]:
    """Each arrival (a client name, 10 ms apart) holds a slot for ``hold_s``; returns the order they started."""
    slots = FairSlots(total)
    started: list[str] = []

    async def compile_(client: str) -> None:
        async with slots.slot(client):
            started.append(client)
            await asyncio.sleep(hold_s)

    tasks = []
    for client in arrivals:
        tasks.append(asyncio.create_task(compile_(client)))
        await asyncio.sleep(0.01)
    await asyncio.gather(*tasks)
    return started


def test_one_client_never_takes_the_last_slot() -> None:
    """Four bombs from one client, then an honest compile: it starts second, not after the bombs."""
    started = asyncio.run(_scenario(2, ["bomber"] * 4 + ["honest"]))
    assert started[:2] == ["bomber", "honest"]


def test_waiting_clients_take_turns() -> None:
    started = asyncio.run(_scenario(3, ["a", "a", "a", "a", "b", "b", "c"], hold_s=0.2))
    assert started[:3] == ["a", "a", "b"]  # a holds at most 2 of 3
    assert started.index("c") < started.index("b", 3)  # c, with nothing running, goes before b's second


def test_a_lone_client_still_uses_all_but_one_slot() -> None:
    assert asyncio.run(_scenario(3, ["solo"] * 3)) == ["solo"] * 3


def test_a_compile_that_timed_out_keeps_its_slot_until_its_thread_ends() -> None:
    """A compile runs in a thread, which the time limit cannot stop. When the slot was freed at the limit, a client
    could keep any number of compiles running by letting each one time out: here, with one slot for each client
    (two in all), its second compile started at once beside the first, still running."""
    import threading

    async def scenario() -> tuple[bool, bool]:
        slots = FairSlots(2)
        release = threading.Event()
        second_ran = threading.Event()
        with pytest.raises(TimeoutError):
            await slots.run("a", release.wait, timeout=0.1)
        second = asyncio.create_task(slots.run("a", second_ran.set, timeout=5))
        await asyncio.sleep(0.3)
        beside_the_first = second_ran.is_set()
        release.set()  # the first thread ends: its slot goes to the second
        await second
        return beside_the_first, second_ran.is_set()

    assert asyncio.run(scenario()) == (False, True)


def test_a_caller_that_leaves_before_its_slot_came_starts_nothing() -> None:
    import threading

    async def scenario() -> bool:
        slots = FairSlots(1)
        release, ran = threading.Event(), threading.Event()
        first = asyncio.create_task(slots.run("a", release.wait, timeout=5))
        await asyncio.sleep(0.05)
        waiting = asyncio.create_task(slots.run("b", ran.set, timeout=5))
        await asyncio.sleep(0.05)
        waiting.cancel()
        release.set()
        await first
        await asyncio.sleep(0.1)
        return ran.is_set()

    assert asyncio.run(scenario()) is False


def test_a_waiter_cancelled_as_a_slot_frees_does_not_leave_it_idle() -> None:
    """The freed slot's wake-up went to a waiter that was cancelled in the same step, and the next in turn
    slept on beside a free slot until another one freed."""
    import threading

    async def scenario() -> bool:
        slots = FairSlots(3)  # one client holds at most 2
        release = {name: asyncio.Event() for name in ("a", "x", "y")}

        async def hold(client: str) -> None:
            async with slots.slot(client):
                await release[client].wait()

        holders = [asyncio.create_task(hold(client)) for client in release]
        await asyncio.sleep(0.01)
        ran = threading.Event()
        second = asyncio.create_task(slots.run("a", ran.set, timeout=5))
        await asyncio.sleep(0.01)
        leaving = asyncio.create_task(slots.run("c", lambda: None, timeout=5))
        await asyncio.sleep(0.01)
        release["x"].set()
        leaving.cancel()
        await asyncio.sleep(0.3)
        started = ran.is_set()
        for event in release.values():
            event.set()
        await asyncio.gather(second, *holders)
        return started

    assert asyncio.run(scenario()) is True
