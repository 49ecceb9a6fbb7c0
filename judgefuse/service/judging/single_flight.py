"""Single-flight idempotency: an identical retry while the first request is still in flight waits
for it and gets the same verdict, with no second set of judge calls.

Without it, a client that retries ``POST /v1/judge`` with the same ``id`` while the first attempt
is still judging gets a 409 (the id is "used" by the time the second save runs) and the judges
are called twice (30 concurrent identical requests: 18 x 200, 12 x 409 on SQLite).

Two levels, because replicas share storage but not memory:

* **In this process**: a map (tenant, id) -> the future of the request judging it. An identical
  request joins that future; a request with the same id but a different item (question,
  answers or panel) is a 409, as it is once the first verdict is stored.
* **Across replicas**: the leader of a flight also takes a short lease on the id in storage
  (:meth:`Storage.claim_verdict_id`, Redis ``SET NX PX``), renewed while it judges. A replica
  that finds the id claimed by another waits (polling) until the claim is released or lapses,
  then runs the request itself: by then the verdict is stored, so the gateway's replay path
  answers from storage without calling a judge. A leader that crashed leaves a claim that lapses
  after ``ttl_s``; a waiter then judges the item itself. SQLite's claim always succeeds (one
  process), so only the in-process map acts there.

A request whose leader failed (a 503 for lost quorum, a 422) gets the same error: it asked the
same question at the same moment. A request whose leader was cancelled tries again itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from judgefuse.errors import JudgefuseError
from judgefuse.service.errors import Conflict
from judgefuse.service.judging.posted_votes import votes_key
from judgefuse.service.judging.request_checks import CheckedRequest
from judgefuse.service.kernel.sojourn import Working
from judgefuse.service.storage import Coordination

__all__ = ["DifferentItemInFlight", "SingleFlight", "join_or_judge"]

log = logging.getLogger("judgefuse.service")
T = TypeVar("T")


class DifferentItemInFlight(JudgefuseError):
    """The id is being judged right now for a different item (the gateway answers 409)."""


@dataclass
class _Flight(Generic[T]):
    fingerprint: object
    future: asyncio.Future[T]


class SingleFlight(Generic[T]):
    """Runs at most one ``work`` per (tenant, id) at a time, in this process and, with a storage
    that implements claims, across processes; see the module docstring."""

    def __init__(
        self, storage: Coordination, *, ttl_s: float = 10.0, poll_s: float = 0.02,
        max_poll_s: float = 0.25, owner: str | None = None,
    ) -> None:
        if ttl_s <= 0 or poll_s <= 0 or max_poll_s < poll_s:
            raise ValueError("single flight: ttl_s and poll_s must be > 0, max_poll_s >= poll_s")
        self.storage = storage
        self.ttl_s = ttl_s
        self.poll_s = poll_s
        self.max_poll_s = max_poll_s
        self.owner = owner or uuid.uuid4().hex
        """This process's name on the claims it takes."""
        self._flights: dict[tuple[str, str], _Flight[T]] = {}

    def in_flight(self) -> int:
        """Requests being led by this process now (for tests and diagnostics)."""
        return len(self._flights)

    async def run(
        self, tenant: str, verdict_id: str, fingerprint: object, work: Callable[[], Awaitable[T]]
    ) -> tuple[T, bool]:
        """``(result, led)``: ``work()``'s result when this call led the flight (``led`` True),
        else the leader's result. Raises :class:`DifferentItemInFlight` when the id is in
        flight for another ``fingerprint``, and the leader's exception when it failed."""
        key = (tenant, verdict_id)
        while (flight := self._flights.get(key)) is not None:
            if flight.fingerprint != fingerprint:
                raise DifferentItemInFlight(verdict_id)
            try:
                with Working.away():  # waiting for the leader is not this request's work
                    return await asyncio.shield(flight.future), False
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if flight.future.cancelled() and not (task is not None and task.cancelling()):
                    continue  # the leader was cancelled, not us: lead (or join the next) ourselves
                raise
        flight = _Flight(fingerprint, asyncio.get_running_loop().create_future())
        self._flights[key] = flight
        try:
            result = await self._lead(tenant, verdict_id, work)
        except asyncio.CancelledError:
            flight.future.cancel()
            raise
        except BaseException as exc:
            flight.future.set_exception(exc)
            flight.future.exception()  # joiners may be none: mark it retrieved
            raise
        else:
            flight.future.set_result(result)
            return result, True
        finally:
            if self._flights.get(key) is flight:
                del self._flights[key]

    async def _lead(self, tenant: str, verdict_id: str, work: Callable[[], Awaitable[T]]) -> T:
        while not await self.storage.claim_verdict_id(tenant, verdict_id, self.owner, self.ttl_s):
            with Working.away():  # another replica judges it: not this one's work meanwhile
                await self._wait_until_released(tenant, verdict_id)
        keeper = asyncio.create_task(self._keep_claim(tenant, verdict_id))
        try:
            return await work()
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
            try:
                await self.storage.release_verdict_id(tenant, verdict_id, self.owner)
            except Exception as exc:  # the lease lapses by itself after ttl_s
                log.warning("single flight: claim on an id not released: %s", type(exc).__name__)

    async def _wait_until_released(self, tenant: str, verdict_id: str) -> None:
        """Another replica judges this id: poll its claim (backing off) until it is gone."""
        delay = self.poll_s
        while await self.storage.verdict_id_claimed(tenant, verdict_id):
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, self.max_poll_s)

    async def _keep_claim(self, tenant: str, verdict_id: str) -> None:
        """Renew the lease every third of its life while the judges are called."""
        while True:
            await asyncio.sleep(self.ttl_s / 3)
            try:
                await self.storage.claim_verdict_id(tenant, verdict_id, self.owner, self.ttl_s)
            except Exception as exc:  # a missed renewal at worst lets a second replica judge
                log.warning("single flight: claim not renewed: %s", type(exc).__name__)


async def join_or_judge(
    flights: SingleFlight[T], tenant: str, checked: CheckedRequest,
    judge_once: Callable[[str, CheckedRequest], Awaitable[T]],
) -> T:
    """``judge_once(tenant, checked)`` for a request without an id; with one, led or joined.
    The request was checked already (an invalid request never joins a valid one). The
    fingerprint is what the replay path compares (panel, question, answers, posted votes), so
    "the same item" means the same thing in flight and after. A joiner with an inline label runs
    the replay path once the verdict is stored, so its label is applied too."""
    request = checked.request
    if request.id is None:
        return await judge_once(tenant, checked)
    fingerprint = (checked.runtime.name, request.question, request.answer_a, request.answer_b,
                   None if checked.posted is None else votes_key(checked.posted))
    try:
        result, led = await flights.run(
            tenant, request.id, fingerprint, lambda: judge_once(tenant, checked)
        )
    except DifferentItemInFlight:
        raise Conflict(f"verdict id {request.id!r} is already used",
                       fields=[(f"{checked.prefix}.id", "already used")]) from None
    if led or request.label is None:
        return result
    return await judge_once(tenant, checked)
