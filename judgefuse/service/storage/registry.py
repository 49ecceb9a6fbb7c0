"""Storage backends chosen by the URL's scheme: one table from scheme to factory.

``open_storage`` and the app's settings both go through :func:`storage_from_url`, so a new
backend is one :func:`register_scheme` call, not a new
``if url.startswith(...)`` in every caller. A URL without ``://`` is a SQLite file path.

Factories receive the URL as given and the :class:`StorageOptions` (settings that only some
backends read, e.g. SQLite's ``synchronous``); they build the storage without opening it.

Backends from other distributions come through the ``judgefuse.storage`` entry-point group
(:mod:`judgefuse.entry_points`): the entry point's module calls :func:`register_scheme` when
imported. They are loaded on the first lookup or listing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from judgefuse.entry_points import load_group, origin
from judgefuse.service.storage.base import Storage
from judgefuse.service.storage.sqlite import SQLiteStorage

__all__ = [
    "StorageFactory",
    "StorageOptions",
    "register_scheme",
    "scheme_factory",
    "scheme_of",
    "scheme_origins",
    "schemes",
    "storage_from_url",
    "unregister_scheme",
]


@dataclass(frozen=True)
class StorageOptions:
    """Backend settings carried alongside the URL (each factory reads the ones it knows)."""

    sqlite_synchronous: Literal["FULL", "NORMAL"] = "FULL"
    """SQLite's ``PRAGMA synchronous`` (see :class:`SQLiteStorage`)."""
    redis_record_ttl_s: float | None = None
    """Redis: expire records that are not queued this long after their ``created_at`` (the
    service's ``retention_days``; see :class:`~judgefuse.service.storage.redis.RedisStorage`)."""


StorageFactory = Callable[[str, StorageOptions], Storage]
"""(url, options) -> an unopened storage."""

_FACTORIES: dict[str, StorageFactory] = {}
_ORIGINS: dict[str, str] = {}
ENTRY_POINT_GROUP = "judgefuse.storage"


def register_scheme(scheme: str, factory: StorageFactory, *, replace: bool = False) -> None:
    """Serve ``scheme://`` URLs with ``factory``. Registering a taken scheme again raises
    ``ValueError`` unless ``replace`` (a typo should not silently swap a backend)."""
    if not scheme or not scheme.isascii() or not scheme.replace("+", "").isalnum():
        raise ValueError(f"storage scheme must be letters, digits or '+', got {scheme!r}")
    key = scheme.lower()
    if key in _FACTORIES and not replace:
        raise ValueError(f"storage scheme {key!r} is already registered")
    _FACTORIES[key] = factory
    _ORIGINS[key] = origin(getattr(factory, "__module__", None))


def unregister_scheme(scheme: str) -> None:
    """Stop serving ``scheme://`` URLs (a no-op when it is not registered)."""
    _FACTORIES.pop(scheme.lower(), None)
    _ORIGINS.pop(scheme.lower(), None)


def schemes() -> list[str]:
    """The registered schemes (plugins included), sorted."""
    load_group(ENTRY_POINT_GROUP)
    return sorted(_FACTORIES)


def scheme_origins() -> dict[str, str]:
    """Scheme -> where it was registered (``built-in`` or a plugin's distribution)."""
    load_group(ENTRY_POINT_GROUP)
    return {scheme: _ORIGINS[scheme] for scheme in sorted(_FACTORIES)}


def scheme_factory(scheme: str) -> StorageFactory | None:
    """The factory serving ``scheme://`` (None when none does): tells aliases apart."""
    load_group(ENTRY_POINT_GROUP)
    return _FACTORIES.get(scheme.lower())


def scheme_of(url: str) -> str:
    """The URL's scheme, lower-cased; ``sqlite`` for a plain path (no ``://``)."""
    if "://" not in url:
        return "sqlite"
    return url.split("://", 1)[0].lower()


def storage_from_url(url: str, options: StorageOptions | None = None) -> Storage:
    """An unopened storage for ``url`` (``ValueError`` naming ``storage_url`` and the known
    schemes when no backend serves it)."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError("storage_url is empty")
    scheme = scheme_of(url)
    load_group(ENTRY_POINT_GROUP)
    factory = _FACTORIES.get(scheme)
    if factory is None:
        raise ValueError(
            f"storage_url: unknown scheme {scheme!r}; use one of "
            + ", ".join(f"{s}://" for s in schemes())
            + " or a file path (SQLite)"
        )
    return factory(url, options or StorageOptions())


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
