"""A per-judge circuit breaker: a judge that keeps failing is cooled down, then probed back.

States::

    closed ──(failure_threshold consecutive failed votes)──> open
    open ──(cooldown elapsed; the next vote is the probe)──> half-open
    half-open ──(probe succeeds)──> closed          (cooldown back to cooldown_s)
    half-open ──(probe fails)──> open               (cooldown doubled, at most max_cooldown_s)

* **closed**: every vote goes to the provider. A failed vote adds one to a run of consecutive
  failures; a successful vote resets it.
* **open**: votes fail fast, without calling the provider, as an invalid vote
  ``"circuit open: cooling down for 12.3s"`` (the time left).
* **half-open**: exactly one vote (the probe) goes to the provider; the others fail fast
  (``"circuit half-open: waiting for the probe call"``) until it reports.

What counts (the judge classifies each vote, see :meth:`~judgefuse.judges.judge.Judge.vote`):

* *failure*: the provider did not answer usefully: a transport failure of a call that reached
  it (429, 5xx, timeouts, resets, unreadable bodies, 401/403), or the vote's own timeout firing
  while a call was in flight at the provider;
* *success*: a valid vote, or any vote where the provider did answer (an unparseable judgment is
  the model's problem, not the provider's: it never opens the circuit);
* *neutral*: no verdict on the provider's health (a 4xx the request itself caused, a vote
  cancelled by the panel deadline, a vote whose timeout fired while its calls were still queued
  for the judge's concurrency slots): nothing changes, and a neutral probe frees the probe slot
  so the next vote probes again. Local queueing never counts: a vote's timeout only starts
  when its first call gets a slot (:mod:`judgefuse.judges.judge`).

Results of votes admitted before the last state change (a *generation*) are ignored: when 50
concurrent votes to a dead judge fail, the circuit opens once, and the stragglers that fail
after it cannot push it further; a straggler's success cannot close an open circuit either.

State changes happen in plain (non-``await``) code under a :class:`threading.Lock`, so one
breaker is safe for any number of tasks in one event loop (and across threads). The clock is
injectable (``clock=``, default :func:`time.monotonic`) for tests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ["Admission", "CircuitBreaker", "CircuitState", "Outcome"]

CircuitState = Literal["closed", "open", "half_open"]
Outcome = Literal["success", "failure", "neutral"]


@dataclass(frozen=True, slots=True)
class Admission:
    """The breaker's answer to "may this vote call the provider?".

    ``allowed`` False: fail fast with ``reason``. ``probe`` True: this vote is the half-open probe.
    Hand the admission back with its outcome to :meth:`CircuitBreaker.report`.
    """

    allowed: bool
    probe: bool = False
    generation: int = 0
    reason: str = ""


class CircuitBreaker:
    """See the module docstring. ``name`` only labels messages and the repr."""

    def __init__(
        self,
        name: str = "",
        *,
        failure_threshold: int = 5,
        cooldown_s: float = 30.0,
        max_cooldown_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failure_threshold < 1:
            raise ValueError(f"failure_threshold must be >= 1, got {failure_threshold}")
        if not cooldown_s > 0:
            raise ValueError(f"cooldown_s must be > 0, got {cooldown_s}")
        max_cooldown = max(cooldown_s * 10, cooldown_s) if max_cooldown_s is None else max_cooldown_s
        if max_cooldown < cooldown_s:
            raise ValueError(f"max_cooldown_s ({max_cooldown}) must be >= cooldown_s ({cooldown_s})")
        self.name = name
        self.failure_threshold = failure_threshold
        self.base_cooldown_s = float(cooldown_s)
        self.max_cooldown_s = float(max_cooldown)
        self.clock = clock
        self._lock = threading.Lock()
        self._state: CircuitState = "closed"
        self._failures = 0
        self._cooldown_s = self.base_cooldown_s
        self._opened_at = 0.0
        self._probe_in_flight = False
        self._generation = 0
        self._admitted: Admission | None = None
        self.times_opened = 0
        """How many times the circuit has opened (closed -> open and half-open -> open)."""
        self.rejected = 0
        """Votes failed fast without calling the provider."""

    def __repr__(self) -> str:
        return (
            f"CircuitBreaker(name={self.name!r}, state={self._state!r}, failures={self._failures}, "
            f"cooldown_s={self._cooldown_s:g})"
        )

    # ------------------------------------------------------------------ reading
    @property
    def state(self) -> CircuitState:
        """The state now ("open" turns into "half_open" only when a vote asks to be admitted)."""
        return self._state

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    @property
    def cooldown_s(self) -> float:
        """The current cooldown (doubles on each failed probe, back to the base on close)."""
        return self._cooldown_s

    def remaining_cooldown_s(self) -> float:
        """Seconds until an open circuit lets a probe through (0 unless open)."""
        if self._state != "open":
            return 0.0
        return max(0.0, self._opened_at + self._cooldown_s - self.clock())

    # ------------------------------------------------------------------ transitions
    def admit(self) -> Admission:
        """May a vote call the provider now? (A half-open admission is the one probe.)"""
        with self._lock:
            if self._state == "closed":
                admitted = self._admitted  # immutable: one per generation, not one per vote
                if admitted is None or admitted.generation != self._generation:
                    admitted = self._admitted = Admission(True, generation=self._generation)
                return admitted
            if self._state == "open":
                left = self._opened_at + self._cooldown_s - self.clock()
                if left > 0:
                    self.rejected += 1
                    return Admission(False, reason=f"circuit open: cooling down for {left:.1f}s")
                self._state = "half_open"
                self._generation += 1
                self._probe_in_flight = False
            # half-open
            if self._probe_in_flight:
                self.rejected += 1
                return Admission(False, reason="circuit half-open: waiting for the probe call")
            self._probe_in_flight = True
            return Admission(True, probe=True, generation=self._generation)

    def report(self, admission: Admission, outcome: Outcome) -> None:
        """Record how an admitted vote went (a refused admission is ignored)."""
        if not admission.allowed:
            return
        with self._lock:
            if admission.generation != self._generation:
                return  # admitted before the last state change: stale
            if admission.probe:
                self._probe_in_flight = False
                if outcome == "success":
                    self._close()
                elif outcome == "failure":
                    self._open(min(self.max_cooldown_s, self._cooldown_s * 2))
                return
            if self._state != "closed":  # pragma: no cover - generation guards this
                return
            if outcome == "success":
                self._failures = 0
            elif outcome == "failure":
                self._failures += 1
                if self._failures >= self.failure_threshold:
                    self._open(self._cooldown_s)

    def reset(self) -> None:
        """Back to closed with the base cooldown (operators, tests)."""
        with self._lock:
            self._close()

    def _open(self, cooldown_s: float) -> None:
        self._state = "open"
        self._cooldown_s = cooldown_s
        self._opened_at = self.clock()
        self._failures = 0
        self._probe_in_flight = False
        self._generation += 1
        self.times_opened += 1

    def _close(self) -> None:
        self._state = "closed"
        self._cooldown_s = self.base_cooldown_s
        self._failures = 0
        self._probe_in_flight = False
        self._generation += 1
