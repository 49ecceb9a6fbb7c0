"""One refit per identical label set (docs/design.md, 'Bounded learning').

Twelve concurrent ``POST /v1/fusion/refit`` calls on the same labels must not fit twelve times
and promote twelve model versions of the same model. A refit's input is its label set (which
verdicts, with which labels) and what it is asked to do with it (the learned method, the voting
baseline, the target, the folds, the signal caps): :func:`label_set_digest` names it. Then:

* on one replica, calls with the same digest while one runs **join** it and get its outcome;
* across replicas, the first to take the storage lease ``refit-inputs/<digest>`` runs it; the
  lease is held for the refit's time budget while it runs and, once it has an outcome
  (promoted or kept), for ``keep_s`` (30 days) after, so a refit on the same label set is
  answered "already refitted" without fitting again. A refit that **failed** (a budget, an
  error) frees the lease: the same labels may be tried again.

New labels (or a relabel) change the digest, so they always refit.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from judgefuse.service.storage import Coordination, VerdictRecord

__all__ = ["LabelSetOnce", "label_set_digest"]

T = TypeVar("T")


def label_set_digest(records: Sequence[VerdictRecord], **inputs: Any) -> str:
    """SHA-256 over the (verdict id, label) pairs, in any order, and ``inputs`` (by name)."""
    digest = hashlib.sha256()
    for line in sorted(f"{r.id}\x1f{r.label}" for r in records):
        digest.update(line.encode("utf-8", "surrogatepass"))
        digest.update(b"\x1e")
    for name in sorted(inputs):
        digest.update(f"\x1d{name}={inputs[name]!r}".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


class LabelSetOnce:
    """Runs each (tenant, panel, digest) once (module docstring)."""

    def __init__(self, storage: Coordination, *, hold_s: float, keep_s: float = 30 * 86400.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.storage = storage
        self.hold_s = hold_s
        self.keep_s = keep_s
        self.clock = clock
        self._flights: dict[tuple[str, str, str], asyncio.Future[Any]] = {}

    async def run(
        self, tenant: str, panel: str, digest: str, work: Callable[[], Awaitable[T]],
        *, keep: Callable[[T], bool],
    ) -> T | None:
        """``work()``'s result, the result of the same call running here, or None when another
        replica runs or ran it. ``keep(result)``: remember it (False: a failure, retry allowed)."""
        key = (tenant, panel, digest)
        flight = self._flights.get(key)
        if flight is not None:
            return await asyncio.shield(flight)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._flights[key] = future
        try:
            result = await self._lead(tenant, panel, digest, work, keep)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(exc)
                future.exception()  # retrieved: joiners re-raise it, none is no warning
            raise
        else:
            future.set_result(result)
            return result
        finally:
            del self._flights[key]

    async def _lead(
        self, tenant: str, panel: str, digest: str, work: Callable[[], Awaitable[T]],
        keep: Callable[[T], bool],
    ) -> T | None:
        name = "refit-inputs/" + hashlib.sha256(f"{panel}\x1f{digest}".encode("utf-8", "surrogatepass")).hexdigest()[:40]
        owner = uuid.uuid4().hex
        if not await self.storage.acquire_lease(tenant, name, owner, ttl_s=self.hold_s, now=self.clock()):
            return None
        try:
            result = await work()
        except BaseException:
            await asyncio.shield(self.storage.release_lease(tenant, name, owner))
            raise
        if keep(result):
            await self.storage.acquire_lease(tenant, name, owner, ttl_s=self.keep_s, now=self.clock())
        else:
            await self.storage.release_lease(tenant, name, owner)
        return result
