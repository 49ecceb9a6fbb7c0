"""One registry type for every extension point: names to entries, with their origins.

Judge backends, fusion methods, metrics and storage schemes are each a
:class:`Registry`: a table from a name to an entry (a factory, a declaration) that built-in
modules and plugins fill, and that the rest of judgefuse only reads. Each room keeps its own
decorator or function (``@fusion_method``, ``@judge_backend``, ``register_metric``,
``register_scheme``) as a thin wrapper, so the rules live here once:

* **names**: a :data:`NameRule` says what a valid name is (:func:`plain_name` by default), and an
  optional ``normalise`` maps a name to its key (e.g. lower case for URL schemes);
* **duplicates** are refused with the registry's :class:`DuplicateEntry` subclass naming both
  sides (a typo must not silently replace a method); ``replace=True`` says it is meant;
* **origins**: each entry remembers where it was registered from (``built-in`` or the plugin's
  distribution and entry point, see :func:`judgefuse.entry_points.origin`), for
  ``judgefuse plugins``;
* **plugins** come from the registry's entry-point group, loaded on the first lookup or listing;
* **lazy built-ins**: the registry names its built-in modules by import path and imports them
  on the first lookup or listing, never at its own import. Built-in modules import their
  registry to register themselves, so a registry that imported them back would tie each room
  into an import circle, and would make every import of the registry pay for every built-in.

A registration from outside judgefuse (a plugin, a test) imports the built-ins first, so a
plugin that takes a built-in's name is the one refused, and built-ins come first in a listing
in registration order.

This module imports only :mod:`judgefuse.entry_points` and :mod:`judgefuse.errors`, so every
room, ``calibration/`` included, may use it.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Sequence
from typing import Generic, Literal, TypeVar

from judgefuse.entry_points import BUILTIN, load_group, origin
from judgefuse.errors import InputError, JudgefuseError

__all__ = [
    "DuplicateEntry",
    "NameRule",
    "Registry",
    "UnknownEntry",
    "identifier_name",
    "plain_name",
]

T = TypeVar("T")

NameRule = Callable[[str], "str | None"]
"""``name -> None`` when the name is valid, else the whole message saying why it is not."""


class DuplicateEntry(JudgefuseError, ValueError):
    """A name was registered twice: a mistake of the code that registers, not of the user."""


class UnknownEntry(InputError, KeyError):
    """No entry is registered under the name: the user named something that does not exist."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


def plain_name(kind: str) -> NameRule:
    """The rule "not empty, no leading or trailing whitespace" for names of ``kind``."""

    def rule(name: str) -> str | None:
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            return f"invalid {kind} name {name!r}"
        return None

    return rule


def identifier_name(kind: str) -> NameRule:
    """The rule "a Python identifier" (a name that is also a JSON key, a column, a field prefix)."""

    def rule(name: str) -> str | None:
        if not isinstance(name, str) or not name.isidentifier():
            return f"{kind} name must be an identifier, got {name!r}"
        return None

    return rule


def _describe(entry: object, module: str | None) -> str:
    qualname = getattr(entry, "__qualname__", None)
    if qualname is not None:
        return f"{module or '?'}.{qualname}"
    return f"a {type(entry).__name__} from {module or '?'}"


