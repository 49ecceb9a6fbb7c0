"""Storage backends chosen by the URL's scheme: one table from scheme to factory.

``open_storage`` and the app's settings both go through :func:`storage_from_url`, so a new
backend is one :func:`register_scheme` call, not a new
``if url.startswith(...)`` in every caller. A URL without ``://`` is a SQLite file path.

Factories receive the URL as given and the :class:`StorageOptions` (settings that only some
backends read, e.g. SQLite's ``synchronous``); they build the storage without opening it.

The table is a :class:`judgefuse.registry.Registry` (:data:`SCHEMES`) and the functions here are
thin wrappers on it: schemes are keys lower-cased (``Redis://`` is ``redis://``), made of
letters, digits or ``+``; a taken scheme is refused with :class:`DuplicateStorageScheme` (a
``ValueError``) unless ``replace=True``. The built-in schemes (``sqlite``, ``redis``, ``rediss``,
``unix``, ``postgresql``, ``postgres``) are registered by :mod:`.builtin_schemes`, imported by
path on the first lookup or listing, so importing this module imports no backend.

Backends from other distributions come through the ``judgefuse.storage`` entry-point group
(:mod:`judgefuse.entry_points`): the entry point's module calls :func:`register_scheme` when
imported. They are loaded on the first lookup or listing, after the built-ins.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from judgefuse.registry import DuplicateEntry, Registry, UnknownEntry

if TYPE_CHECKING:
    from judgefuse.service.storage.base import Storage

__all__ = [
    "ENTRY_POINT_GROUP",
    "SCHEMES",
    "DuplicateStorageScheme",
    "StorageFactory",
    "StorageOptions",
    "UnknownStorageScheme",
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
    """SQLite's ``PRAGMA synchronous`` (see :class:`~judgefuse.service.storage.sqlite.SQLiteStorage`)."""
    redis_record_ttl_s: float | None = None
    """Redis: expire records that are not queued this long after their ``created_at`` (the
    service's ``retention_days``; see :class:`~judgefuse.service.storage.redis.RedisStorage`)."""


StorageFactory = Callable[[str, StorageOptions], "Storage"]
"""(url, options) -> an unopened storage."""

ENTRY_POINT_GROUP = "judgefuse.storage"


class DuplicateStorageScheme(DuplicateEntry):
    """A scheme was registered twice (a ``ValueError``)."""


class UnknownStorageScheme(UnknownEntry):
    """No backend is registered under the scheme (an input error and a ``KeyError``), for
    :meth:`SCHEMES.get <judgefuse.registry.Registry.get>`; :func:`storage_from_url` raises a
    ``ValueError`` naming ``storage_url`` instead."""


def _scheme_rule(scheme: str) -> str | None:
    if not isinstance(scheme, str) or not scheme or not scheme.isascii() or not scheme.replace("+", "").isalnum():
        return f"storage scheme must be letters, digits or '+', got {scheme!r}"
    return None


SCHEMES: Registry[StorageFactory] = Registry(
    "storage scheme", group=ENTRY_POINT_GROUP, builtins=("judgefuse.service.storage.builtin_schemes",),
    name_rule=_scheme_rule, normalise=str.lower,
    duplicate=DuplicateStorageScheme, unknown=UnknownStorageScheme,
)
"""Scheme (lower case) -> factory ``(url, options) -> an unopened Storage``."""


def register_scheme(scheme: str, factory: StorageFactory, *, replace: bool = False) -> None:
    """Serve ``scheme://`` URLs with ``factory``. Registering a taken scheme again raises
    :class:`DuplicateStorageScheme` (a ``ValueError``) unless ``replace`` (a typo should not
    silently swap a backend); a scheme that is not letters, digits or ``+`` raises
    ``ValueError``."""
    SCHEMES.register(scheme, factory, replace=replace)


def unregister_scheme(scheme: str) -> None:
    """Stop serving ``scheme://`` URLs (a no-op when it is not registered)."""
    SCHEMES.unregister(scheme)


def schemes() -> list[str]:
    """The registered schemes (plugins included), sorted."""
    return SCHEMES.names()


def scheme_origins() -> dict[str, str]:
    """Scheme -> where it was registered (``built-in`` or a plugin's distribution), sorted."""
    return SCHEMES.origins()


def scheme_factory(scheme: str) -> StorageFactory | None:
    """The factory serving ``scheme://`` (None when none does): tells aliases apart."""
    return SCHEMES.find(scheme)


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
    factory = SCHEMES.find(scheme)
    if factory is None:
        raise ValueError(
            f"storage_url: unknown scheme {scheme!r}; use one of "
            + ", ".join(f"{s}://" for s in schemes())
            + " or a file path (SQLite)"
        )
    return factory(url, options or StorageOptions())
