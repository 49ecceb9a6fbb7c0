"""Waiting for something the code under test does in the background (a start pass, a rebuild,
a TTL, a checkpoint) without asserting how fast it happens.

A test that polls ``for _ in range(100): ... sleep(0.05)`` allows 5 s, which a busy 2-core
machine (a full suite beside two CPU hogs) can exceed; the suite then fails on speed, which is a
benchmark's business. :func:`poll_until` returns as soon as the condition holds and gives up only
after ``within_s`` (60 s by default): the bound says when a stuck test fails. It does not
assert: the test's own assertion after it says what was expected."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

WITHIN_S = 60.0


async def poll_until(condition: Callable[[], Any | Awaitable[Any]], within_s: float = WITHIN_S,
                     every_s: float = 0.02) -> bool:
    """Call ``condition`` (sync or async) every ``every_s`` until it is truthy (True) or
    ``within_s`` seconds have passed on the loop's clock (False)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return True
        if loop.time() > deadline:
            return False
        await asyncio.sleep(every_s)
