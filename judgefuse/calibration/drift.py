"""Judge drift detectors, for reporting only (no routing action hangs on them).

A judge model can change under the same name (a provider update, a new quantisation). Two
signals, both anytime-valid (read them after every item; the chance of a false alarm over an
unbounded stream is at most ``alpha``):

* :class:`BrierDrift` (needs labels): has the judge's Brier score ``(c - z)^2`` on recent labelled
  items moved away from its reference period?
* :class:`VoteDrift` (label-free): has the judge's vote distribution moved (share of "A" votes,
  mean confidence)? Cheap and immediate, but a shift in the traffic moves it too, so it says
  "look", not "worse".

Both are :class:`MeanShiftDetector` on a [0, 1] stream. How it works and why it is valid:

1. **Reference.** The first ``reference_size`` observations fix an interval ``[L, U]`` for the
   reference mean ``mu0``: the variance-adaptive confidence sequence of
   :mod:`.bernstein_bound` read at that count, each side at ``alpha / 4``, so
   ``P(mu0 outside [L, U]) <= alpha / 2``. (Variance-adaptive because these streams are
   real-valued with a spread far below the Bernoulli worst case.)
2. **Monitoring.** Every later observation feeds the restart candidates of
   :mod:`.sequential` (:class:`~.sequential.RestartedMean`). An alarm fires when a candidate
   shows the mean is below ``L`` or above ``U`` (each side at budget ``alpha / 4`` spread over
   the candidates). When ``[L, U]`` holds ``mu0`` and the monitored mean stays at ``mu0``, each
   side's test is a supermartingale test of a true null (conditionally on the reference), so
   ``P(false alarm) <= alpha / 2 + alpha / 4 + alpha / 4 = alpha``.

A betting test on the paired differences to a reference (Shekhar & Ramdas 2023, "Nonparametric
two-sample testing by betting") would be the alternative when the reference keeps growing;
here the reference is a fixed period (the weeks after a panel was tuned), which makes the
fixed interval plus one-sample sequences simpler and the state smaller.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from .bernstein_bound import LAMBDAS, bernstein_bounds, log_evalue_bernstein
from .restarts import DEFAULT_MIN_LEVEL, RestartedMean, log_threshold
from .sequential import check_alpha

__all__ = ["BrierDrift", "MeanShiftDetector", "VoteDrift"]

_STATE_VERSION = 1


def _check_unit(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    if not 0.0 <= float(value) <= 1.0:  # also refuses NaN
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


class MeanShiftDetector:
    """Anytime-valid two-sided alarm on a [0, 1] stream's mean moving off its reference period.

    ``reference_size`` observations form the reference; every later one is monitored. The
    alarm latches (``alarmed_at`` counts monitored observations; ``direction`` is "up" or
    "down"). State: a small JSON dict (:meth:`to_state`).
    """

    kind = "mean_shift"

    def __init__(
        self, reference_size: int, *, alpha: float = 0.05, min_level: int = DEFAULT_MIN_LEVEL
    ) -> None:
        if isinstance(reference_size, bool) or not isinstance(reference_size, (int, np.integer)) \
                or reference_size < 1:
            raise ValueError(f"reference_size must be an integer >= 1, got {reference_size!r}")
        self.reference_size = int(reference_size)
        self.alpha = check_alpha(alpha)
        self.reference_sum = 0.0
        self.reference_squares = 0.0
        self.reference_count = 0
        self._monitored = RestartedMean(min_level=min_level, squares=True)
        self.alarmed_at: int | None = None
        self.direction: str | None = None
        self._interval: tuple[float, float] | None = None  # cached once the reference is full
        self._quiet = 0  # monitored updates left that cannot raise the alarm (not state)

    @property
    def in_reference(self) -> bool:
        return self.reference_count < self.reference_size

    @property
    def monitored(self) -> int:
        return self._monitored.t

    def reference_interval(self) -> tuple[float, float]:
        """``[L, U]`` holding the reference mean with probability ``>= 1 - alpha / 2``."""
        if self._interval is not None and not self.in_reference:
            return self._interval
        lower, upper = bernstein_bounds(self.reference_sum, self.reference_squares,
                                        self.reference_count, math.log(4.0 / self.alpha))
        interval = (float(lower), float(upper))
        if not self.in_reference:
            self._interval = interval
        return interval

    def update(self, x: float) -> None:
        """Add one observation in [0, 1]: to the reference while it fills, then to the monitor."""
        x = _check_unit(x, "x")
        if self.in_reference:
            self.reference_sum += x
            self.reference_squares += x * x
            self.reference_count += 1
            return
        self._monitored.update(x)
        if self.alarmed_at is not None:
            return
        low, high = self.reference_interval()
        # Plain-Python prefilter: every term of the e-value is at most lambda * drift with
        # lambda <= LAMBDAS[0], so a window needs LAMBDAS[0] * drift >= log(4 / alpha) (the
        # smallest threshold) to be able to alarm; the exact test below decides.
        # The engine also says for how many updates nothing can pass (``quiet``): those skip
        # the scan, which was most of a vote's drift work (about 1 scan in 9 is left on a
        # steady stream of votes).
        if self._quiet > 0:
            self._quiet -= 1
            return
        need = math.log(4.0 / self.alpha) / float(LAMBDAS[0])
        w, self._quiet = self._monitored.outside(low, high, need)
        if w.sums.size == 0:
            return
        assert w.squares is not None  # the monitored mean keeps squares (squares=True)
        sides: tuple[tuple[Literal["below", "above"], float, np.ndarray, str], ...] = (
            ("below", low, w.sums < low * w.counts, "down"),
            ("above", high, w.sums > high * w.counts, "up"),
        )
        for side, edge, past, direction in sides:
            if not past.any():
                continue
            thr = log_threshold(self.alpha / 4.0, w.levels[past], w.starts[past],
                                self._monitored.min_level)
            log_e = log_evalue_bernstein(w.sums[past], w.squares[past], w.counts[past], edge,
                                         side=side)
            if np.any(log_e >= thr):
                self.alarmed_at, self.direction = self._monitored.t, direction
                return

    def alarm(self) -> bool:
        return self.alarmed_at is not None

    def report(self) -> dict[str, Any]:
        """Reference mean and interval, the recent window furthest from it, and the alarm."""
        low, high = self.reference_interval() if self.reference_count else (0.0, 1.0)
        out: dict[str, Any] = {
            "reference_mean": (self.reference_sum / self.reference_count
                               if self.reference_count else math.nan),
            "reference_interval": [low, high], "reference_count": self.reference_count,
            "monitored": self.monitored, "alarm": self.alarm(), "alarmed_at": self.alarmed_at,
            "direction": self.direction, "recent_mean": math.nan, "recent_interval": [0.0, 1.0],
            "recent_count": 0}
        w = self._monitored.windows()
        keep = w.counts > 0
        if keep.any():
            assert w.squares is not None  # the monitored mean keeps squares (squares=True)
            levels, starts, sums, counts = w.levels[keep], w.starts[keep], w.sums[keep], w.counts[keep]
            thr = log_threshold(self.alpha / 4.0, levels, starts, self._monitored.min_level)
            lo, up = bernstein_bounds(sums, w.squares[keep], counts, thr)
            gap = np.maximum(low - up, lo - high)  # > 0 exactly for a window off the reference
            b = int(np.argmax(gap))
            out.update(recent_mean=float(sums[b] / counts[b]),
                       recent_interval=[float(lo[b]), float(up[b])], recent_count=int(counts[b]))
        return out

    def to_state(self) -> dict[str, Any]:
        return {"kind": self.kind, "version": _STATE_VERSION,
                "reference_size": self.reference_size, "alpha": self.alpha,
                "reference_sum": self.reference_sum, "reference_squares": self.reference_squares,
                "reference_count": self.reference_count, "alarmed_at": self.alarmed_at,
                "direction": self.direction, "monitor": self._monitored.to_state()}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> MeanShiftDetector:
        if not isinstance(state, dict) or state.get("kind") != cls.kind:
            raise ValueError(f"state is not a {cls.kind} state (field 'kind')")
        if state.get("version") != _STATE_VERSION:
            raise ValueError(f"unsupported {cls.kind} state version {state.get('version')!r}")
        try:
            out = cls(state["reference_size"], alpha=state["alpha"],
                      min_level=state["monitor"]["min_level"])
            out.reference_sum = float(state["reference_sum"])
            out.reference_squares = float(state["reference_squares"])
            out.reference_count = int(state["reference_count"])
            out._monitored = RestartedMean.from_state(state["monitor"])
            if not out._monitored.squares:
                raise ValueError("mean_shift monitor state lacks its sums of squares")
            out.alarmed_at = None if state["alarmed_at"] is None else int(state["alarmed_at"])
            out.direction = state["direction"]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{cls.kind} state lacks or mangles field {exc}") from None
        return out


class BrierDrift:
    """Has a judge's Brier score on labelled items moved off its reference period?

    Feed ``update(confidence, correct)`` with the judge's confidence in its own choice and
    whether that choice was right, in label arrival order. Feed labels from one stratum (the
    audit labels are a random sample of auto-accepted traffic): a change in what gets routed to
    review changes the review labels' Brier without any change in the judge.
    """

    def __init__(self, reference_size: int = 200, *, alpha: float = 0.05, **kwargs: Any) -> None:
        self.detector = MeanShiftDetector(reference_size, alpha=alpha, **kwargs)

    def update(self, confidence: float, correct: bool) -> None:
        c = _check_unit(confidence, "confidence")
        if not isinstance(correct, (bool, np.bool_)):
            raise ValueError(f"correct must be a bool, got {correct!r}")
        self.detector.update((c - float(correct)) ** 2)

    def alarm(self) -> bool:
        return self.detector.alarm()

    def report(self) -> dict[str, Any]:
        return {"signal": "brier", **self.detector.report()}

    def to_state(self) -> dict[str, Any]:
        return {"kind": "brier_drift", "detector": self.detector.to_state()}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> BrierDrift:
        if not isinstance(state, dict) or state.get("kind") != "brier_drift":
            raise ValueError("state is not a brier_drift state (field 'kind')")
        out = cls.__new__(cls)
        detector = state.get("detector")
        if not isinstance(detector, dict):
            raise ValueError("brier_drift state has no detector (field 'detector')")
        out.detector = MeanShiftDetector.from_state(detector)
        return out


class VoteDrift:
    """Label-free: has a judge's share of "A" votes or its mean confidence moved?

    Two :class:`MeanShiftDetector` at ``alpha / 2`` each (so ``alpha`` in all). Invalid votes
    (no choice) are counted apart and feed neither signal.
    """

    def __init__(self, reference_size: int = 500, *, alpha: float = 0.05, **kwargs: Any) -> None:
        self.alpha = check_alpha(alpha)
        self.share_a = MeanShiftDetector(reference_size, alpha=self.alpha / 2, **kwargs)
        self.confidence = MeanShiftDetector(reference_size, alpha=self.alpha / 2, **kwargs)
        self.invalid = 0

    def update(self, choice: str | None, confidence: float | None) -> None:
        if choice is None:
            self.invalid += 1
            return
        if choice not in ("A", "B"):
            raise ValueError(f"choice must be 'A', 'B' or None, got {choice!r}")
        c = _check_unit(confidence, "confidence")
        self.share_a.update(1.0 if choice == "A" else 0.0)
        self.confidence.update(c)

    def alarm(self) -> bool:
        return self.share_a.alarm() or self.confidence.alarm()

    def report(self) -> dict[str, Any]:
        return {"signal": "votes", "invalid": self.invalid, "share_a": self.share_a.report(),
                "confidence": self.confidence.report(), "alarm": self.alarm()}

    def to_state(self) -> dict[str, Any]:
        return {"kind": "vote_drift", "alpha": self.alpha, "invalid": self.invalid,
                "share_a": self.share_a.to_state(), "confidence": self.confidence.to_state()}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> VoteDrift:
        if not isinstance(state, dict) or state.get("kind") != "vote_drift":
            raise ValueError("state is not a vote_drift state (field 'kind')")
        out = cls.__new__(cls)
        try:
            out.alpha = check_alpha(state["alpha"])
            out.invalid = int(state["invalid"])
            out.share_a = MeanShiftDetector.from_state(state["share_a"])
            out.confidence = MeanShiftDetector.from_state(state["confidence"])
        except KeyError as exc:
            raise ValueError(f"vote_drift state lacks field {exc}") from None
        return out
