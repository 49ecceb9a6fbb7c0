"""Backpressure: above capacity, a quick 429 with ``Retry-After``; below it, nothing refused.

Two gates, both before the body is read (a refusal costs the loop a few microseconds, so
refusing keeps the replica serving what it admitted):

* **The loop's capacity** (every guarded route: ``/v1/judge``, ``/v1/fuse``, their batches,
  ``/v1/feedback``, the review queue's ``next``/``skip`` and the ``/review`` page's
  ``label``/``skip``): while the event loop is past capacity
  (:meth:`~judgefuse.service.kernel.loop_lag.LoopLag.overloaded`: every timer of the last
  window late by more than ``server.shed_loop_lag_s``) and at least ``SHED_MIN_INFLIGHT``
  guarded requests are in flight (a queue of requests, not a busy neighbour or a test thread
  holding the GIL, is what made it late: :data:`SHED_MIN_INFLIGHT`), the request is answered 429. Without it an
  open-loop arrival rate above what the loop can serve grows the queue without bound and every
  request, old and new, ends in a client timeout (the collapse of ``/v1/fuse`` measured in
  ``benchmarks/bench_gateway.py``); with it, the requests admitted keep their latency.
* **The request's wait for the loop** (``/v1/judge``, ``/v1/fuse`` and their batches; a label
  burst queues at the storage gate below instead): a request whose headers were read
  from its socket more than ``server.shed_wait_s`` before it reached this gate (the stamp of
  :data:`~judgefuse.service.web.server_timeouts.READ_AT`, set by the HTTP protocol
  ``judgefuse serve`` runs) is answered 429 while at least ``SHED_MIN_INFLIGHT`` are in flight.
  It reads the queue in front of the app *now*, one request at a time: the loop's lag and the
  in-app time describe the last window. Past ``/v1/fuse``'s capacity that wait was the largest
  part of an admitted request's latency (p50 25 ms, p99 86 ms at 150% of its max), and an
  admitted request that has already waited that long cannot answer in time.
* **The verdicts' time in the app** (``/v1/judge``, ``/v1/fuse`` and their batches): while
  every verdict of the last window spent more than ``server.shed_sojourn_s`` (50 ms: several
  times a verdict's in-app time below capacity, under the 100 ms an admitted request may take
  above it; at 25 ms a noisy minute at 80% of ``/v1/judge``'s max tripped it) in the gateway
  beyond its judge calls (:class:`~judgefuse.service.kernel.sojourn.Sojourn`) and at least
  :data:`SHED_MIN_INFLIGHT` are in flight (a slow fsync alone makes a handful of verdicts
  slow: the crash suite's 12 clients on a busy disk were refused at 8), the request is
  answered 429. This sees the queue the
  loop's lag misses: verdicts waiting for the store's group commit while the loop itself idles
  (``/v1/fuse`` at 150% of its max: store wait p50 51 ms, p99 281 ms, loop lag p50 <= 5 ms).
* **Storage connections** (the label and review routes): at most ``server.max_inflight_labels``
  of them in flight; more wait in order, up to ``server.label_wait_s``, then 429. A burst of
  labels larger than the storage pool (Redis: 100 connections) queues briefly instead of failing
  at once with 503 for the requests past the pool; only a sustained excess is refused.

The in-flight budgets per tenant and in total of ``/v1/judge`` and ``/v1/fuse`` stay where the
tenant is known (:mod:`judgefuse.service.judging.admission`). Every refusal is an
:class:`~judgefuse.service.errors.Overloaded` body (``limit`` names the setting) and counted in
``judgefuse_admission_rejected_total`` with tenant ``-`` (not known before authentication).
See docs/design.md, 'Scale'.
"""

from __future__ import annotations

import json
import time

from starlette.types import ASGIApp, Receive, Scope, Send

from judgefuse.places import Places
from judgefuse.service.errors import Overloaded
from judgefuse.service.kernel.metrics import ServiceMetrics
from judgefuse.service.settings import Settings
from judgefuse.service.web.server_timeouts import READ_AT

__all__ = ["BackpressureMiddleware", "LabelGate", "guarded_route"]

_JUDGING = frozenset({"/v1/judge", "/v1/judge/batch", "/v1/fuse", "/v1/fuse/batch"})
_SINGLE = frozenset({"/v1/judge", "/v1/fuse"})
"""Judging routes whose requests :class:`~judgefuse.service.kernel.sojourn.Working` counts
(a batch's items run concurrently: the gates above cover them)."""
_LABELS = frozenset({"/v1/feedback", "/v1/review/next", "/v1/review/skip", "/review/label",
                     "/review/skip"})
SHED_MIN_INFLIGHT = 32
"""Guarded requests in flight below which the loop's lag is not blamed on requests: timers are
also late when other processes take the core (a shared machine, a test suite beside it), and
refusing a handful of requests would not give it back. Below capacity the in-flight count is
about rate x latency (/v1/judge at 250/s and 60 ms: 15); past it, it grows without bound."""
_RETRY_AFTER_S = 1
"""A shed request's ``Retry-After``: the loop drains within a window (a fraction of a second)."""


