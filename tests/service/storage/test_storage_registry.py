"""Storage chosen by URL scheme through one registry (storage.registry), as ``open_storage``
and the app's settings use it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from judgefuse.service.app import _storage_for
from judgefuse.service.settings import Settings
from judgefuse.service.storage import SQLiteStorage, Storage, StorageOptions, open_storage
from judgefuse.service.storage.redis import RedisStorage
from judgefuse.service.storage.registry import (
    DuplicateStorageScheme,
    register_scheme,
    scheme_factory,
    scheme_of,
    schemes,
    storage_from_url,
    unregister_scheme,
)


def test_builtin_schemes() -> None:
    assert schemes() == ["postgres", "postgresql", "redis", "rediss", "sqlite", "unix"]
    assert scheme_of("Redis://h:1/0") == "redis" and scheme_of("./x.db") == "sqlite"
    plain = storage_from_url("./data/x.db")
    assert isinstance(plain, SQLiteStorage) and plain.path == Path("./data/x.db")
    assert plain.synchronous == "FULL"
    absolute = storage_from_url("sqlite:////var/lib/jf.db", StorageOptions(sqlite_synchronous="NORMAL"))
    assert isinstance(absolute, SQLiteStorage) and absolute.path == Path("/var/lib/jf.db")
    assert absolute.synchronous == "NORMAL"
    for url in ("redis://127.0.0.1:6379/0", "rediss://:pw@host:6380/1", "unix:///tmp/redis.sock"):
        assert isinstance(storage_from_url(url), RedisStorage)
    from judgefuse.service.storage.postgres import PostgresStorage

    for url in ("postgresql://u:pw@db:5432/jf", "postgres://db/jf?sslmode=require"):
        store = storage_from_url(url)
        assert isinstance(store, PostgresStorage) and "pw" not in repr(store)


def test_bad_urls_name_the_setting() -> None:
    with pytest.raises(ValueError, match=r"storage_url: unknown scheme 'mysql'.*postgresql://.*redis://"):
        storage_from_url("mysql://db/x")
    with pytest.raises(ValueError, match="storage_url: a SQLite url is sqlite:///path"):
        storage_from_url("sqlite://relative.db")
    with pytest.raises(ValueError, match="storage_url is empty"):
        storage_from_url("  ")
    with pytest.raises(ValueError, match="scheme"):
        register_scheme("bad scheme", lambda url, options: storage_from_url("x.db"))


def test_a_registered_scheme_serves_open_storage(tmp_path: Path) -> None:
    seen: list[tuple[str, StorageOptions]] = []

    def factory(url: str, options: StorageOptions) -> Storage:
        seen.append((url, options))
        return SQLiteStorage(tmp_path / url.split("://", 1)[1], synchronous=options.sqlite_synchronous)

    register_scheme("memtest", factory)
    try:
        with pytest.raises(ValueError, match="already registered"):
            register_scheme("memtest", factory)
        store = open_storage("memtest://a.db", sqlite_synchronous="NORMAL")
        assert isinstance(store, SQLiteStorage) and store.path == tmp_path / "a.db"
        assert seen == [("memtest://a.db", StorageOptions(sqlite_synchronous="NORMAL"))]
        register_scheme("memtest", lambda url, options: SQLiteStorage(tmp_path / "b.db"), replace=True)
        assert open_storage("memtest://whatever").path == tmp_path / "b.db"  # type: ignore[attr-defined]
    finally:
        unregister_scheme("memtest")
    with pytest.raises(ValueError, match="unknown scheme 'memtest'"):
        open_storage("memtest://a.db")


async def test_app_storage_passes_sqlite_synchronous(tmp_path: Path, redis_url: str) -> None:
    path = tmp_path / "app.db"
    store = _storage_for(Settings(storage_url=f"sqlite:///{path}", sqlite_synchronous="NORMAL"))
    assert isinstance(store, SQLiteStorage) and store.path == path
    async with store:
        sync = await store._run("pragma", lambda c: c.execute("PRAGMA synchronous").fetchone()[0])
        assert sync == 1  # NORMAL, as configured
    assert _storage_for(Settings(storage_url=str(path))).synchronous == "FULL"  # type: ignore[attr-defined]
    remote = _storage_for(Settings(storage_url=redis_url))
    assert isinstance(remote, RedisStorage)
    async with remote:
        assert await remote.ping()


def test_the_built_in_schemes_are_registered_on_first_use() -> None:
    """In a fresh interpreter: importing the registry imports neither the built-in schemes'
    module nor the Redis and PostgreSQL backends; the first listing imports the built-ins
    (still not Redis or PostgreSQL, which their factories import when a URL of theirs opens)."""
    code = textwrap.dedent("""\
        import sys
        import judgefuse.service.storage.registry as registry
        assert "judgefuse.service.storage.builtin_schemes" not in sys.modules
        assert registry.scheme_origins()["sqlite"] == "built-in"
        assert "judgefuse.service.storage.builtin_schemes" in sys.modules
        assert "judgefuse.service.storage.redis" not in sys.modules
        assert "judgefuse.service.storage.postgres" not in sys.modules
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[3],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_schemes_are_lower_case_keys_and_a_taken_one_names_both_sides() -> None:
    register_scheme("MemCase", _memcase)
    try:
        assert "memcase" in schemes() and scheme_factory("MEMCASE") is _memcase
        with pytest.raises(DuplicateStorageScheme, match=r"storage scheme 'memcase' is already registered \(by "):
            register_scheme("memcase", _memcase)
    finally:
        unregister_scheme("MEMCASE")
    assert scheme_factory("memcase") is None
    with pytest.raises(DuplicateStorageScheme, match=r"'sqlite' is already registered \(by built-in\)"):
        register_scheme("SQLite", _memcase)


def _memcase(url: str, options: StorageOptions) -> Storage:
    return SQLiteStorage(url.split("://", 1)[1])
