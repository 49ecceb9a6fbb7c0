"""Crash safety of the gateway as a real process (docs/design.md, 'Live calibration', deploy/README.md
"Durability").

Each test starts the scripted OpenAI stub and ``judgefuse serve`` as subprocesses, drives
concurrent ``POST /v1/judge`` (some with an inline label) and ``POST /v1/feedback`` (labels and
relabels) with aiohttp, records every acknowledged (200) verdict and label, kills a process with
SIGKILL while requests are in flight, restarts it, and proves:

* every acknowledged verdict is present with the same choice, and every acknowledged label is on
  its record (a label that was in flight at the kill may or may not be there; nothing else);
* the stored calibration accumulators (running totals and the sum of the hour buckets) equal,
  integer for integer, a recount from the stored labelled records with the service's own
  ``label_increments``, so no label was half applied or counted twice.

Backends: SQLite (WAL, ``synchronous=FULL``) with the gateway killed; Redis with AOF
``appendfsync always`` with the gateway killed; the same Redis itself killed (``kill -9``) and
restarted from its AOF directory under the running gateway; PostgreSQL (``fsync=on``, the
default ``synchronous_commit``) with the gateway killed, and its postmaster itself killed
(``kill -9``: crash recovery from the WAL on restart) under the running gateway.

The harness is :mod:`jf_test_support.crash_harness` (``tests`` is on pytest's pythonpath).
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from jf_test_support.crash_harness import (
    Ledger,
    assert_clean,
    audit,
    killing,
    load,
    report,
    settled_counts,
    sigkill_under_load,
    start_gateway,
    start_redis,
    start_stub,
    until,
    wait_ready,
    write_panel,
)
from jf_test_support.pg_server import PgServer

from judgefuse.service.storage import SQLiteStorage
from judgefuse.service.storage.postgres import PostgresStorage


async def _gateway_kill_and_restart(tmp_path: Path, storage_url: str, open_storage: Any, what: str) -> None:
    stub, stub_url = await start_stub(tmp_path, delay_s=0.02)
    with killing(stub) as procs:
        panel = write_panel(tmp_path, stub_url)
        first = await start_gateway(tmp_path, "gateway-1", storage_url, panel)
        procs.append(first)
        async with load(first.url, workers=12) as (ledger, _stop):
            await until(ledger, verdicts=200, labels=200, max_s=12)
            sigkill_under_load(first.child, ledger)
        first.child.kill()  # reap
        assert first.child.proc.returncode == -signal.SIGKILL
        assert not ledger.failures_before_kill, ledger.failures_before_kill[:5]

        second = await start_gateway(tmp_path, "gateway-2", storage_url, panel)
        procs.append(second)
        result = await audit(second.url, ledger)
        n_calibrated, counted = await settled_counts(
            second.url, open_storage, [*ledger.verdicts, *ledger.pending_verdicts]
        )
    report(what, ledger, result, counted)
    assert_clean(ledger, result, counted, n_calibrated)


async def test_sqlite_gateway_sigkill_mid_stream_loses_nothing_acknowledged(tmp_path):
    db = tmp_path / "judgefuse.sqlite3"
    await _gateway_kill_and_restart(
        tmp_path,
        f"sqlite:///{db}",
        lambda: SQLiteStorage(db),
        "sqlite (WAL, synchronous=FULL), gateway SIGKILL",
    )


async def test_redis_gateway_sigkill_mid_stream_loses_nothing_acknowledged(tmp_path):
    from judgefuse.service.storage.redis import RedisStorage

    redis, port = await start_redis(tmp_path / "redis", "--appendonly", "yes", "--appendfsync", "always")
    with killing(redis):
        url = f"redis://127.0.0.1:{port}/0"
        await _gateway_kill_and_restart(
            tmp_path,
            url,
            lambda: RedisStorage(url),
            "redis (AOF always), gateway SIGKILL",
        )


async def test_redis_sigkill_with_appendfsync_always_keeps_acknowledged_labels(tmp_path):
    """kill -9 of Redis itself under load; restarted from its AOF directory on the same port, the
    still-running gateway reconnects and every acknowledged verdict and label is there."""
    from judgefuse.service.storage.redis import RedisStorage

    workdir = tmp_path / "redis"
    flags = ("--appendonly", "yes", "--appendfsync", "always")
    redis, port = await start_redis(workdir, *flags)
    stub, stub_url = await start_stub(tmp_path, delay_s=0.02)
    with killing(redis, stub) as procs:
        storage_url = f"redis://127.0.0.1:{port}/0"
        gateway = await start_gateway(tmp_path, "gateway", storage_url, write_panel(tmp_path, stub_url))
        procs.append(gateway)
        async with load(gateway.url, workers=12) as (ledger, _stop):
            await until(ledger, verdicts=200, labels=200, max_s=12)
            sigkill_under_load(redis, ledger)
            await asyncio.sleep(0.3)  # the gateway answers 503 meanwhile (storage unavailable)
        redis.kill()
        assert redis.proc.returncode == -signal.SIGKILL
        assert not ledger.failures_before_kill, ledger.failures_before_kill[:5]
        assert list(workdir.glob("appendonlydir/*.aof")) or list(workdir.glob("*.aof"))

        restarted, _ = await start_redis(workdir, *flags, port=port, name="redis-restarted")
        procs.append(restarted)
        await wait_ready(gateway.url, gateway.child, 30)
        result = await audit(gateway.url, ledger)
        async with aiohttp.ClientSession() as session:  # and it judges again, no gateway restart
            async with session.post(
                f"{gateway.url}/v1/judge",
                json={
                    "question": "after the restart",
                    "answer_a": "x",
                    "answer_b": "y",
                    "label": "A",
                },
            ) as r:
                assert r.status == 200, await r.text()
                after = (await r.json())["id"]
        n_calibrated, counted = await settled_counts(
            gateway.url, lambda: RedisStorage(storage_url), [*ledger.verdicts, *ledger.pending_verdicts, after]
        )
    report("redis (AOF always) SIGKILL of redis itself", ledger, result, counted)
    print(f"statuses while redis was down: {dict(ledger.statuses_after_kill)}")
    # retryable, never 500: 503 (the store is down) or 429 (requests held by the dead store's
    # reads filled the work gate, server.max_inflight_work)
    assert set(ledger.statuses_after_kill) <= {503, 429}, ledger.statuses_after_kill
    assert_clean(ledger, result, counted, n_calibrated)


async def test_postgres_gateway_sigkill_mid_stream_loses_nothing_acknowledged(tmp_path, pg_server):
    from jf_test_support.pg_server import create_database

    url = create_database(pg_server, "crash_gateway")
    await _gateway_kill_and_restart(
        tmp_path, url, lambda: PostgresStorage(url), "postgresql (fsync on), gateway SIGKILL"
    )


def _kill_postmaster(server: PgServer, ledger: Ledger) -> None:
    """``sigkill_under_load`` for a server that is not our child (pg_ctl daemonises it)."""
    ledger.inflight_at_kill = ledger.inflight
    ledger.killed = True
    server.kill()


async def test_postgres_sigkill_of_the_postmaster_keeps_acknowledged_labels(tmp_path):
    """kill -9 of the PostgreSQL postmaster under load (its backends die with it, nothing is
    checkpointed); restarted on the same data directory and port, it replays its WAL, the
    still-running gateway's pool reconnects, and every acknowledged verdict and label is there,
    with accumulators equal to a recount."""
    from jf_test_support.pg_server import pg_available, start_postgres

    if not pg_available():
        pytest.skip("PostgreSQL server binaries not found (Debian: apt-get install postgresql)")
    server = start_postgres()
    stub, stub_url = await start_stub(tmp_path, delay_s=0.02)
    try:
        with killing(stub) as procs:
            url = server.url()
            gateway = await start_gateway(tmp_path, "gateway", url, write_panel(tmp_path, stub_url))
            procs.append(gateway)
            async with load(gateway.url, workers=12) as (ledger, _stop):
                await until(ledger, verdicts=200, labels=200, max_s=12)
                _kill_postmaster(server, ledger)
                await asyncio.sleep(0.3)  # the gateway answers 503 meanwhile
            assert server.pid is None or not server.answers()
            assert not ledger.failures_before_kill, ledger.failures_before_kill[:5]

            server.start()  # crash recovery from the WAL
            await wait_ready(gateway.url, gateway.child, 30)
            result = await audit(gateway.url, ledger)
            async with aiohttp.ClientSession() as session:  # it judges again, no restart
                async with session.post(
                    f"{gateway.url}/v1/judge",
                    json={"question": "after the restart", "answer_a": "x", "answer_b": "y",
                          "label": "A"},
                ) as r:
                    assert r.status == 200, await r.text()
                    after = (await r.json())["id"]
            n_calibrated, counted = await settled_counts(
                gateway.url, lambda: PostgresStorage(url), [*ledger.verdicts, *ledger.pending_verdicts, after]
            )
    finally:
        server.stop()
    report("postgresql SIGKILL of the postmaster", ledger, result, counted)
    print(f"statuses while postgresql was down: {dict(ledger.statuses_after_kill)}")
    # retryable, never 500: 503 (the store is down) or 429 (requests held by the dead store's
    # reads filled the work gate, server.max_inflight_work)
    assert set(ledger.statuses_after_kill) <= {503, 429}, ledger.statuses_after_kill
    assert_clean(ledger, result, counted, n_calibrated)