def guarded_route(method: str, path: str) -> str | None:
    """``"judging"``, ``"labels"`` or None (not guarded) for a request line."""
    if method == "POST" and path in _JUDGING:
        return "judging"
    if path in _LABELS and (method == "POST" or path == "/v1/review/next"):
        return "labels"
    return None


class LabelGate(Places):
    """The label and review routes' storage connections: at most ``limit`` (at least 1)
    holders, later callers wait in order up to ``wait_s`` (:class:`~judgefuse.places.Places`)."""

    def __init__(self, limit: int, wait_s: float) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        super().__init__(limit, wait_s)


class BackpressureMiddleware:
    """The two gates of the module docstring, in front of the app."""

    def __init__(self, app: ASGIApp, *, settings: Settings, metrics: ServiceMetrics) -> None:
        self.app = app
        self.metrics = metrics
        server = settings.server
        self.lag_target_s = server.shed_loop_lag_s
        self.wait_target_s = server.shed_wait_s
        self.sojourn_target_s = server.shed_sojourn_s
        working = metrics.working
        working.limit, working.wait_s = server.max_inflight_work, server.work_wait_s
        working.lifo_after_s = server.work_lifo_after_s
        self.labels = LabelGate(server.max_inflight_labels, server.label_wait_s)
        self.inflight = 0
        """Guarded requests past the gates and not yet answered."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = (guarded_route(scope.get("method", ""), scope.get("path", ""))
                if scope["type"] == "http" else None)
        if kind is None:
            await self.app(scope, receive, send)
            return
        queue = self.inflight >= SHED_MIN_INFLIGHT  # the gates below blame waits on requests only then
        if queue and self.metrics.loop_lag.overloaded(self.lag_target_s):
            await self._refuse(send, Overloaded.shed(
                "shed_loop_lag_s", None, _RETRY_AFTER_S,
                f"the event loop is past capacity (lag above {self.lag_target_s * 1000:g} ms "
                f"for {self.metrics.loop_lag.window_s * 1000:g} ms)"))
            return
        waited = self._waited_s(scope) if kind == "judging" else 0.0
        if waited > self.wait_target_s > 0 and queue:
            await self._refuse(send, Overloaded.shed(
                "shed_wait_s", None, _RETRY_AFTER_S,
                f"the request waited {waited * 1000:.0f} ms for the event loop before admission "
                f"(more than {self.wait_target_s * 1000:g} ms)"))
            return
        if kind == "judging" and queue and self.metrics.sojourn.overloaded(self.sojourn_target_s):
            await self._refuse(send, Overloaded.shed(
                "shed_sojourn_s", None, _RETRY_AFTER_S,
                f"verdicts are queueing in the gateway (every one of the last "
                f"{self.metrics.sojourn.window_s * 1000:g} ms spent over "
                f"{self.sojourn_target_s * 1000:g} ms in it beyond its judge calls)"))
            return
        counted = kind == "judging" and scope["path"] in _SINGLE
        working = self.metrics.working
        # with a queue, the wait for a working place is what is left of ``work_wait_s``
        # counted from when the headers were read: past /v1/fuse's capacity the wait for the
        # loop and this one each took up to 50 ms and an admitted request's p99 passed 100 ms;
        # without one (a replica's first burst, while the app builds itself) the whole of it
        if counted and not await working.acquire(
                max(0.0, working.wait_s - waited) if queue else working.wait_s):
            since = " of this request's headers being read" if queue else ""
            await self._refuse(send, Overloaded.shed(
                "max_inflight_work", working.limit, _RETRY_AFTER_S,
                f"{working.limit} judging requests are being worked on in the gateway and "
                f"none finished within {working.wait_s * 1000:g} ms{since}"))
            return
        if kind == "labels" and not await self.labels.acquire():
            await self._refuse(send, Overloaded.shed(
                "max_inflight_labels", self.labels.limit, _RETRY_AFTER_S,
                f"{self.labels.limit} label and review requests in flight, "
                f"{self.labels.waiting} waiting"))
            return
        self.inflight += 1
        try:
            if counted:
                with working.enter(admitted=True):
                    await self.app(scope, receive, send)
            else:
                await self.app(scope, receive, send)
        finally:
            self.inflight -= 1
            if kind == "labels":
                self.labels.release()

    @staticmethod
    def _waited_s(scope: Scope) -> float:
        """Seconds since the request's headers were read (0 without the protocol's stamp)."""
        read_at = scope.get("extensions", {}).get(READ_AT)
        return 0.0 if read_at is None else time.monotonic() - read_at

    async def _refuse(self, send: Send, error: Overloaded) -> None:
        self.metrics.child(self.metrics.admission_rejected, "-", error.limit).inc()
        body = json.dumps(error.body()).encode()
        await send({"type": "http.response.start", "status": 429, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"retry-after", str(error.retry_after_s).encode()),
        ]})
        await send({"type": "http.response.body", "body": body})
