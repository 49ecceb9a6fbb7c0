"""The store a benchmark's gateway writes to, chosen by ``--storage``, and its bytes per verdict.

Why a module: ``bench_gateway.py`` starts its own servers and measures HTTP; starting a
throwaway redis-server or PostgreSQL and reading back how much room the verdicts take is a
separate job, and any other benchmark that wants ``--storage`` can reuse it.

``--storage`` is a URL (``sqlite:///path``, ``redis://...``, ``postgresql://...``) or one of
the words ``sqlite`` (a file in the run's temp dir), ``redis`` (a throwaway redis-server, AOF
``everysec`` as in deploy/) or ``postgres`` (a throwaway PostgreSQL, fsync on, started as the
tests start it by ``tests/jf_test_support/pg_server.py``; ``pg_async_commit`` turns
``synchronous_commit`` off for the gateway's sessions, the analogue of SQLite ``NORMAL`` and
Redis ``everysec``).
"""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
WORDS = ("sqlite", "redis", "postgres")
"""The ``--storage`` values that start (or make) a throwaway store."""
KIND_OF_SCHEME = {"postgresql": "postgres", "rediss": "redis", "unix": "redis"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def sqlite_url(folder: str | Path) -> str:
    """The gateway's SQLite file in ``folder`` (one per gateway process)."""
    return f"sqlite:///{folder}/gateway.sqlite3"


class Store:
    """The gateway's store for this run: its URL, the server started for it (if any), and how
    many bytes it holds (for bytes per verdict). ``stop()`` ends the server it started."""

    def __init__(self, spec: str, workdir: str, pg_async_commit: bool = False) -> None:
        kind = spec if spec in WORDS else spec.split("://", 1)[0].lower()
        self.kind = KIND_OF_SCHEME.get(kind, kind)
        if pg_async_commit and self.kind != "postgres":
            raise ValueError("--pg-async-commit needs --storage postgres (or a postgresql:// URL)")
        self.proc: subprocess.Popen[bytes] | None = None
        self.pg: Any = None
        self.baseline = 0
        if spec == "sqlite":
            self.url = sqlite_url(workdir)
        elif spec == "redis":
            port = _free_port()
            self.proc = subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--dir", workdir, "--appendonly", "yes", "--appendfsync", "everysec",
                 "--maxmemory-policy", "noeviction"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            self.url = f"redis://127.0.0.1:{port}/0"
        elif spec == "postgres":
            sys.path.insert(0, str(REPO / "tests"))
            from jf_test_support.pg_server import start_postgres

            self.pg = start_postgres()
            self.url = self.pg.url()
        else:
            self.url = spec
        if pg_async_commit:  # per session: commits stop waiting for the WAL flush
            self.url += ("&" if "?" in self.url else "?") + "options=-c%20synchronous_commit%3Doff"

    @property
    def async_commit(self) -> bool:
        return "synchronous_commit" in self.url

    async def _redis_memory(self) -> int:
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(self.url)
        try:
            for _ in range(100):  # the server may still be starting
                try:
                    return int((await client.info("memory"))["used_memory"])
                except Exception:
                    await asyncio.sleep(0.1)
            raise RuntimeError(f"redis at {self.url} did not answer")
        finally:
            await client.aclose()

    async def start(self) -> None:
        """Wait for a started redis-server and note its memory before any verdict."""
        if self.kind == "redis":
            self.baseline = await self._redis_memory()

    async def bytes_per_verdict(self) -> tuple[int, int, str]:
        """(verdict records, bytes, what the bytes are)."""
        if self.kind == "sqlite":
            path = Path(self.url.split("://", 1)[1][1:])
            with sqlite3.connect(path) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                n = conn.execute("SELECT count(*) FROM verdicts").fetchone()[0]
                size = conn.execute(
                    "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"
                ).fetchone()[0]
            return n, size, "database file (every table and index)"
        if self.kind == "redis":
            import redis.asyncio as aioredis

            client = aioredis.Redis.from_url(self.url)
            try:
                n = 0
                async for _key in client.scan_iter(match="jf:{*}:v:*", count=1000):
                    n += 1
            finally:
                await client.aclose()
            used = await self._redis_memory() - self.baseline
            return n, used, "used_memory growth (RAM: records, indexes, accumulators)"
        if self.kind != "postgres":
            raise ValueError(f"bytes per verdict: no measure for a {self.kind!r} store")
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await conn.execute("CHECKPOINT")
            cur = await conn.execute("SELECT count(*) FROM verdicts")
            n = (await cur.fetchone())[0]  # type: ignore[index]
            cur = await conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(relid)), 0) "
                "FROM pg_partition_tree('verdicts')"
            )
            records = (await cur.fetchone())[0]  # type: ignore[index]
            cur = await conn.execute("SELECT pg_total_relation_size('verdict_ids')")
            ids = (await cur.fetchone())[0]  # type: ignore[index]
        return n, int(records) + int(ids), (
            f"pg_total_relation_size of the verdict partitions ({int(records):,} B, with TOAST "
            f"and indexes) + verdict_ids ({int(ids):,} B)"
        )

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.pg is not None:
            self.pg.stop()
