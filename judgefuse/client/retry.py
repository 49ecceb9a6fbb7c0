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
import json
import random
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx
import pydantic

from judgefuse.client.errors import BadResponse, ConnectionFailed, DeadlineExceeded, ResponseTooLarge, error_for
from judgefuse.errors import JudgefuseError

__all__ = ["Breaker", "Call", "CircuitBreaker", "RetryPolicy", "Send", "Sleep", "Step", "parse_answer",
           "retry_after_s", "send_with_retries"]

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
    """``deadline_s``: the time one call may spend on attempts and waits together, the last
    answer's body included (a gateway that trickles its answer is cut there; None: no bound
    but the httpx timeouts and ``max_attempts``); ``max_attempts``: sends at most. The defaults
    suit a judge call (a panel takes seconds; raise ``deadline_s`` for a panel of slow local
    models, whose single answer may take minutes)."""

    deadline_s: float | None = 120.0
    max_attempts: int = 10
    backoff_s: float = 0.25
    max_backoff_s: float = 8.0
    statuses: frozenset[int] = field(default_factory=lambda: frozenset({429, 503}))

    def __post_init__(self) -> None:
        if (self.deadline_s is not None and self.deadline_s < 0) or self.max_attempts < 1 or self.backoff_s < 0:
            raise ValueError("RetryPolicy: deadline_s >= 0, max_attempts >= 1, backoff_s >= 0")

    def backoff(self, attempt: int) -> float:
        """The wait after the ``attempt``-th failed send (1-based): full jitter around an
        exponential, so clients that failed together do not come back together."""
        ceiling = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
        return ceiling * (0.5 + random.random() / 2)


NO_RETRIES = RetryPolicy(deadline_s=None, max_attempts=1)


@dataclass(frozen=True)
class CircuitBreaker:
    """When a ``judge_pairs`` run gives up on the gateway as a whole: after ``failures``
    connection failures in a row (any pair's attempts, no answer in between) or when nothing
    has answered for ``outage_s`` since the first of them. Without it each remaining pair
    waits out its own retry deadline: 10,000 pairs behind a dead gateway took about 41 h.
    A 4xx or 5xx answer is an answer: it closes the breaker again, it does not open it."""

    failures: int = 5
    outage_s: float = 30.0

    def __post_init__(self) -> None:
        if self.failures < 1 or self.outage_s <= 0:
            raise ValueError("CircuitBreaker: failures >= 1, outage_s > 0")


class Breaker:
    """One run's breaker state, shared by its concurrent calls (thread-safe). ``tripped`` is
    set once it opens; a sleeping retry waits on it, so the run stops at once."""

    def __init__(self, policy: CircuitBreaker, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self.clock = clock
        self.tripped = threading.Event()
        self.in_a_row = 0
        self.attempts = 0
        """Every send of the run, and ``failed`` those with no answer (a benchmark and a test
        count what a dead gateway cost before the run stopped)."""
        self.failed = 0
        self.failed_since: float | None = None
        self.reason = ""
        self._lock = threading.Lock()

    def sent(self, outcome: object) -> None:
        """Record one attempt's outcome: an answer closes the streak, a transport error
        extends it and may open the breaker."""
        with self._lock:
            self.attempts += 1
            if not isinstance(outcome, httpx.TransportError):
                self.in_a_row, self.failed_since = 0, None
                return
            now = self.clock()
            self.failed += 1
            self.in_a_row += 1
            self.failed_since = now if self.failed_since is None else self.failed_since
            outage = now - self.failed_since
            if self.in_a_row >= self.policy.failures or outage >= self.policy.outage_s:
                if not self.tripped.is_set():
                    self.reason = (f"{self.in_a_row} connection failure(s) in a row over {outage:.1f} s "
                                   f"(last: {type(outcome).__name__}: {outcome})")
                self.tripped.set()

    @property
    def open(self) -> bool:
        return self.tripped.is_set()

    def check(self, outcome: object = None) -> None:
        """Before a send (``outcome`` None) or after one: record it, and stop this call with
        :class:`BreakerOpen` once the breaker is open (another call's failure may have opened it)."""
        if outcome is not None:
            self.sent(outcome)
        if self.open:
            raise BreakerOpen


class BreakerOpen(JudgefuseError):
    """Internal: a call of a run whose breaker opened stops here (never reaches the caller:
    ``judge_pairs`` raises :class:`~judgefuse.client.errors.GatewayDown` instead)."""


@dataclass(frozen=True)
class Send:
    call: Call[Any]
    deadline: float | None = None
    """Monotonic time by which the whole answer must be in (None: no bound)."""


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


def parse_answer(call: Call[T], response: httpx.Response, attempts: int = 1) -> T:
    """The answer read into ``call``'s model; a body that is not JSON or not that model is a
    :class:`BadResponse` naming the status and what was wrong (the parser's error is the
    ``__cause__``), never a ``JSONDecodeError`` or a pydantic ``ValidationError``."""
    def bad(problem: str) -> BadResponse:
        return BadResponse(response.status_code, problem, method=call.method, path=call.path, attempts=attempts)

    try:
        payload = json.loads(response.content)
    except (ValueError, RecursionError) as exc:
        kind = response.headers.get("content-type", "no content type")
        start = response.content[:80].decode("utf-8", "replace")
        raise bad(f"not JSON ({kind}): {start!r}") from exc
    try:
        return call.parse(payload)
    except pydantic.ValidationError as exc:
        wrong = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
                          for e in exc.errors(include_url=False)[:5])
        raise bad(f"not the expected answer: {wrong}") from exc
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise bad(f"not the expected answer: {exc}") from exc


