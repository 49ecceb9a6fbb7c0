"""Retries with backoff (tenacity) around any :class:`~.request.ChatClient`.

Only :class:`~.errors.RetryableError` is retried. The wait before attempt k+1 is exponential
with full jitter, ``uniform(0, min(max_delay_s, base_delay_s * 2**k))``, raised to the
server's Retry-After when a 429 sent one. With a ``deadline_s`` (a budget per ``complete``
call, from its start) no attempt is started that could not finish in time: each attempt's
timeout is cut to the time left, and when the next wait would run past the deadline the last
error is raised at once instead of sleeping.
"""

from __future__ import annotations

import dataclasses
import random
import time

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type

from judgefuse.judges.transport.errors import JudgeTimeout, RateLimited, RetryableError
from judgefuse.judges.transport.request import ChatClient, ChatRequest, ChatResponse

__all__ = ["RetryingClient", "with_retries"]

_MIN_ATTEMPT_S = 0.001


class RetryingClient:
    """A :class:`ChatClient` that retries ``inner``; build it with :func:`with_retries`."""

    def __init__(
        self,
        inner: ChatClient,
        *,
        attempts: int,
        base_delay_s: float,
        max_delay_s: float,
        deadline_s: float | None,
        rng: random.Random | None = None,
    ) -> None:
        if attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {attempts}")
        if base_delay_s < 0 or max_delay_s < 0:
            raise ValueError("base_delay_s and max_delay_s must be >= 0")
        if deadline_s is not None and deadline_s <= 0:
            raise ValueError(f"deadline_s must be > 0, got {deadline_s}")
        self.inner = inner
        self.attempts = attempts
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self.deadline_s = deadline_s
        self._rng = rng or random.Random()

    def _wait(self, state: RetryCallState) -> float:
        backoff = self._rng.uniform(0.0, min(self.max_delay_s, self.base_delay_s * 2 ** (state.attempt_number - 1)))
        error = state.outcome.exception() if state.outcome is not None else None
        if isinstance(error, RateLimited) and error.retry_after_s is not None:
            return max(backoff, error.retry_after_s)
        return backoff

    def _stop(self, state: RetryCallState) -> bool:
        if state.attempt_number >= self.attempts:
            return True
        if self.deadline_s is None:
            return False
        return state.seconds_since_start + state.upcoming_sleep + _MIN_ATTEMPT_S >= self.deadline_s

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """``inner.complete(request)``, retried; raises the last error when retries run out."""
        started = time.monotonic()
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(RetryableError),
            wait=self._wait,
            stop=self._stop,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                attempt_request = request
                if self.deadline_s is not None:
                    left = self.deadline_s - (time.monotonic() - started)
                    if left <= 0:
                        raise JudgeTimeout(f"deadline of {self.deadline_s:g}s passed before an attempt")
                    if left < request.timeout_s:
                        attempt_request = dataclasses.replace(request, timeout_s=left)
                return await self.inner.complete(attempt_request)
        raise AssertionError("unreachable: tenacity either returns or raises")  # pragma: no cover

    async def aclose(self) -> None:
        """Close the wrapped client."""
        await self.inner.aclose()


def with_retries(
    client: ChatClient,
    *,
    attempts: int = 4,
    base_delay_s: float = 0.5,
    max_delay_s: float = 20.0,
    deadline: float | None = None,
    rng: random.Random | None = None,
) -> RetryingClient:
    """Wrap ``client`` so :class:`RetryableError` is retried (see the module docstring).

    ``deadline`` is the budget in seconds for one ``complete`` call, retries included.
    """
    return RetryingClient(
        client, attempts=attempts, base_delay_s=base_delay_s, max_delay_s=max_delay_s, deadline_s=deadline, rng=rng
    )
