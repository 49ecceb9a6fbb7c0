"""The fair concurrency cap: never more than ``capacity`` holders, FIFO within a tenant, freed
slots to the waiting tenant holding the fewest (then served longest ago), cancelled waiters
leave without losing a slot."""

from __future__ import annotations

import asyncio

import pytest

from judgefuse.judges.fair_limiter import FairLimiter


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


class Recorder:
    """Tasks that take a slot, note who got it, and hold it until told to let go."""

    def __init__(self, limiter: FairLimiter) -> None:
        self.limiter = limiter
        self.order: list[str] = []
        self.peak = 0
        self._gates: dict[str, asyncio.Event] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, tenant: str | None, label: str) -> asyncio.Task[None]:
        gate = self._gates[label] = asyncio.Event()

        async def run() -> None:
            async with self.limiter.slot(tenant):
                self.order.append(label)
                self.peak = max(self.peak, self.limiter.in_use)
                await gate.wait()

        task = self.tasks[label] = asyncio.create_task(run())
        return task

    async def finish(self, label: str) -> None:
        self._gates[label].set()
        await self.tasks[label]
        await settle()


def test_capacity_must_be_positive():
    with pytest.raises(ValueError, match="capacity must be >= 1"):
        FairLimiter(0)


async def test_one_tenant_is_served_in_arrival_order_within_capacity():
    limiter = FairLimiter(2)
    rec = Recorder(limiter)
    for i in range(6):
        rec.start(None, f"c{i}")
    await settle()
    assert rec.order == ["c0", "c1"] and limiter.waiting() == 4
    for i in range(6):
        await rec.finish(f"c{i}")
    assert rec.order == [f"c{i}" for i in range(6)]
    assert rec.peak == 2 and limiter.in_use == 0 and limiter.waiting() == 0


async def test_a_tenant_arriving_during_a_burst_gets_the_next_free_slot():
    limiter = FairLimiter(2)
    rec = Recorder(limiter)
    for i in range(10):
        rec.start("A", f"a{i}")
    await settle()
    rec.start("B", "b0")
    rec.start("B", "b1")
    await settle()
    assert rec.order == ["a0", "a1"]
    await rec.finish("a0")  # A holds 1, B holds 0: B first
    assert rec.order[-1] == "b0"
    await rec.finish("a1")  # A 0, B 1: A
    await rec.finish("b0")  # A 1, B 0: B again
    assert rec.order == ["a0", "a1", "b0", "a2", "b1"]


async def test_equal_holders_alternate_round_robin():
    limiter = FairLimiter(1)
    rec = Recorder(limiter)
    rec.start("A", "a0")
    await settle()
    for i in range(1, 4):
        rec.start("A", f"a{i}")
    for i in range(3):
        rec.start("B", f"b{i}")
    rec.start("C", "c0")
    await settle()
    for label in ["a0", "b0", "c0", "a1", "b1", "a2", "b2", "a3"]:
        assert rec.order[-1] == label
        await rec.finish(label)
    assert rec.order == ["a0", "b0", "c0", "a1", "b1", "a2", "b2", "a3"]
    assert rec.peak == 1


async def test_a_cancelled_waiter_leaves_its_queue_and_loses_no_slot():
    limiter = FairLimiter(1)
    rec = Recorder(limiter)
    rec.start("A", "a0")
    await settle()
    waiting = rec.start("B", "b0")
    rec.start("B", "b1")
    await settle()
    waiting.cancel()
    await settle()
    assert waiting.cancelled() and limiter.waiting("B") == 1
    await rec.finish("a0")
    assert rec.order == ["a0", "b1"]
    await rec.finish("b1")
    assert limiter.in_use == 0 and limiter.waiting() == 0


async def test_a_waiter_cancelled_just_after_its_grant_passes_the_slot_on():
    limiter = FairLimiter(1)
    await limiter.acquire("A")
    first = asyncio.create_task(limiter.acquire("B"))
    second = asyncio.create_task(limiter.acquire("C"))
    await settle()
    limiter.release("A")  # granted to B's future; B's task has not run yet
    first.cancel()  # ... and is cancelled before it resumes
    await settle()
    assert first.cancelled()
    assert second.done() and limiter.held("C") == 1 and limiter.in_use == 1
    limiter.release("C")
    assert limiter.in_use == 0


async def test_release_without_a_slot_is_an_error():
    limiter = FairLimiter(1)
    with pytest.raises(RuntimeError, match="release without a slot"):
        limiter.release("A")


async def test_a_per_tenant_cap_keeps_slots_free_for_other_tenants():
    limiter = FairLimiter(3, per_tenant=2)
    rec = Recorder(limiter)
    for i in range(5):
        rec.start("A", f"a{i}")
    await settle()
    assert rec.order == ["a0", "a1"] and limiter.in_use == 2  # one slot left idle for others
    rec.start("B", "b0")
    await settle()
    assert rec.order[-1] == "b0"  # at once, no slot had to free
    await rec.finish("a0")
    assert rec.order[-1] == "a2" and limiter.held("A") == 2
    for label in ("b0", "a1", "a2"):
        await rec.finish(label)
    assert rec.order == ["a0", "a1", "b0", "a2", "a3", "a4"]


async def test_the_anonymous_tenant_is_not_held_to_the_per_tenant_cap():
    limiter = FairLimiter(3, per_tenant=1)
    rec = Recorder(limiter)
    for i in range(3):
        rec.start(None, f"c{i}")
    await settle()
    assert rec.order == ["c0", "c1", "c2"]


def test_per_tenant_must_fit_the_capacity():
    with pytest.raises(ValueError, match="per_tenant must be between 1 and capacity"):
        FairLimiter(2, per_tenant=3)
