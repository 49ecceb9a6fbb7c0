"""Retries with backoff (tenacity's policy, a hand-written loop) around any :class:`~.request.ChatClient`.

Only :class:`~.errors.RetryableError` is retried. The wait before attempt k+1 is exponential
with full jitter, ``uniform(0, min(max_delay_s, base_delay_s * 2**k))``, raised to the
server's Retry-After when a 429 sent one. With a ``deadline_s`` (a budget per ``complete``
call, from its start) no attempt is started that could not finish in time: each attempt's
timeout is cut to the time left (when that is a millisecond or more shorter), and when the
next wait would run past the deadline the last error is raised at once instead of sleeping. ``deadline_start`` moves where that budget is
counted from: a judge passes the moment its vote's first call got a concurrency slot, so time
queued for a slot is not spent from the deadline.

The loop is written out by hand rather than with tenacity's ``AsyncRetrying``: tenacity builds a
retry state and an action chain on every call (~70 us per ``complete`` even when the first
attempt succeeds), which is a noticeable share of the gateway's CPU per verdict. The policy is
tenacity's, step for step: after a retryable error the wait is computed first (so the jitter
draws are the same), then the stop rule sees it; a fatal error leaves at once.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable

from judgefuse.judges.transport.errors import JudgeTimeout, RateLimited, RetryableError
from judgefuse.judges.transport.request import ChatClient, ChatRequest, ChatResponse, evolve

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
        deadline_start: Callable[[], float | None] | None = None,
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
        self.deadline_start = deadline_start
        self._rng = rng or random.Random()

    def _wait(self, attempt_number: int, error: BaseException) -> float:
        """The pause after failed attempt ``attempt_number`` (1-based): full jitter, or Retry-After."""
        backoff = self._rng.uniform(0.0, min(self.max_delay_s, self.base_delay_s * 2 ** (attempt_number - 1)))
        if isinstance(error, RateLimited) and error.retry_after_s is not None:
            return max(backoff, error.retry_after_s)
        return backoff

    def _stop(self, attempt_number: int, elapsed_s: float, upcoming_sleep: float) -> bool:
        """No attempt after ``attempt_number``: out of attempts, or the next could not finish in time."""
        if attempt_number >= self.attempts:
            return True
        if self.deadline_s is None:
            return False
        return elapsed_s + upcoming_sleep + _MIN_ATTEMPT_S >= self.deadline_s

    def _elapsed(self, called_at: float) -> float:
        """Seconds spent from the deadline: since ``deadline_start()``, else since ``called_at``."""
        origin = self.deadline_start() if self.deadline_start is not None else None
        return time.monotonic() - (called_at if origin is None else origin)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """``inner.complete(request)``, retried; raises the last error when retries run out."""
        started = time.monotonic()
        deadline_s = self.deadline_s
        attempt_number = 0
        while True:
            attempt_number += 1
            try:
                attempt_request = request
                if deadline_s is not None:
                    left = deadline_s - self._elapsed(started)
                    if left <= 0:
                        raise JudgeTimeout(f"deadline of {deadline_s:g}s passed before an attempt")
                    # not when it is under a millisecond shorter (every first attempt)
                    if left < request.timeout_s - _MIN_ATTEMPT_S:
                        attempt_request = evolve(request, timeout_s=left)  # left > 0: valid
                return await self.inner.complete(attempt_request)
            except RetryableError as error:
                elapsed = self._elapsed(started)
                sleep = self._wait(attempt_number, error)
                if self._stop(attempt_number, elapsed, sleep):
                    raise
            await asyncio.sleep(sleep)

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
    deadline_start: Callable[[], float | None] | None = None,
) -> RetryingClient:
    """Wrap ``client`` so :class:`RetryableError` is retried (see the module docstring).

    ``deadline`` is the budget in seconds for one ``complete`` call, retries included;
    ``deadline_start`` returns the ``time.monotonic()`` it is counted from (None: from the call).
    """
    return RetryingClient(
        client, attempts=attempts, base_delay_s=base_delay_s, max_delay_s=max_delay_s, deadline_s=deadline,
        rng=rng, deadline_start=deadline_start,
    )
