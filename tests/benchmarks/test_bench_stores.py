"""``benchmarks/bench_stores.py``: the throwaway stores ``bench_gateway.py --storage`` starts,
and the bytes per verdict it reports, against real servers (a redis-server, a PostgreSQL when
its binaries are installed) and a real SQLite file."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from jf_test_support.pg_server import pg_available

from judgefuse.fusion.verdict import Verdict
from judgefuse.service.storage import VerdictRecord, storage_from_url

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_stores import Store  # noqa: E402


async def save_verdicts(url: str, ids: range) -> None:
    storage = storage_from_url(url)
    await storage.open()
    try:
        for i in ids:
            vid = f"bench-{i}"
            await storage.save_verdict("default", VerdictRecord(
                id=vid, tenant="default", panel="bench", created_at=1_700_000_000.0 + i,
                verdict=Verdict(choice="A", confidence=0.9, p_a=0.9, method="majority", id=vid),
            ))
    finally:
        await storage.close()


def kinds() -> list[object]:
    return [
        "sqlite",
        pytest.param("redis", marks=pytest.mark.skipif(
            shutil.which("redis-server") is None, reason="redis-server not installed")),
        pytest.param("postgres", marks=pytest.mark.skipif(
            not pg_available(), reason="PostgreSQL server binaries not installed")),
    ]


@pytest.mark.parametrize("kind", kinds())
async def test_counts_the_stored_verdicts_and_their_bytes(kind: str, tmp_path: Path) -> None:
    store = Store(kind, str(tmp_path))
    try:
        await store.start()
        assert store.kind == kind
        await save_verdicts(store.url, range(200))
        n, size, what = await store.bytes_per_verdict()
        assert n == 200
        assert size > 0 and what
        await save_verdicts(store.url, range(200, 1200))
        n2, size2, _ = await store.bytes_per_verdict()
        assert n2 == 1200
        assert size2 > size  # the bytes grow with the verdicts stored
        assert 50 < size2 / n2 < 100_000
    finally:
        store.stop()
    if kind == "redis":
        assert store.proc is not None and store.proc.poll() is not None  # the server was stopped


@pytest.mark.skipif(not pg_available(), reason="PostgreSQL server binaries not installed")
async def test_pg_async_commit_turns_synchronous_commit_off_for_the_sessions(tmp_path: Path) -> None:
    import psycopg

    store = Store("postgres", str(tmp_path), pg_async_commit=True)
    try:
        assert store.async_commit
        async with await psycopg.AsyncConnection.connect(store.url) as conn:
            cur = await conn.execute("SHOW synchronous_commit")
            assert (await cur.fetchone()) == ("off",)
        plain = Store(store.url.split("?", 1)[0], str(tmp_path))  # a URL is used as given
        async with await psycopg.AsyncConnection.connect(plain.url) as conn:
            cur = await conn.execute("SHOW synchronous_commit")
            assert (await cur.fetchone()) == ("on",)
    finally:
        store.stop()


def test_a_url_is_used_as_given_and_async_commit_needs_postgres(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/other.sqlite3"
    store = Store(url, str(tmp_path))
    assert (store.kind, store.url, store.proc, store.pg) == ("sqlite", url, None, None)
    assert Store("rediss://example:6380/0", str(tmp_path)).kind == "redis"
    with pytest.raises(ValueError, match="--pg-async-commit needs --storage postgres"):
        Store("sqlite", str(tmp_path), pg_async_commit=True)