def send_with_retries(
    call: Call[T], policy: RetryPolicy, clock: Callable[[], float] = time.monotonic,
) -> Generator[Step, Outcome | None, httpx.Response]:
    """Steps to send ``call`` until it gets a final answer: the successful response is
    returned, an error answer or a lasting lack of answer is raised as the client's typed
    exception (:mod:`judgefuse.client.errors`). Feed each :class:`Send` its response or its
    ``httpx.TransportError``, and each :class:`Sleep` None."""
    deadline = float("inf") if policy.deadline_s is None else clock() + policy.deadline_s
    attempt = 0
    while True:
        attempt += 1
        outcome = yield Send(call, None if policy.deadline_s is None else deadline)
        if isinstance(outcome, httpx.Response):
            if 300 <= outcome.status_code < 400:
                where = outcome.headers.get("location", "no Location")
                raise BadResponse(outcome.status_code, f"a redirect ({where}): the API never redirects; "
                                  "check base_url (scheme, host, path prefix)",
                                  method=call.method, path=call.path, attempts=attempt)
            if outcome.status_code < 300:
                return outcome
            if outcome.status_code not in policy.statuses:
                raise _error(call, outcome, attempt)
            wait = retry_after_s(outcome)
            wait = policy.backoff(attempt) if wait is None else wait
            if attempt >= policy.max_attempts or clock() + wait > deadline:
                raise _error(call, outcome, attempt)
        elif isinstance(outcome, httpx.TransportError):
            wait = policy.backoff(attempt)
            if isinstance(outcome, httpx.TimeoutException) and clock() >= deadline - 1e-3:
                raise DeadlineExceeded(
                    f"{call.method} {call.path}: no whole answer within deadline_s="
                    f"{policy.deadline_s:g} ({attempt} attempt(s))", attempts=attempt,
                ) from outcome
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


def attempt_timeout(timeout: httpx.Timeout, deadline: float | None,
                    clock: Callable[[], float] = time.monotonic) -> httpx.Timeout:
    """The client's timeouts, none longer than what is left before ``deadline``: so a stalled
    connect, write or read ends with the call's deadline, not minutes later."""
    if deadline is None:
        return timeout
    left = deadline - clock()
    if left <= 0:
        left = 1e-3  # the send fails at once with a timeout: the generator names the deadline

    def bound(value: float | None) -> float:
        return left if value is None else min(value, left)

    return httpx.Timeout(connect=bound(timeout.connect), read=bound(timeout.read),
                         write=bound(timeout.write), pool=bound(timeout.pool))


class BodyReader:
    """Collects an answer's body chunk by chunk under the call's deadline and the client's
    size cap (one definition for both clients' read loops). The declared ``Content-Length``
    is checked before a byte is read; the decoded bytes are counted as they come, so neither
    a liar's length nor a compressed bomb gets past the cap."""

    def __init__(self, call: Call[Any], response: httpx.Response, deadline: float | None,
                 limit: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.call, self.response, self.deadline, self.limit, self.clock = call, response, deadline, limit, clock
        self.chunks: list[bytes] = []
        self.size = 0
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit and "content-encoding" not in response.headers:
            raise ResponseTooLarge(response.status_code, limit, method=call.method, path=call.path)

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.limit:
            raise ResponseTooLarge(self.response.status_code, self.limit, method=self.call.method,
                                  path=self.call.path)
        self.chunks.append(chunk)
        self.check_deadline()

    def check_deadline(self) -> None:
        if self.deadline is not None and self.clock() > self.deadline:
            raise httpx.ReadTimeout("the whole answer did not arrive within the call's deadline",
                                    request=self.response.request)

    def done(self) -> httpx.Response:
        """The answer with its whole (decoded) body, as a plain response."""
        headers = [(k, v) for k, v in self.response.headers.multi_items()
                   if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
        return httpx.Response(self.response.status_code, headers=headers, content=b"".join(self.chunks),
                              request=self.response.request)
