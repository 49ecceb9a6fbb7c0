"""A cheaper ``asyncio.timeout`` for the hot paths (a judge's vote, a request body)."""

from __future__ import annotations

import asyncio

__all__ = ["Deadline"]


class Deadline:
    """``asyncio.timeout(None)`` for the task that makes it, scheduled with :meth:`reschedule`:
    past the deadline the task is cancelled, and :meth:`close` tells that cancellation from any
    other (the caller's), as ``asyncio.Timeout`` does. One timer and no context manager:
    ~3 us where ``asyncio.timeout`` took ~7.5 us, paid on every vote and every request body.

    Use::

        deadline = Deadline()
        deadline.reschedule(loop.time() + seconds)  # now or later (a vote: at its first call)
        try:
            result = await work()
        except BaseException as exc:
            if deadline.close(exc):
                ...  # timed out
            raise
        deadline.close(None)
    """

    __slots__ = ("_cancelling", "_handle", "_task", "expired")

    def __init__(self) -> None:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a deadline needs a running task")
        self._task = task
        self._cancelling = task.cancelling()
        self._handle: asyncio.TimerHandle | None = None
        self.expired = False

    def reschedule(self, when: float) -> None:
        """Cancel the task at loop time ``when`` (replacing any earlier schedule)."""
        if self._handle is not None:
            self._handle.cancel()
        self._handle = asyncio.get_running_loop().call_at(when, self._expire)

    def _expire(self) -> None:
        self._handle = None
        self.expired = True
        self._task.cancel()

    def close(self, exc: BaseException | None) -> bool:
        """Stop the timer once the guarded code has ended (``exc``: how); whether it ended by
        this deadline's cancellation, i.e. timed out."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if not self.expired:
            return False
        return self._task.uncancel() <= self._cancelling and isinstance(exc, asyncio.CancelledError)
