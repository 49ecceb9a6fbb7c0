"""The waiting room of places (judgefuse.places). Its order, line age on a fake clock: first
come first served while the line is young, the newest caller first once it has stood
``lifo_after_s`` without a break, in order again once it emptied; 0 keeps it in order. Its
fast path: ``try_take`` holds a free place only when nobody is in line."""

from __future__ import annotations

import asyncio

import pytest

from judgefuse.places import Places


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def line_up(places: Places, n: int) -> list[asyncio.Task[bool]]:
    """``n`` callers waiting, oldest first (each starts waiting before the next is created)."""
    tasks = []
    for _ in range(n):
        tasks.append(asyncio.create_task(places.acquire()))
        await asyncio.sleep(0)
    assert places.waiting == n
    return tasks


async def release(places: Places, tasks: list[asyncio.Task[bool]]) -> list[int]:
    """Give one place back; then the indices of the callers that hold a place so far."""
    places.release()
    await asyncio.sleep(0)
    return [i for i, t in enumerate(tasks) if t.done() and not t.cancelled() and t.result()]


async def test_a_young_line_is_served_in_order_a_standing_one_newest_first():
    clock = Clock()
    places = Places(1, wait_s=10.0, lifo_after_s=0.125, clock=clock)
    assert await places.acquire()
    tasks = await line_up(places, 4)
    clock.now += 0.0625  # the line is 62.5 ms old: in order (binary fractions: exact)
    assert await release(places, tasks) == [0]
    clock.now += 0.0625  # 125 ms without a break: the newest caller next
    assert await release(places, tasks) == [0, 3]
    assert await release(places, tasks) == [0, 2, 3]
    assert await release(places, tasks) == [0, 1, 2, 3] and places.waiting == 0
    assert places.held == 1
    # the line emptied: the next one is young again, and in order
    more = await line_up(places, 2)
    clock.now += 0.01
    assert await release(places, more) == [0]
    assert await release(places, more) == [0, 1]
    places.release()
    assert places.held == 0


async def test_without_lifo_after_s_the_line_stays_in_order_however_long_it_stands():
    clock = Clock()
    places = Places(1, wait_s=10.0, clock=clock)
    assert places.lifo_after_s == 0.0
    assert await places.acquire()
    tasks = await line_up(places, 3)
    clock.now += 60.0
    assert await release(places, tasks) == [0]
    assert await release(places, tasks) == [0, 1]
    assert await release(places, tasks) == [0, 1, 2]


async def test_newest_first_skips_callers_that_gave_up():
    """A caller cancelled while waiting is not handed a place (it would be lost)."""
    clock = Clock()
    places = Places(1, wait_s=10.0, lifo_after_s=0.125, clock=clock)
    assert await places.acquire()
    tasks = await line_up(places, 3)
    tasks[2].cancel()
    await asyncio.sleep(0)
    clock.now += 1.0
    assert await release(places, tasks) == [1] and places.held == 1
    assert await release(places, tasks) == [0, 1]


def test_lifo_after_s_must_not_be_negative():
    with pytest.raises(ValueError, match="lifo_after_s"):
        Places(1, lifo_after_s=-0.1)


async def test_try_take_holds_a_free_place_and_nothing_else():
    places = Places(2, wait_s=10.0)
    assert places.try_take() and places.try_take() and places.held == 2
    assert not places.try_take()  # full
    tasks = await line_up(places, 1)
    assert await release(places, tasks) == [0] and places.held == 2  # handed on, not freed
    assert not places.try_take()
    places.release()
    assert places.try_take() and places.held == 2  # a place back with nobody in line: taken
    assert Places().try_take()  # no limit: always


async def test_a_caller_past_its_wait_is_refused_and_leaves_the_line():
    places = Places(1, wait_s=10.0)
    assert places.try_take()
    assert not await places.acquire(0.01)  # its own shorter wait: the judges' call deadline
    assert not await places.acquire(0.0) and places.waiting == 0 and places.held == 1
