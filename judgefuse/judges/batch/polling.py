"""Poll one provider batch until it ends: the loop both batch APIs share.

OpenAI's batches and Anthropic's message batches differ in their calls (:mod:`.api`) but not in
how a run waits for one: ask for its status every ``interval_s`` (stretched by ``backoff`` per
poll up to ``max_interval_s``, so a long batch is not asked thousands of times), until the
status is one of the provider's terminal states (:attr:`BatchAPI.terminal_statuses`: OpenAI's
``completed``, ``failed``, ``expired``, ``cancelled``; Anthropic's ``ended``). A poll that fails
for a passing reason (5xx, 429, a broken connection: :attr:`BatchAPIError.transient`) is asked
again, up to ``transient_retries`` in a row; a lasting failure, or a batch still running at
``deadline_s``, stops the run with a typed :class:`BatchAPIError` whose message says which
batch and why, and the rerun resumes the same batch (:mod:`.state`).

How a batch *ended* is not an error here: a ``failed``, ``expired`` or ``cancelled`` batch is
returned like a completed one (its ``status`` says which): what it answered is still worth
downloading, and what it did not becomes invalid votes, never a crash
(docs/offline-evaluation.md, 'Judging at batch prices').
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from judgefuse.judges.batch.api import BatchAPIError, BatchStatus

__all__ = ["POLL_RETRIES", "BatchAPI", "BatchPollTimeout", "PollSchedule", "poll_until_ended"]

POLL_RETRIES = 5
"""Transient poll failures in a row (5xx, 429, connection) waited out before the run stops."""


class BatchAPI(Protocol):
    """What the poller needs of a batch API (:class:`~.api.OpenAIBatchAPI`,
    :class:`~.api.AnthropicBatchAPI`)."""

    terminal_statuses: frozenset[str]

    async def retrieve(self, batch_id: str) -> BatchStatus: ...


class BatchPollTimeout(BatchAPIError):
    """The batch had not ended by the poll's deadline (it goes on at the provider: a rerun
    resumes it)."""


@dataclass(frozen=True, slots=True)
class PollSchedule:
    """When to poll: first wait ``interval_s``, each next one ``backoff`` times longer, at most
    ``max_interval_s`` (None: no cap); give up after ``deadline_s`` seconds (None: never) or
    after more than ``transient_retries`` passing failures in a row. The defaults poll at a
    fixed interval forever, as ``judge --batch`` does (``--batch-poll-s``)."""

    interval_s: float = 10.0
    backoff: float = 1.0
    max_interval_s: float | None = None
    deadline_s: float | None = None
    transient_retries: int = POLL_RETRIES

    def __post_init__(self) -> None:
        if self.interval_s < 0 or self.backoff < 1.0 or self.transient_retries < 0:
            raise ValueError("poll schedule: interval_s >= 0, backoff >= 1 and transient_retries >= 0")
        if self.max_interval_s is not None and self.max_interval_s < self.interval_s:
            raise ValueError("poll schedule: max_interval_s must be >= interval_s")
        if self.deadline_s is not None and self.deadline_s <= 0:
            raise ValueError("poll schedule: deadline_s must be > 0")

    def next_interval(self, interval: float) -> float:
        longer = interval * self.backoff
        return longer if self.max_interval_s is None else min(longer, self.max_interval_s)


def _ignore(_status: BatchStatus) -> None:
    return None


async def poll_until_ended(
    api: BatchAPI,
    batch_id: str,
    schedule: PollSchedule,
    *,
    on_status: Callable[[BatchStatus], None] = _ignore,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> BatchStatus:
    """Poll ``batch_id`` on ``api`` until its status is terminal for that provider and return
    that status (module docstring); ``on_status`` hears every status read. Raises
    :class:`BatchAPIError` on a lasting poll failure, :class:`BatchPollTimeout` at the deadline."""
    started = clock()
    interval = schedule.interval_s
    failures = 0
    last = "not read yet"
    while True:
        try:
            status = await api.retrieve(batch_id)
        except BatchAPIError as exc:
            failures += 1
            if not exc.transient or failures > schedule.transient_retries:
                raise
        else:
            failures = 0
            last = status.status
            on_status(status)
            if status.status in api.terminal_statuses:
                return status
        if schedule.deadline_s is not None and clock() - started + interval > schedule.deadline_s:
            raise BatchPollTimeout(
                f"batch {batch_id} is still {last} after {clock() - started:.0f} s, the poll's "
                f"deadline being {schedule.deadline_s:g} s (it goes on at the provider)"
            )
        await sleep(interval)
        interval = schedule.next_interval(interval)
