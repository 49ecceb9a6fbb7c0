"""Judge backends: one factory per provider path, registered by name.

A backend factory takes a :class:`~judgefuse.judges.config.JudgeConfig` and the resolved
endpoint and key, and returns a :class:`~judgefuse.judges.transport.ChatClient`::

    @judge_backend("direct")
    def _direct(config, *, api_base, api_key, max_connections) -> ChatClient: ...

A new provider path is a new registered factory, not a branch in the judge. The factory imports
its SDK inside its body, so an unused backend costs nothing. Names are unique: registering a
taken name raises :class:`DuplicateJudgeBackend`. :func:`build_client` refuses a factory whose
result has no ``async def complete`` (checked when the client is built, not on first call).

This module is the backends' public face. The table itself (:data:`~.backends.BACKENDS`, the
decorator, the listings) lives in :mod:`judgefuse.judges.backends`, below the configuration,
which validates a panel's ``backend:`` against it; this module builds a client from a
:class:`~judgefuse.judges.config.JudgeConfig`, so it stands above both and imports run one way.
The built-in factories are in :mod:`judgefuse.judges.builtin_backends`.

Backends from other distributions come through the ``judgefuse.judge_backends`` entry-point
group (:mod:`judgefuse.entry_points`), loaded on the first lookup or listing; a panel's
``backend:`` accepts any registered name.
"""

from __future__ import annotations

import inspect
from typing import Protocol

from pydantic import SecretStr

from judgefuse.judges.backends import (
    BACKENDS,
    ENTRY_POINT_GROUP,
    DuplicateJudgeBackend,
    UnknownJudgeBackend,
    available_backends,
    backend_origins,
    judge_backend,
)
from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.transport.request import ChatClient

__all__ = [
    "ENTRY_POINT_GROUP",
    "BackendFactory",
    "DuplicateJudgeBackend",
    "UnknownJudgeBackend",
    "available_backends",
    "backend_origins",
    "build_client",
    "judge_backend",
]


class BackendFactory(Protocol):
    """What :func:`judge_backend` registers."""

    def __call__(
        self, config: JudgeConfig, *, api_base: str | None, api_key: SecretStr | None, max_connections: int
    ) -> ChatClient: ...


def build_client(
    name: str,
    config: JudgeConfig,
    *,
    api_base: str | None = None,
    api_key: SecretStr | None = None,
    max_connections: int | None = None,
) -> ChatClient:
    """The client of backend ``name`` for ``config`` (:class:`UnknownJudgeBackend` lists the
    known names)."""
    factory = BACKENDS.get(name)
    client = factory(
        config,
        api_base=api_base,
        api_key=api_key,
        max_connections=max_connections or config.max_concurrency,
    )
    complete = getattr(client, "complete", None)
    if complete is None or not inspect.iscoroutinefunction(complete):
        raise TypeError(f"judge backend {name!r} returned {type(client).__name__}, which has no async complete()")
    if not inspect.iscoroutinefunction(getattr(client, "aclose", None)):
        raise TypeError(f"judge backend {name!r} returned {type(client).__name__}, which has no async aclose()")
    return client
