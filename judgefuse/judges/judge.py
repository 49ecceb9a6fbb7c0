"""A judge: a :class:`JudgeConfig`, its client stack, a concurrency cap and a time bound.

The client stack, outermost first::

    CachingClient (optional)  ->  RetryingClient (deadline = timeout_s)  ->  bounded  ->  backend

The concurrency cap (``max_concurrency``, an ``asyncio.Semaphore``) sits under the retries, so a
call waiting out a backoff does not hold a slot, and above the backend, so it bounds calls (an MP
vote's samples count one each), not votes. :meth:`Judge.vote` is bounded by ``timeout_s`` as a
whole (``asyncio.timeout``): past it the vote is invalid with error ``"timeout: ..."``.

The API key is read from the environment variable ``api_key_env`` when the judge is built and
kept as a :class:`pydantic.SecretStr`; it is never part of a repr, a vote or an error.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Self

from pydantic import SecretStr

from judgefuse.judges.circuit import CircuitBreaker, Outcome
from judgefuse.judges.config import JudgeConfig, PanelConfigError
from judgefuse.judges.modes import elicit
from judgefuse.judges.registry import build_client
from judgefuse.judges.transport.cache import ResponseCache, with_cache
from judgefuse.judges.transport.errors import BadRequest, JudgeTimeout, TransportError
from judgefuse.judges.transport.request import (
    ChatClient,
    ChatRequest,
    ChatResponse,
    Message,
)
from judgefuse.judges.transport.retry import with_retries
from judgefuse.judges.types import JudgeVote, PairwiseItem

__all__ = ["BoundedClient", "Judge", "build_circuit", "read_api_key"]


def read_api_key(config: JudgeConfig, environ: Mapping[str, str] | None = None) -> SecretStr | None:
    """The key named by ``config.api_key_env`` (None when no variable is named)."""
    if config.api_key_env is None:
        return None
    env = os.environ if environ is None else environ
    value = env.get(config.api_key_env)
    if not value:
        raise PanelConfigError(
            f"judge {config.name!r}: environment variable {config.api_key_env} (api_key_env) is not set"
        )
    return SecretStr(value)


class BoundedClient:
    """A :class:`ChatClient` that lets at most ``semaphore``'s value calls through at once."""

    def __init__(self, inner: ChatClient, semaphore: asyncio.Semaphore) -> None:
        self.inner = inner
        self.semaphore = semaphore

    async def complete(self, request: ChatRequest) -> ChatResponse:
        async with self.semaphore:
            return await self.inner.complete(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def build_circuit(config: JudgeConfig) -> CircuitBreaker | None:
    """The breaker ``config.circuit`` asks for (None when disabled)."""
    circuit = config.circuit
    if not circuit.enabled:
        return None
    return CircuitBreaker(
        config.name,
        failure_threshold=circuit.failure_threshold,
        cooldown_s=circuit.cooldown_s,
        max_cooldown_s=circuit.max_cooldown_s,
    )


class _VoteCalls:
    """What the provider did during one vote: answers, and calls that failed after retries."""

    __slots__ = ("answered", "failed", "timed_out")

    def __init__(self) -> None:
        self.answered = 0
        self.failed = 0
        self.timed_out = False

    def outcome(self, vote: JudgeVote) -> Outcome:
        if vote.valid:
            return "success"
        if self.timed_out:
            return "failure"
        if self.answered:
            return "success"  # an unreadable judgment is the model's fault, not the provider's
        return "failure" if self.failed else "neutral"


_VOTE_CALLS: contextvars.ContextVar[_VoteCalls | None] = contextvars.ContextVar("judgefuse_vote_calls", default=None)


class _OutcomeTap:
    """A :class:`ChatClient` noting each call's final outcome in the current vote's record."""

    def __init__(self, inner: ChatClient) -> None:
        self.inner = inner

    async def complete(self, request: ChatRequest) -> ChatResponse:
        calls = _VOTE_CALLS.get()
        try:
            response = await self.inner.complete(request)
        except BadRequest:
            raise  # the request's fault (or an unsupported feature): says nothing of the provider
        except TransportError:
            if calls is not None:
                calls.failed += 1
            raise
        if calls is not None:
            calls.answered += 1
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class Judge:
    """One panel member. Build with :meth:`from_config`; use ``async with`` or :meth:`aclose`.

    ``client`` injects a ready client stack (tests, custom transports): it is then used as given,
    under the concurrency cap only. Otherwise the backend's client is built on :meth:`start`
    (or on first use), wrapped with retries and, when ``config.cache`` or ``cache`` is given, a
    response cache. A local judge's endpoint (``api_base``) is given by the panel that started
    its server.

    ``circuit`` injects a breaker (tests: one with a fake clock); by default it is built from
    ``config.circuit`` (None when disabled). It is kept across :meth:`aclose`/:meth:`start`.
    """

    def __init__(
        self,
        config: JudgeConfig,
        *,
        api_key: SecretStr | None = None,
        client: ChatClient | None = None,
        cache: ResponseCache | None = None,
        circuit: CircuitBreaker | None = None,
    ) -> None:
        self.config = config
        self.circuit = circuit if circuit is not None else build_circuit(config)
        self.backend = config.resolved_backend()
        self._api_key = api_key
        self._cache = cache
        self._semaphore = asyncio.Semaphore(config.max_concurrency)
        self._client: ChatClient | None = None
        self._api_base = config.api_base
        if client is not None:
            self._client = _OutcomeTap(BoundedClient(client, self._semaphore))

    @classmethod
    def from_config(
        cls,
        config: JudgeConfig,
        *,
        environ: Mapping[str, str] | None = None,
        cache: ResponseCache | None = None,
        client: ChatClient | None = None,
    ) -> Judge:
        """A judge whose key is read now from ``config.api_key_env`` (``PanelConfigError`` if unset)."""
        return cls(config, api_key=read_api_key(config, environ), cache=cache, client=client)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def wire_model(self) -> str:
        """The model name this judge sends (see :meth:`JudgeConfig.wire_model`)."""
        return self.config.wire_model(self.backend)

    @property
    def started(self) -> bool:
        return self._client is not None

    def __repr__(self) -> str:
        return f"Judge(name={self.name!r}, model={self.config.model!r}, backend={self.backend!r}, mode={self.config.mode!r})"

    async def start(self, *, api_base: str | None = None) -> Self:
        """Build the client stack (idempotent); ``api_base`` overrides the config's (local servers)."""
        if self._client is not None:
            return self
        if self.config.external:
            return self  # its votes are posted (POST /v1/fuse): no provider client to build
        if api_base is not None:
            self._api_base = api_base
        if self.config.local is not None and self._api_base is None:
            raise RuntimeError(f"judge {self.name!r} is served by a local model: start it through its Panel")
        base = build_client(self.backend, self.config, api_base=self._api_base, api_key=self._api_key)
        retries = self.config.retries
        client: ChatClient = with_retries(
            BoundedClient(base, self._semaphore),
            attempts=retries.attempts,
            base_delay_s=retries.base_delay_s,
            max_delay_s=retries.max_delay_s,
            deadline=self.config.timeout_s,
        )
        client = _OutcomeTap(client)
        if self.config.cache or self._cache is not None:
            client = with_cache(client, self._cache)
        self._client = client
        return self

    async def aclose(self) -> None:
        """Close the client stack (the judge can be started again)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _ready_client(self) -> ChatClient:
        if self._client is None:
            await self.start()
        assert self._client is not None
        return self._client

    async def vote(self, item: PairwiseItem) -> JudgeVote:
        """This judge's vote on ``item``; failures and timeouts are invalid votes, never raised.

        With the circuit open the vote is invalid at once, without a provider call. An external
        judge is never called: its vote here is invalid (its votes come through /v1/fuse).
        """
        if self.config.external:
            return JudgeVote.invalid(
                self.name, self.config.mode,
                "external judge: its votes are posted to /v1/fuse, it cannot be called",
            )
        client = await self._ready_client()
        if self.circuit is None:
            return await self._vote(client, item, _VoteCalls())
        admission = self.circuit.admit()
        if not admission.allowed:
            return JudgeVote.invalid(self.name, self.config.mode, admission.reason, latency_s=0.0)
        calls = _VoteCalls()
        outcome: Outcome = "neutral"  # cancelled (panel deadline, client gone): no verdict on health
        try:
            vote = await self._vote(client, item, calls)
            outcome = calls.outcome(vote)
            return vote
        finally:
            self.circuit.report(admission, outcome)

    async def _vote(self, client: ChatClient, item: PairwiseItem, calls: _VoteCalls) -> JudgeVote:
        token = _VOTE_CALLS.set(calls)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.config.timeout_s):
                return await elicit(self.config, client, item, model=self.wire_model)
        except TimeoutError:
            calls.timed_out = True
            return JudgeVote.invalid(
                self.name,
                self.config.mode,
                f"timeout: no vote within {self.config.timeout_s:g}s",
                latency_s=time.perf_counter() - started,
            )
        finally:
            _VOTE_CALLS.reset(token)

    async def chat(
        self, messages: list[Message], *, temperature: float | None = None, max_tokens: int | None = None
    ) -> ChatResponse:
        """One plain call through this judge's stack (the fuser uses it); raises TransportError."""
        client = await self._ready_client()
        request = ChatRequest(
            model=self.wire_model,
            messages=messages,
            temperature=self.config.temperature if temperature is None else temperature,
            max_tokens=self.config.max_tokens if max_tokens is None else max_tokens,
            timeout_s=self.config.timeout_s,
        )
        try:
            async with asyncio.timeout(self.config.timeout_s):
                return await client.complete(request)
        except TimeoutError as exc:
            raise JudgeTimeout(f"{self.name!r}: no answer within {self.config.timeout_s:g}s") from exc
