"""Service fixtures: a real redis-server and a real PostgreSQL on free loopback ports, a tmp
SQLite file, and a ``storage`` fixture parametrised over every registered storage backend
(every behaviour test runs on each: SQLite, Redis, PostgreSQL, and any plugin's scheme
installed in the environment)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from jf_test_support.app_support import Script, scripted_stub
from jf_test_support.pg_server import (
    APT_HINT,
    PgServer,
    create_database,
    pg_available,
    reset_postgres,
    start_postgres,
)
from jf_test_support.ports import free_port

from judgefuse.service.storage import SQLiteStorage, Storage
from judgefuse.service.storage.redis import RedisStorage
from judgefuse.service.storage.registry import scheme_factory, schemes, storage_from_url


def _start_redis(workdir: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    """Start redis-server (no persistence) on a free loopback port; retries on a port race."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server not installed (apt-get install redis-server)")
    for _attempt in range(3):
        port = free_port()
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(workdir), *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60  # a bound on a stuck start, not a speed
        while time.monotonic() < deadline and proc.poll() is None and not _answers(port):
            time.sleep(0.02)
        if proc.poll() is None and _answers(port):
            return proc, port
        proc.kill()
        proc.wait()
    pytest.fail("could not start redis-server")


def _answers(port: int) -> bool:
    """True once the server accepts connections (any reply, even NOAUTH, counts)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith((b"+PONG", b"-NOAUTH", b"-ERR"))
    except OSError:
        return False


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A throwaway redis-server for the session; killed afterwards."""
    proc, port = _start_redis(tmp_path_factory.mktemp("redis"))
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def redis_with_password(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """A redis-server that requires a password: (port, password); killed afterwards."""
    password = "right-Pa55-xyz"
    workdir = tmp_path / "redis-auth"
    workdir.mkdir()
    proc, port = _start_redis(workdir, "--requirepass", password)
    try:
        yield port, password
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A throwaway PostgreSQL for the session (initdb into a temp dir, as the ``postgres``
    user when we are root, on a free loopback port); stopped and removed afterwards."""
    if not pg_available():
        pytest.skip(APT_HINT)
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_url(pg_server: PgServer) -> str:
    """The URL of a database of its own in the session's PostgreSQL (password auth)."""
    return create_database(pg_server, "judgefuse_test")


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "judgefuse.db"


def contract_backends() -> list[str]:
    """One scheme per registered storage factory, SQLite, Redis and PostgreSQL first (aliases
    such as ``rediss://``, ``unix://`` and ``postgresql://`` share a factory with another
    scheme and are not run again)."""
    first: dict[object, str] = {}
    for scheme in schemes():
        first.setdefault(scheme_factory(scheme), scheme)
    order = ("sqlite", "redis", "postgres")
    return sorted(first.values(), key=lambda scheme: (scheme not in order, scheme))


@pytest.fixture(params=contract_backends())
async def storage(request: pytest.FixtureRequest, sqlite_path: Path, tmp_path: Path) -> AsyncIterator[Storage]:
    """An open, empty storage of each registered backend. A plugin's scheme gets the URL
    ``SCHEME://<fresh tmp dir>`` (a backend that needs a server brings its own fixture)."""
    backend: Storage
    if request.param == "sqlite":
        backend = SQLiteStorage(sqlite_path)
    elif request.param == "redis":
        url = request.getfixturevalue("redis_url")
        backend = RedisStorage(url)
    elif request.param in ("postgres", "postgresql"):
        url = request.getfixturevalue("postgres_url")
        await reset_postgres(url)
        backend = storage_from_url(url)
    else:
        backend = storage_from_url(f"{request.param}://{tmp_path / request.param}")
    await backend.open()
    if isinstance(backend, RedisStorage):
        await backend.client.flushdb()
    try:
        yield backend
    finally:
        await backend.close()


@pytest.fixture
async def stub() -> AsyncIterator[tuple[Any, Script]]:
    """A running stub OpenAI server scripted per judge; (server, script)."""
    async with scripted_stub() as pair:
        yield pair