class Registry(Generic[T]):
    """Names to entries of one kind, with their origins, built-ins and plugins (module docstring).

    ``kind`` names an entry in messages (``"fusion method"``); ``known`` is the plural the
    unknown-name message lists them under (default: the last word of ``kind`` plus ``s``).
    ``order`` is how :meth:`names` lists them: sorted, or in registration order (built-ins in
    their declared order first). ``duplicate`` and ``unknown`` are the exceptions raised for a
    taken and a missing name (subclasses of :class:`DuplicateEntry` and :class:`UnknownEntry`).
    """

    def __init__(
        self,
        kind: str,
        *,
        group: str | None = None,
        builtins: Sequence[str] = (),
        name_rule: NameRule | None = None,
        normalise: Callable[[str], str] | None = None,
        duplicate: type[DuplicateEntry] = DuplicateEntry,
        unknown: type[UnknownEntry] = UnknownEntry,
        known: str | None = None,
        order: Literal["sorted", "registered"] = "sorted",
    ) -> None:
        self.kind = kind
        self.group = group
        """The entry-point group plugins declare their entries in (None: no plugins)."""
        self.builtins = tuple(builtins)
        """Import paths of the modules that register the built-in entries."""
        self._name_rule = name_rule or plain_name(kind)
        self._normalise = normalise
        self._duplicate = duplicate
        self._unknown = unknown
        self._known = known or f"{kind.split()[-1]}s"
        self._order = order
        self._entries: dict[str, T] = {}
        self._origins: dict[str, str] = {}
        self._lock = threading.Lock()
        """Guards the tables; held for a check and a write, never while importing or loading."""
        self._import_lock = threading.RLock()
        """Held while the built-in modules import (a module that registers never waits on it)."""
        self._builtins_loaded = not self.builtins
        self._importing = False

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, group={self.group!r}, {len(self._entries)} entries)"

    # -- names ----------------------------------------------------------------------------------

    def check_name(self, name: str) -> str:
        """The key ``name`` is registered under; ``ValueError`` when the name rule refuses it."""
        problem = self._name_rule(name)
        if problem is not None:
            raise ValueError(problem)
        return self._key(name)

    def _key(self, name: str) -> str:
        return self._normalise(name) if self._normalise is not None else name

    # -- registration ---------------------------------------------------------------------------

    def register(self, name: str, entry: T, *, module: str | None = None, replace: bool = False) -> T:
        """Add ``entry`` under ``name`` and return it.

        ``module`` is where the entry is defined (default: its ``__module__``); it decides the
        origin. A taken name raises the registry's duplicate error unless ``replace``.
        """
        key = self.check_name(name)
        module = module if module is not None else getattr(entry, "__module__", None)
        where = origin(module)
        if where != BUILTIN:
            self._load_builtins()  # a plugin or a test comes after the built-ins, never before
        with self._lock:
            if key in self._entries and not replace:
                raise self._duplicate(
                    f"{self.kind} {key!r} is already registered (by {self._origins[key]}); "
                    f"refusing to replace it with {_describe(entry, module)}"
                )
            self._entries[key] = entry
            self._origins[key] = where
        return entry

    def unregister(self, name: str) -> None:
        """Remove an entry (a no-op when absent): for tests, and for replacing a plugin's."""
        key = self._key(name)
        with self._lock:
            self._entries.pop(key, None)
            self._origins.pop(key, None)

    # -- loading --------------------------------------------------------------------------------

    def _load_builtins(self) -> None:
        if self._builtins_loaded:
            return
        with self._import_lock:
            if self._importing or self._builtins_loaded:
                return  # re-entered while a built-in module imports, or another thread did it
            self._importing = True
            try:
                for path in self.builtins:
                    importlib.import_module(path)
            finally:
                self._importing = False
            self._builtins_loaded = True

    def load(self) -> None:
        """Import the built-in modules (once) and the plugins of the entry-point group (once).

        Every lookup and listing calls it; call it directly to fail early on a broken install.
        """
        self._load_builtins()
        if self.group is not None and not self._importing:  # plugins wait for every built-in
            load_group(self.group)

    # -- lookups --------------------------------------------------------------------------------

    def unknown_error(self, name: str) -> UnknownEntry:
        """The error for a name nobody registered, listing the known names."""
        return self._unknown(f"unknown {self.kind} {name!r}; known {self._known}: {', '.join(self.names())}")

    def get(self, name: str) -> T:
        """The entry registered as ``name``; the registry's unknown error when there is none."""
        self.load()
        key = self._key(name)
        with self._lock:
            if key in self._entries:
                return self._entries[key]
        raise self.unknown_error(name)

    def find(self, name: str) -> T | None:
        """The entry registered as ``name``, None when there is none."""
        self.load()
        with self._lock:
            return self._entries.get(self._key(name))

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        self.load()
        with self._lock:
            return self._key(name) in self._entries

    def names(self) -> list[str]:
        """Every registered name (plugins included), sorted or in registration order."""
        self.load()
        return self._snapshot()[0]

    def entries(self) -> list[T]:
        """Every registered entry, in the order of :meth:`names`."""
        self.load()
        names, entries, _ = self._snapshot()
        return [entries[name] for name in names]

    def origins(self) -> dict[str, str]:
        """Name -> where it was registered (``built-in`` or a plugin's distribution), in the
        order of :meth:`names`."""
        self.load()
        names, _, origins = self._snapshot()
        return {name: origins[name] for name in names}

    def _snapshot(self) -> tuple[list[str], dict[str, T], dict[str, str]]:
        with self._lock:
            entries, origins = dict(self._entries), dict(self._origins)
        names = list(entries)
        return (sorted(names) if self._order == "sorted" else names), entries, origins
