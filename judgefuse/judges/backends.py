"""The judge-backend table: backend name -> client factory, with each name's origin.

The table sits below :mod:`judgefuse.judges.config` and knows nothing of a judge's
configuration: a panel's ``backend:`` is validated against :func:`available_backends` when the
configuration is read, and :mod:`judgefuse.judges.registry` (above the configuration) builds a
client from a :class:`~judgefuse.judges.config.JudgeConfig` with the factory found here. So
imports run one way: registry -> config -> backends.

The built-in factories (``direct``, ``litellm``) live in :mod:`.builtin_backends`, imported by
path on the first lookup or listing (a :class:`judgefuse.registry.Registry`'s lazy built-ins);
backends from other distributions come through the ``judgefuse.judge_backends`` entry-point
group. Names are unique: registering a taken name raises :class:`DuplicateJudgeBackend`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from judgefuse.registry import DuplicateEntry, Registry, UnknownEntry

if TYPE_CHECKING:  # the transport package pulls in aiohttp: reading a panel config need not
    from judgefuse.judges.transport.request import ChatClient

__all__ = [
    "BACKENDS",
    "ENTRY_POINT_GROUP",
    "DuplicateJudgeBackend",
    "UnknownJudgeBackend",
    "available_backends",
    "backend_origins",
    "judge_backend",
]

ENTRY_POINT_GROUP = "judgefuse.judge_backends"


class DuplicateJudgeBackend(DuplicateEntry):
    """A backend name was registered twice (a ``ValueError``)."""


class UnknownJudgeBackend(UnknownEntry):
    """No backend is registered under the name (an input error and a ``KeyError``)."""


F = TypeVar("F", bound="Callable[..., ChatClient]")

BACKENDS: Registry[Callable[..., ChatClient]] = Registry(
    "judge backend", group=ENTRY_POINT_GROUP, builtins=("judgefuse.judges.builtin_backends",),
    duplicate=DuplicateJudgeBackend, unknown=UnknownJudgeBackend,
)
"""Backend name -> factory ``(config, *, api_base, api_key, max_connections) -> ChatClient``."""


def judge_backend(name: str) -> Callable[[F], F]:
    """Register the decorated factory as backend ``name`` (a taken name is refused)."""
    BACKENDS.check_name(name)

    def decorate(factory: F) -> F:
        if not callable(factory):
            raise TypeError(f"judge backend {name!r}: the factory must be callable")
        BACKENDS.register(name, factory)
        return factory

    return decorate


def available_backends() -> list[str]:
    """Registered backend names (plugins included), sorted."""
    return BACKENDS.names()


def backend_origins() -> dict[str, str]:
    """Backend name -> where it was registered (``built-in`` or a plugin's distribution)."""
    return BACKENDS.origins()
