"""A judge: a :class:`JudgeConfig`, its client stack, a fair concurrency cap and a time bound.

The client stack, outermost first::

    CachingClient (optional)  ->  RetryingClient (deadline = timeout_s)  ->  BoundedClient  ->  backend

The concurrency cap (``max_concurrency``, a :class:`~judgefuse.judges.fair_limiter.FairLimiter`)
sits under the retries, so a call waiting out a backoff does not hold a slot, and above the
backend, so it bounds calls (an MP vote's samples count one each), not votes. Slots are shared
fairly between tenants (``Judge.vote(item, tenant=...)``): one tenant's burst queues behind
itself, not in front of others.

**Queued time is not judge time.** :meth:`Judge.vote` is bounded by ``timeout_s``, counted from
the moment the vote's first provider call got its slot (the vote's :class:`Deadline` set then),
and so is the retries' deadline: past it the vote is invalid with error ``"timeout: ..."``. The
wait for a slot is bounded by the caller's deadline (the panel's ``deadline_s``, which cancels
the vote).

**The circuit breaker hears only what the provider did** (see :meth:`_VoteCalls.outcome`): a
transport failure of an attempt that reached the provider, or the vote's timeout cutting a call
in flight, is a failure; a vote cancelled by the caller's deadline, or timed out while its
remaining calls were still queued for a slot, is neutral.

The API key is read from the environment variable ``api_key_env`` when the judge is built and
kept as a :class:`pydantic.SecretStr`; it is never part of a repr, a vote or an error. Every vote
leaves through :func:`~judgefuse.judges.finalise.finalise_vote` (the key and its encodings
scrubbed from all its text, the raw reply bounded by ``max_raw_bytes``), and :meth:`Judge.chat`
scrubs the completion texts it returns (the fuser's reply).
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
from judgefuse.judges.deadline import Deadline
from judgefuse.judges.fair_limiter import FairLimiter
from judgefuse.judges.finalise import finalise_vote
from judgefuse.judges.modes import elicit
from judgefuse.judges.registry import build_client
from judgefuse.judges.structured_output import call_structured
from judgefuse.judges.transport.cache import ResponseCache, with_cache
from judgefuse.judges.transport.errors import BadRequest, JudgeTimeout, TransportError
from judgefuse.judges.transport.redaction import scrub_response
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


class _VoteCalls:
    """One vote (or one plain call) as the provider saw it: whose it is, when its provider clock
    started, and what the provider did. Shared through :data:`_VOTE_CALLS` with the calls the
    vote makes (MP samples and position-swap orders run in child tasks: the same record)."""

    __slots__ = ("answered", "cut_in_flight", "failed", "started_at", "tenant", "timeout", "timeout_s")

    def __init__(self, tenant: str | None = None, timeout_s: float | None = None) -> None:
        self.tenant = tenant
        self.timeout_s = timeout_s
        self.timeout: Deadline | None = None
        self.started_at: float | None = None
        """``time.monotonic()`` when the first call got its slot (None: none has yet)."""
        self.answered = 0
        self.failed = 0
        self.cut_in_flight = 0
        """Calls that held a slot when they were cancelled (by the vote's timeout or the caller)."""

    def call_started(self) -> None:
        """A call got its slot: the first one starts the vote's clock."""
        if self.started_at is not None:
            return
        self.started_at = time.monotonic()
        if self.timeout is not None and self.timeout_s is not None:
            self.timeout.reschedule(asyncio.get_running_loop().time() + self.timeout_s)

    def outcome(self, vote: JudgeVote, *, timed_out: bool) -> Outcome:
        if vote.valid:
            return "success"
        if timed_out and self.cut_in_flight:
            return "failure"  # the provider held a call past the vote's timeout
        if self.answered:
            return "success"  # an unreadable judgment is the model's fault, not the provider's
        return "failure" if self.failed else "neutral"  # neutral: timed out while still queued


_VOTE_CALLS: contextvars.ContextVar[_VoteCalls | None] = contextvars.ContextVar("judgefuse_vote_calls", default=None)


def _provider_clock_start() -> float | None:
    """Where the current vote's deadline is counted from (the retry layer's ``deadline_start``)."""
    calls = _VOTE_CALLS.get()
    return None if calls is None else calls.started_at


class BoundedClient:
    """A :class:`ChatClient` that lets at most ``limiter.capacity`` calls through at once, shared
    fairly between the tenants of the current votes, and notes in the vote's record what each
    call that reached the provider did."""

    def __init__(self, inner: ChatClient, limiter: FairLimiter) -> None:
        self.inner = inner
        self.limiter = limiter

    async def complete(self, request: ChatRequest) -> ChatResponse:
        calls = _VOTE_CALLS.get()
        limiter = self.limiter
        # acquire/release written out, not ``async with limiter.slot()``: the generator-based
        # context manager cost ~5 us a call on the judge call's hot path
        if calls is None:
            await limiter.acquire(None)
            try:
                return await self.inner.complete(request)
            finally:
                limiter.release(None)
        tenant = calls.tenant
        await limiter.acquire(tenant)
        try:
            calls.call_started()
            try:
                response = await self.inner.complete(request)
            except BadRequest:
                raise  # the request's fault (or an unsupported feature): says nothing of the provider
            except TransportError:
                calls.failed += 1
                raise
            except asyncio.CancelledError:
                calls.cut_in_flight += 1
                raise
            calls.answered += 1
            return response
        finally:
            limiter.release(tenant)

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
        self.limiter = FairLimiter(config.max_concurrency, per_tenant=config.max_concurrency_per_tenant)
        """The fair concurrency cap (``max_concurrency`` calls at once, shared between tenants)."""
        self._client: ChatClient | None = None
        self._api_base = config.api_base
        if client is not None:
            self._client = BoundedClient(client, self.limiter)

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
            BoundedClient(base, self.limiter),
            attempts=retries.attempts,
            base_delay_s=retries.base_delay_s,
            max_delay_s=retries.max_delay_s,
            deadline=self.config.timeout_s,
            deadline_start=_provider_clock_start,
        )
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

    async def vote(self, item: PairwiseItem, *, tenant: str | None = None) -> JudgeVote:
        """This judge's vote on ``item``; failures and timeouts are invalid votes, never raised.

        ``tenant`` is whose request this is: the judge's concurrency slots are shared fairly
        between tenants (None: the one anonymous tenant). With the circuit open the vote is
        invalid at once, without a provider call. An external judge is never called: its vote
        here is invalid (its votes come through /v1/fuse).
        """
        if self.config.external:
            return JudgeVote.invalid(
                self.name, self.config.mode,
                "external judge: its votes are posted to /v1/fuse, it cannot be called",
            )
        client = await self._ready_client()
        calls = _VoteCalls(tenant, self.config.timeout_s)
        if self.circuit is None:
            vote, _ = await self._vote(client, item, calls)
            return vote
        admission = self.circuit.admit()
        if not admission.allowed:
            return self._finalise(JudgeVote.invalid(self.name, self.config.mode, admission.reason, latency_s=0.0))
        outcome: Outcome = "neutral"  # cancelled (panel deadline, client gone): no verdict on health
        try:
            vote, timed_out = await self._vote(client, item, calls)
            outcome = calls.outcome(vote, timed_out=timed_out)
            return vote
        finally:
            self.circuit.report(admission, outcome)

    def _finalise(self, vote: JudgeVote) -> JudgeVote:
        """Every vote leaves through here: scrubbed of this judge's key, raw reply bounded."""
        secret = self._api_key.get_secret_value() if self._api_key is not None else None
        return finalise_vote(vote, secrets=(secret,), max_raw_bytes=self.config.max_raw_bytes)

    async def _vote(self, client: ChatClient, item: PairwiseItem, calls: _VoteCalls) -> tuple[JudgeVote, bool]:
        """(the vote, finalised; whether its timeout fired)."""
        vote, timed_out = await self._elicit(client, item, calls)
        return self._finalise(vote), timed_out

    async def _elicit(self, client: ChatClient, item: PairwiseItem, calls: _VoteCalls) -> tuple[JudgeVote, bool]:
        """(the vote, whether its timeout fired); the timeout starts with the first provider call."""
        token = _VOTE_CALLS.set(calls)
        started = time.perf_counter()
        deadline = calls.timeout = Deadline()  # scheduled by the first call's slot
        try:
            vote = await elicit(self.config, client, item, model=self.wire_model)
        except BaseException as exc:
            if not (deadline.close(exc) or isinstance(exc, TimeoutError)):
                raise
            vote = JudgeVote.invalid(
                self.name,
                self.config.mode,
                f"timeout: no vote within {self.config.timeout_s:g}s",
                latency_s=time.perf_counter() - started,
            )
            return vote, True
        finally:
            _VOTE_CALLS.reset(token)
        deadline.close(None)
        return vote, False

    async def chat(
        self,
        messages: list[Message],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        tenant: str | None = None,
        structured: bool = False,
    ) -> ChatResponse:
        """One plain call through this judge's stack (the fuser uses it); raises TransportError.
        ``timeout_s`` counts from the moment the call gets its slot, as for a vote. ``structured``
        constrains the reply to the verdict schema where the backend allows (falls back once,
        remembered: :mod:`judgefuse.judges.structured_output`)."""
        client = await self._ready_client()
        request = ChatRequest(
            model=self.wire_model,
            messages=messages,
            temperature=temperature if temperature is not None else (self.config.temperature or 0.0),
            max_tokens=self.config.max_tokens if max_tokens is None else max_tokens,
            timeout_s=self.config.timeout_s,
        )
        token = _VOTE_CALLS.set(calls := _VoteCalls(tenant, self.config.timeout_s))
        deadline = calls.timeout = Deadline()  # scheduled when the call gets its slot
        try:
            if structured:
                response, _notes = await call_structured(self.config, request, client.complete)
            else:
                response = await client.complete(request)
        except BaseException as exc:
            if deadline.close(exc) or isinstance(exc, TimeoutError):
                raise JudgeTimeout(f"{self.name!r}: no answer within {self.config.timeout_s:g}s") from exc
            raise
        finally:
            _VOTE_CALLS.reset(token)
        deadline.close(None)
        return scrub_response(response, self._api_key.get_secret_value() if self._api_key is not None else None)
