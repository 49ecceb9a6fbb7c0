"""The built-in storage schemes: ``sqlite`` (and a plain file path), ``redis``/``rediss``/``unix``
and ``postgresql``/``postgres``.

Imported by path on the first lookup or listing of :data:`~.registry.SCHEMES` (a
:class:`judgefuse.registry.Registry`'s lazy built-ins), never by the registry module itself: this
module imports the registry to register, so the registry importing it back would be a circle,
and every import of the registry would pay for SQLite. The Redis and PostgreSQL factories
import their backend (and its driver) only when a URL of theirs is opened.
"""

from __future__ import annotations

from judgefuse.service.storage.base import Storage
from judgefuse.service.storage.registry import StorageOptions, register_scheme
from judgefuse.service.storage.sqlite import SQLiteStorage

__all__: list[str] = []


def _sqlite(url: str, options: StorageOptions) -> Storage:
    if "://" not in url:
        return SQLiteStorage(url, synchronous=options.sqlite_synchronous)
    rest = url.split("://", 1)[1]
    if not rest.startswith("/") or len(rest) < 2:
        raise ValueError("storage_url: a SQLite url is sqlite:///path (three slashes, then the path)")
    return SQLiteStorage(rest[1:], synchronous=options.sqlite_synchronous)


def _redis(url: str, options: StorageOptions) -> Storage:
    from judgefuse.service.storage.redis import RedisStorage  # needs the redis package

    return RedisStorage(url, record_ttl_s=options.redis_record_ttl_s)


def _postgres(url: str, options: StorageOptions) -> Storage:
    from judgefuse.service.storage.postgres import PostgresStorage  # needs psycopg + psycopg_pool

    return PostgresStorage(url)


register_scheme("sqlite", _sqlite)
for _scheme in ("redis", "rediss", "unix"):
    register_scheme(_scheme, _redis)
for _scheme in ("postgresql", "postgres"):
    register_scheme(_scheme, _postgres)
