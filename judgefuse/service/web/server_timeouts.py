"""Deadlines uvicorn does not have: request headers, and a request body the app never reads.

uvicorn (0.29-0.54) times out only idle keep-alive connections: a client that opens a
connection and sends its headers one byte at a time, or sends headers and then a body that
never completes, holds the connection (and its memory) indefinitely; the adversarial run held
300 slow-header connections for 45 s and one incomplete body for 70 s+. So the HTTP protocol
class is subclassed (whichever uvicorn picks: httptools or h11) with two per-connection timers:

* **headers**: armed when the connection opens and again after each response; disarmed when a
  request's headers are complete. On expiry the connection is closed.
* **body**: armed when a request's headers are complete and its body is not; disarmed when the
  body is complete. On expiry the connection is closed. The ASGI middleware answers a slow
  body with 408 first when the app is reading it (``body_timeout_s``); this timer (a few
  seconds later) also covers bodies the app never reads.

Only ``connection_made``, ``data_received``, ``on_response_complete``, ``connection_lost`` and
the request cycle's ``more_body`` and ``scope`` are used, which both uvicorn implementations share.

The same subclass stamps each request with the time its headers were read from the socket
(``scope["extensions"][READ_AT]``, ``time.monotonic()``): between that moment and the app's
first middleware the request waits for the event loop, a wait no gate inside the app can see
otherwise (:mod:`judgefuse.service.web.backpressure` refuses a request that waited too long).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

__all__ = ["BODY_GRACE_S", "READ_AT", "with_deadlines"]

log = logging.getLogger("judgefuse.service")
BODY_GRACE_S = 5.0
"""The protocol's body deadline is this much later than the middleware's 408 (at most; never
more than ``body_timeout_s`` itself)."""
READ_AT = "judgefuse.read_at"
"""The scope extension holding when the request's headers were read (``time.monotonic()``)."""


def with_deadlines(base: type[asyncio.Protocol], *, header_timeout_s: float,
                   body_timeout_s: float) -> type[asyncio.Protocol]:
    """A subclass of uvicorn's HTTP protocol ``base`` that closes connections whose headers (or
    body) do not arrive in time; pass it as ``uvicorn.Config(http=...)``."""
    if header_timeout_s <= 0 or body_timeout_s <= 0:
        raise ValueError("header_timeout_s and body_timeout_s must be > 0")

    class DeadlineProtocol(base):  # type: ignore[valid-type,misc]
        _jf_timer: asyncio.TimerHandle | None = None
        _jf_phase: str | None = None
        _jf_cycle: Any = None
        """The request cycle the current phase is about (None: waiting for headers)."""

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._jf_waiting_for_headers()

        def data_received(self, data: bytes) -> None:
            read_at = time.monotonic()
            super().data_received(data)
            cycle = getattr(self, "cycle", None)
            if cycle is None or cycle is self._jf_cycle:
                if self._jf_phase == "body" and cycle is not None and not cycle.more_body:
                    self._jf_stop()  # the body is complete
                return
            self._jf_cycle = cycle  # a new request's headers are in
            # its task is created, not yet run: the stamp is there when the app starts
            cycle.scope.setdefault("extensions", {})[READ_AT] = read_at
            if cycle.more_body:
                self._jf_arm("body", body_timeout_s + min(BODY_GRACE_S, body_timeout_s))
            else:
                self._jf_stop()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._jf_waiting_for_headers()

        def connection_lost(self, exc: Exception | None) -> None:
            self._jf_stop()
            super().connection_lost(exc)

        def _jf_waiting_for_headers(self) -> None:
            self._jf_cycle = getattr(self, "cycle", None)
            self._jf_arm("headers", header_timeout_s)

        def _jf_arm(self, phase: str, seconds: float) -> None:
            self._jf_stop()
            self._jf_phase = phase
            self._jf_timer = asyncio.get_running_loop().call_later(seconds, self._jf_expire, phase)

        def _jf_stop(self) -> None:
            if self._jf_timer is not None:
                self._jf_timer.cancel()
            self._jf_timer = None
            self._jf_phase = None

        def _jf_expire(self, phase: str) -> None:
            self._jf_timer = None
            self._jf_phase = None
            if self.transport.is_closing():
                return
            log.info("closing a connection: request %s not received in time", phase)
            self.transport.close()

    DeadlineProtocol.__name__ = DeadlineProtocol.__qualname__ = f"Deadline{base.__name__}"
    return DeadlineProtocol
