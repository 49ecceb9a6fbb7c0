"""Plugins found through ``importlib.metadata`` entry points, loaded once, on first need.

A plugin is an installed distribution that declares entry points in one of :data:`GROUPS`::

    [project.entry-points."judgefuse.fusion_methods"]
    trimmed = "my_plugin.fusion"

Loading an entry point imports its module; the module registers itself with the decorators
and functions judgefuse already exposes (``@fusion_method``, ``@judge_backend``,
``register_metric``, ``register_scheme``), so a plugin only imports and decorates. Each
registry (:class:`judgefuse.registry.Registry`) calls :func:`load_group` on its first lookup or
listing, so an unused group costs nothing and a plugin cannot slow down ``import judgefuse``.

A plugin that fails to import (or whose registration raises, e.g. a taken name) is recorded
with its distribution, entry point and error, and logged as a warning; it never breaks the
registry or the other plugins. :func:`origin` tells a registry, while it registers a name,
where that name comes from (``built-in`` or the distribution and entry point), for
``judgefuse plugins``.

This module imports nothing of ours, so every room, ``calibration/`` included, may use it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

__all__ = [
    "BUILTIN",
    "GROUPS",
    "PluginLoad",
    "failed_plugins",
    "load_group",
    "loaded_plugins",
    "origin",
]

log = logging.getLogger(__name__)

GROUPS = (
    "judgefuse.judge_backends",
    "judgefuse.fusion_methods",
    "judgefuse.metrics",
    "judgefuse.storage",
)
"""The entry-point groups judgefuse reads."""

BUILTIN = "built-in"


@dataclass(frozen=True)
class PluginLoad:
    """One entry point's load: where it comes from and, when it failed, why."""

    group: str
    name: str
    value: str
    distribution: str
    error: str | None = None

    @property
    def where(self) -> str:
        """``distribution (group: name = value)``: what ``judgefuse plugins`` prints."""
        return f"{self.distribution} ({self.group}: {self.name} = {self.value})"


_LOCK = threading.RLock()
_LOADS: dict[str, list[PluginLoad]] = {}
_current: list[PluginLoad] = []


def _distribution(entry: EntryPoint) -> str:
    dist = getattr(entry, "dist", None)
    if dist is None:
        return "?"
    name = dist.metadata["Name"] if dist.metadata is not None else None
    return f"{name or '?'} {dist.version}"


@contextmanager
def _loading(load: PluginLoad) -> Iterator[None]:
    _current.append(load)
    try:
        yield
    finally:
        _current.pop()


def origin(module: str | None) -> str:
    """Where a registration of an object defined in ``module`` comes from.

    ``built-in`` for judgefuse's own modules (even when a plugin's import triggered them), the
    entry point being loaded for anything else, else ``module`` (a direct call, e.g. a test).
    """
    if module == "judgefuse" or (module or "").startswith("judgefuse."):
        return BUILTIN
    if _current:
        return _current[-1].where
    return f"module {module or '?'}"


def load_group(group: str) -> list[PluginLoad]:
    """Import every entry point of ``group`` once (later calls return the first result).

    Never raises for a broken plugin: its :class:`PluginLoad` carries ``error`` instead.
    """
    with _LOCK:
        if group in _LOADS:
            return list(_LOADS[group])
        loads: list[PluginLoad] = []
        _LOADS[group] = loads  # set first: a plugin that looks its own registry up does not recurse
        for entry in sorted(entry_points(group=group), key=lambda e: (e.name, e.value)):
            load = PluginLoad(group, entry.name, entry.value, _distribution(entry))
            try:
                with _loading(load):
                    entry.load()
            except Exception as exc:  # noqa: BLE001 - any plugin failure is reported, never raised
                load = PluginLoad(group, entry.name, entry.value, load.distribution,
                                  f"{type(exc).__name__}: {exc}")
                log.warning("judgefuse plugin %s failed to load: %s", load.where, load.error)
            loads.append(load)
        return list(loads)


def loaded_plugins() -> list[PluginLoad]:
    """Every entry point loaded so far, in every group."""
    with _LOCK:
        return [load for group in GROUPS for load in _LOADS.get(group, ())]


def failed_plugins() -> list[PluginLoad]:
    """The loaded entry points that raised."""
    return [load for load in loaded_plugins() if load.error is not None]
