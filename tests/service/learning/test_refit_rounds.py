"""RefitScheduler: one run per round, also for the replica that ran it (a named lease's owner
may take it again, so the round marker alone let a replica redo its round at every check)."""

from __future__ import annotations

import asyncio

from judgefuse.service.learning.refit_scheduler import RefitScheduler
from judgefuse.service.storage import SQLiteStorage


async def test_a_replica_runs_each_round_once(tmp_path):
    count = {"n": 0}
    ran: list[int] = []

    async def counted(_tenant: str, _panel: str) -> int:
        return count["n"]

    async def run(_tenant: str, _panel: str) -> None:
        ran.append(count["n"])

    async with SQLiteStorage(tmp_path / "db.sqlite3") as storage:
        scheduler = RefitScheduler(10, run, storage=storage, owner="r1", check_every=1,
                                   count=counted, lease="cold_start")
        for n in range(1, 36):  # a check after every verdict: rounds 1, 2, 3 cross at 10, 20, 30
            count["n"] = n
            scheduler.note("acme", "p1")
            await scheduler.idle()
        assert ran == [10, 20, 30]
        assert scheduler.runs == [("acme", "p1", 1), ("acme", "p1", 2), ("acme", "p1", 3)]
        # another replica finds every round taken
        other = RefitScheduler(10, run, storage=storage, owner="r2", check_every=1, count=counted,
                               lease="cold_start")
        other.note("acme", "p1")
        await other.idle()
        assert other.runs == [] and ran == [10, 20, 30]


async def test_labels_noted_while_a_check_reads_the_count_are_checked_again(tmp_path):
    """The round the last labels complete is refit even when they arrive while an earlier check
    is still reading the count (it read 45 of 60): the scheduler looks once more when it ends."""
    count = {"n": 45}
    reading = asyncio.Event()
    release = asyncio.Event()
    reads: list[int] = []

    async def counted(tenant: str, panel: str) -> int:
        reads.append(count["n"])
        if len(reads) == 1:
            reading.set()
            await release.wait()
            return 45  # what the first check saw before the last labels landed
        return count["n"]

    ran: list[int] = []

    async def run(tenant: str, panel: str) -> None:
        ran.append(count["n"])

    async with SQLiteStorage(tmp_path / "db.sqlite3") as storage:
        scheduler = RefitScheduler(60, run, storage=storage, owner="r1", check_every=15, count=counted)
        for _ in range(15):
            scheduler.note_label("acme", "p1")
        await reading.wait()
        count["n"] = 60
        for _ in range(15):  # the labels that complete round 1, noted while the check is blocked
            scheduler.note_label("acme", "p1")
        release.set()
        await scheduler.idle()
        assert reads == [45, 60]
        assert ran == [60] and scheduler.runs == [("acme", "p1", 1)]
