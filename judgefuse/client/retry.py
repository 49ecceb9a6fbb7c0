"""When to send a request again, written once for both clients (no I/O here).

docs/design.md, 'Serving': 429 (an in-flight limit is full) and 503 (quorum lost, storage
down) are the gateway's "try again" answers, and a 429 says when in ``Retry-After``. So:

* **429 / 503**: wait ``Retry-After`` when the answer gives it (else the backoff below), then
  send again, as long as the wait ends before the deadline;
* **no answer** (connection refused or reset, timeout): back off exponentially with jitter
  (``backoff_s`` doubling up to ``max_backoff_s``), within the same deadline;
* **any other 4xx**: never retried; the request is wrong and will stay wrong.

A retried judge request is safe because the client gives every item an id: the gateway joins a
retry to the verdict in flight for that id, or replays the stored one, so the judges are called
once (the gateway's single flight: :mod:`judgefuse.service.judging.single_flight`).

:func:`send_with_retries` is a generator of :class:`Send` and :class:`Sleep` steps that is fed
each attempt's outcome; ``Client`` drives it with ``time.sleep``, ``AsyncClient`` with
``asyncio.sleep``: one policy, two loops.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx

from judgefuse.client.errors import ConnectionFailed, error_for

__all__ = ["Call", "RetryPolicy", "Send", "Sleep", "Step", "retry_after_s", "send_with_retries"]

T = TypeVar("T")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One HTTP request and how to read its answer's JSON."""

    method: str
    path: str
    parse: Callable[[Any], T]
    json: Any = None
    params: dict[str, Any] | None = None
    headers: dict[str, str] | None = None


@dataclass(frozen=True)
class RetryPolicy:
    """``deadline_s``: the time one call may spend on attempts and waits together;
    ``max_attempts``: sends at most. The defaults suit a judge call (a panel takes seconds)."""

    deadline_s: float = 120.0
    max_attempts: int = 10
    backoff_s: float = 0.25
    max_backoff_s: float = 8.0
    statuses: frozenset[int] = field(default_factory=lambda: frozenset({429, 503}))

    def __post_init__(self) -> None:
        if self.deadline_s < 0 or self.max_attempts < 1 or self.backoff_s < 0:
            raise ValueError("RetryPolicy: deadline_s >= 0, max_attempts >= 1, backoff_s >= 0")

    def backoff(self, attempt: int) -> float:
        """The wait after the ``attempt``-th failed send (1-based): full jitter around an
        exponential, so clients that failed together do not come back together."""
        ceiling = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
        return ceiling * (0.5 + random.random() / 2)


NO_RETRIES = RetryPolicy(deadline_s=0.0, max_attempts=1)


@dataclass(frozen=True)
class Send:
    call: Call[Any]


@dataclass(frozen=True)
class Sleep:
    seconds: float


Step = Send | Sleep
Outcome = httpx.Response | httpx.TransportError


def retry_after_s(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (delta-seconds or an HTTP date), None when absent or bad."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def send_with_retries(
    call: Call[T], policy: RetryPolicy, clock: Callable[[], float] = time.monotonic,
) -> Generator[Step, Outcome | None, httpx.Response]:
    """Steps to send ``call`` until it gets a final answer: the successful response is
    returned, an error answer or a lasting lack of answer is raised as the client's typed
    exception (:mod:`judgefuse.client.errors`). Feed each :class:`Send` its response or its
    ``httpx.TransportError``, and each :class:`Sleep` None."""
    deadline = clock() + policy.deadline_s
    attempt = 0
    while True:
        attempt += 1
        outcome = yield Send(call)
        if isinstance(outcome, httpx.Response):
            if outcome.status_code < 400:
                return outcome
            if outcome.status_code not in policy.statuses:
                raise _error(call, outcome, attempt)
            wait = retry_after_s(outcome)
            wait = policy.backoff(attempt) if wait is None else wait
            if attempt >= policy.max_attempts or clock() + wait > deadline:
                raise _error(call, outcome, attempt)
        elif isinstance(outcome, httpx.TransportError):
            wait = policy.backoff(attempt)
            if attempt >= policy.max_attempts or clock() + wait > deadline:
                raise ConnectionFailed(
                    f"{call.method} {call.path}: no answer after {attempt} attempt(s): "
                    f"{type(outcome).__name__}: {outcome}", attempts=attempt,
                ) from outcome
        else:
            raise TypeError(f"a Send step takes a response or a transport error, not {outcome!r}")
        yield Sleep(wait)


def _error(call: Call[Any], response: httpx.Response, attempts: int) -> Exception:
    return error_for(response.status_code, json_or_none(response), response.text,
                     method=call.method, path=call.path, attempts=attempts)
