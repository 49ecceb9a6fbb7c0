"""A throwaway PostgreSQL server for tests and benchmarks: ``initdb`` into a temp dir, started
with ``pg_ctl`` on a free loopback port, password auth over TCP, stopped (or SIGKILLed) by the
caller.

Why a module and not only a fixture: the crash suite kills the postmaster itself and starts it
again on the same data directory and port, and the benchmarks start one outside pytest.

PostgreSQL refuses to run as root, so when the tests run as root the data directory is made
under ``/tmp`` (pytest's tmp dirs are private to root) and handed to the ``postgres`` user, and
every binary runs through ``runuser -u postgres``.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from jf_test_support.ports import free_port

__all__ = [
    "PASSWORD",
    "PgServer",
    "create_database",
    "find_bin",
    "pg_available",
    "reset_postgres",
    "start_postgres",
]

PASSWORD = "pg-Secr3t-xyz"
"""The superuser's password in every test server (TCP connections need it: scram-sha-256)."""

APT_HINT = (
    "PostgreSQL server binaries (or, as root, the postgres user) not found "
    "(Debian: apt-get install postgresql)"
)


def find_bin(name: str) -> str | None:
    """``name`` (initdb, pg_ctl, ...) on PATH or under /usr/lib/postgresql/*/bin (newest)."""
    found = shutil.which(name)
    if found:
        return found
    for candidate in sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def pg_available() -> bool:
    """The server binaries are there, and (as root) the ``postgres`` user to run them as."""
    if not all(find_bin(name) for name in ("initdb", "pg_ctl")):
        return False
    if os.geteuid() == 0:
        import pwd

        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return False
    return True


def _as_postgres(argv: list[str]) -> list[str]:
    """Run as the ``postgres`` user when we are root (PostgreSQL refuses root)."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


@dataclass
class PgServer:
    """One running server: its data directory, port, and the postmaster's pid."""

    datadir: Path
    port: int
    root: Path

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres:{PASSWORD}@127.0.0.1:{self.port}/{database}"

    @property
    def pid(self) -> int | None:
        """The postmaster's pid (first line of postmaster.pid), or None when not running."""
        try:
            return int((self.datadir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return True
        except OSError:
            return False

    def start(self, *, timeout_s: float = 30.0) -> None:
        """``pg_ctl start`` (waits until it accepts connections)."""
        pg_ctl = find_bin("pg_ctl")
        assert pg_ctl is not None
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=on "
            "-c max_connections=200"
        )
        subprocess.run(
            _as_postgres([pg_ctl, "-D", str(self.datadir), "-l", str(self.root / "log"),
                          "-w", "-t", str(int(timeout_s)), "-o", options, "start"]),
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )

    def kill(self) -> None:
        """SIGKILL the postmaster (a crash: no checkpoint, no clean shutdown). Its backends
        notice the postmaster is gone and exit; the next start runs crash recovery."""
        pid = self.pid
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and pid is not None and _alive(pid):
            time.sleep(0.02)
        # the orphaned backends exit on their own; wait until the port is free to restart
        while time.monotonic() < deadline and self.answers():
            time.sleep(0.05)

    def stop(self) -> None:
        """Fast shutdown; then the temp directory is removed."""
        pg_ctl = find_bin("pg_ctl")
        if pg_ctl is not None and self.pid is not None:
            subprocess.run(
                _as_postgres([pg_ctl, "-D", str(self.datadir), "-m", "immediate", "-w", "stop"]),
                check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
        shutil.rmtree(self.root, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of ours would still "exist": postgres is not our child (pg_ctl forks)
    return True


def start_postgres(*, port: int | None = None) -> PgServer:
    """initdb a fresh cluster into a new temp dir and start it on ``port`` (a free one by
    default). Raises ``RuntimeError`` with the apt hint when the binaries are missing."""
    initdb = find_bin("initdb")
    if initdb is None or not pg_available():
        raise RuntimeError(APT_HINT)
    root = Path(tempfile.mkdtemp(prefix="jf-pg-"))
    datadir = root / "data"
    pwfile = root / "pw"
    pwfile.write_text(PASSWORD + "\n")
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        shutil.chown(pwfile, "postgres", "postgres")
    subprocess.run(
        _as_postgres([initdb, "-D", str(datadir), "-U", "postgres", "--pwfile", str(pwfile),
                      "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8",
                      "--locale=C", "--no-sync"]),
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    for _attempt in range(3):
        server = PgServer(datadir=datadir, port=port or free_port(), root=root)
        try:
            server.start()
            return server
        except subprocess.CalledProcessError:
            if port is not None:
                raise
    raise RuntimeError(f"could not start PostgreSQL; see {root / 'log'}")


def create_database(server: PgServer, name: str) -> str:
    """Create database ``name`` (dropped first if it exists); its URL."""
    import psycopg

    with psycopg.connect(server.url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return server.url(name)


async def reset_postgres(url: str) -> None:
    """Empty the database: every table of ours (and every day partition) dropped, so the
    next ``open()`` creates the schema afresh."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("DROP SCHEMA public CASCADE")
        await conn.execute("CREATE SCHEMA public")


async def dump_text(storage: object) -> str:
    """Every row of every table (day partitions included) of an open ``PostgresStorage``, as
    text: what a leak test searches for a secret."""
    pool = storage.pool  # type: ignore[attr-defined]
    out: list[str] = []
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
        )
        for (table,) in await cur.fetchall():
            rows = await conn.execute(f'SELECT t::text FROM "{table}" t')
            out.extend(f"{table} {row[0]}" for row in await rows.fetchall())
    assert out, "postgresql holds no rows: the test wrote nothing?"
    return "\n".join(out)
