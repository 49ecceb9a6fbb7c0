"""Judge backends: one factory per provider path, registered by name.

A backend factory takes a :class:`~judgefuse.judges.config.JudgeConfig` and the resolved
endpoint and key, and returns a :class:`~judgefuse.judges.transport.ChatClient`::

    @judge_backend("direct")
    def _direct(config, *, api_base, api_key, max_connections) -> ChatClient: ...

A new provider path is a new registered factory, not a branch in the judge. The factory imports
its SDK inside its body, so an unused backend costs nothing. Names are unique: registering a
taken name raises :class:`DuplicateJudgeBackend`. :func:`build_client` refuses a factory whose
result has no ``async def complete`` (checked when the client is built, not on first call).

Backends from other distributions come through the ``judgefuse.judge_backends`` entry-point
group (:mod:`judgefuse.entry_points`), loaded on the first lookup or listing; a panel's
``backend:`` accepts any registered name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Protocol, TypeVar

from pydantic import SecretStr

from judgefuse.entry_points import load_group, origin
from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.transport.request import ChatClient

__all__ = [
    "BackendFactory",
    "DuplicateJudgeBackend",
    "UnknownJudgeBackend",
    "available_backends",
    "backend_origins",
    "build_client",
    "judge_backend",
]


class BackendFactory(Protocol):
    def __call__(
        self, config: JudgeConfig, *, api_base: str | None, api_key: SecretStr | None, max_connections: int
    ) -> ChatClient: ...


class DuplicateJudgeBackend(ValueError):
    """A backend name was registered twice."""


class UnknownJudgeBackend(KeyError):
    """No backend is registered under the name."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


F = TypeVar("F", bound=Callable[..., ChatClient])
_BACKENDS: dict[str, BackendFactory] = {}
_ORIGINS: dict[str, str] = {}
ENTRY_POINT_GROUP = "judgefuse.judge_backends"


def judge_backend(name: str) -> Callable[[F], F]:
    """Register the decorated factory as backend ``name`` (a taken name is refused)."""
    if not name or name != name.strip():
        raise ValueError(f"invalid judge backend name {name!r}")

    def decorate(factory: F) -> F:
        if not callable(factory):
            raise TypeError(f"judge backend {name!r}: the factory must be callable")
        if name in _BACKENDS:
            existing = _BACKENDS[name]
            raise DuplicateJudgeBackend(
                f"judge backend {name!r} is already registered (by "
                f"{getattr(existing, '__module__', '?')}.{getattr(existing, '__qualname__', existing)!s}); "
                f"refusing to replace it with {getattr(factory, '__qualname__', factory)!s}"
            )
        _BACKENDS[name] = factory
        _ORIGINS[name] = origin(getattr(factory, "__module__", None))
        return factory

    return decorate


def available_backends() -> list[str]:
    """Registered backend names (plugins included), sorted."""
    load_group(ENTRY_POINT_GROUP)
    return sorted(_BACKENDS)


def backend_origins() -> dict[str, str]:
    """Backend name -> where it was registered (``built-in`` or a plugin's distribution)."""
    load_group(ENTRY_POINT_GROUP)
    return {name: _ORIGINS[name] for name in sorted(_BACKENDS)}


def build_client(
    name: str,
    config: JudgeConfig,
    *,
    api_base: str | None = None,
    api_key: SecretStr | None = None,
    max_connections: int | None = None,
) -> ChatClient:
    """The client of backend ``name`` for ``config``."""
    load_group(ENTRY_POINT_GROUP)
    factory = _BACKENDS.get(name)
    if factory is None:
        raise UnknownJudgeBackend(
            f"unknown judge backend {name!r}; known backends: {', '.join(available_backends())}"
        )
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


@judge_backend("direct")
def _direct_backend(
    config: JudgeConfig, *, api_base: str | None, api_key: SecretStr | None, max_connections: int
) -> ChatClient:
    from judgefuse.judges.transport.direct import DirectOpenAIClient

    if not api_base:
        raise ValueError(f"judge {config.name!r}: the direct backend needs api_base")
    return DirectOpenAIClient(api_base=api_base, api_key=api_key, max_connections=max_connections)


@judge_backend("litellm")
def _litellm_backend(
    config: JudgeConfig, *, api_base: str | None, api_key: SecretStr | None, max_connections: int
) -> ChatClient:
    from judgefuse.judges.transport.litellm_client import LiteLLMClient

    if api_key is None and api_base is not None:
        # A custom endpoint with no api_key_env is taken as unauthenticated (a local server, a
        # private vLLM); litellm's OpenAI path refuses to send without some key.
        api_key = SecretStr("none")
    return LiteLLMClient(api_base=api_base, api_key=api_key, max_connections=max_connections)
