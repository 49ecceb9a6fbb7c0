"""Adaptive MP: draw the samples in rounds and stop as soon as more samples cannot matter.

"On Calibration of Large Language Models: From Response To Capability" ("spending samples where they are needed"): a judge whose samples all agree after three
draws does not need seven more. Fixed MP draws ``K = samples`` samples; adaptive MP draws them in
rounds and stops early by the rule below. The vote's confidence stays what MP defines (majority
count / valid samples, over the samples *drawn*), and the vote says how many were drawn.

Rounds
------
Sample indices run ``0, 1, ..., K-1`` exactly as in fixed MP (sample ``i`` has seed ``seed + i``
on the per-call path), so an adaptive vote's samples are a *prefix* of the fixed vote's samples
when the provider honours seeds. The first round draws ``max(round_size, min_samples)``
samples, every later round ``round_size``; no round goes past ``K``. The samples of a round are
drawn concurrently; the rule is checked after every round (so the latency grows by one call per
round, the cost shrinks).

The stopping rule (:func:`stopping_decision`, pure)
---------------------------------------------------
After a round, with ``a`` valid samples for A, ``b`` for B, ``d`` samples drawn (invalid ones
included: they spend budget) and ``r = K - d`` left, let the *leader* ``L`` be the letter MP
would choose now (more votes; on a tie the letter of the first valid sample, MP's tie rule),
``l`` its count and ``t`` the other's. Stop when the first of these holds:

1. **budget**: ``r == 0`` (this is fixed MP).
2. **decided** (exact): the leader wins however the remaining ``r`` samples fall, i.e.
   ``t + r < l``, or ``t + r == l`` and the leader is the first valid sample's letter (a final
   tie would be broken toward it). Then the verdict (the letter) equals fixed MP's on the same
   sample sequence, with certainty.
3. **confident** (Bayesian sequential test): at least ``min_samples`` valid samples, ``l > t``,
   and ``P(q > 1/2 | a, b) >= stop_confidence``, where ``q`` is the leader's per-sample
   probability under a uniform ``Beta(1, 1)`` prior, so ``q | data ~ Beta(l + 1, t + 1)`` and
   ``P(q > 1/2) = P(Binomial(l + t + 1, 1/2) <= l)`` (exact, integer arithmetic).

The smallest confident leads: for ``stop_confidence = 0.9`` (the default) 3-0 (posterior
0.9375), 5-1 (0.9375), 6-2 (0.9102), 8-3 (0.9270); for 0.95: 4-0 (0.9688), 6-1 (0.9648),
8-2 (0.9673), 9-3 (0.9539). With ``K = 10`` rule 2 stops, e.g., 6-1 and 6-2 whatever the
posterior, and 5-3 when the leader's letter came first (a final 5-5 would go to it). Rule 3 makes the letter *probably* the item's
majority letter (the letter with q > 1/2), not certainly fixed MP's: on items whose q is near
1/2 it can stop on a lucky streak. What it costs is measured in ``benchmarks/bench_adaptive.py``
and ``tests/judges/test_adaptive.py`` (>= 50% fewer samples than MP-10 at <= 1 point accuracy
loss against the true majority letter on a mixture of easy and hard items).

The confidence reported is the majority share of the samples drawn: 3-0 gives 1.0 (as a 10-0
would), so adaptive MP's confidence is coarser than fixed MP's; that is the price of the saving.

:func:`sample_adaptively` runs the rounds with any async ``draw(start, count)`` that returns
the letters of samples ``start .. start+count-1`` (``None`` for an unreadable or failed sample);
:func:`judgefuse.judges.modes.mp_vote` uses it when ``JudgeConfig.adaptive`` is set.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from judgefuse.judges.types import Letter

__all__ = [
    "AdaptiveResult",
    "StopDecision",
    "StopReason",
    "adaptive_note",
    "leader",
    "prob_leader_above_half",
    "sample_adaptively",
    "stopping_decision",
]

StopReason = Literal["budget", "decided", "confident", "continue"]


@dataclass(frozen=True)
class StopDecision:
    """Whether to stop, why, and the posterior probability rule 3 computed (nan when unused)."""

    stop: bool
    reason: StopReason
    posterior: float = math.nan


@dataclass(frozen=True)
class AdaptiveResult:
    """What :func:`sample_adaptively` drew: the letters (sample order), the rounds, why it stopped."""

    samples: list[Letter | None]
    rounds: int
    reason: StopReason
    max_samples: int

    @property
    def drawn(self) -> int:
        return len(self.samples)


def prob_leader_above_half(leader_count: int, trailer_count: int) -> float:
    """``P(q > 1/2)`` for ``q ~ Beta(leader_count + 1, trailer_count + 1)`` (uniform prior).

    For integer parameters ``P(Beta(l+1, t+1) <= x) = P(Binomial(l+t+1, x) >= l+1)``, so the
    answer is ``P(Binomial(l+t+1, 1/2) <= l)``: a finite sum, computed exactly.
    """
    if leader_count < 0 or trailer_count < 0:
        raise ValueError("counts must be >= 0")
    n = leader_count + trailer_count + 1
    total = sum(math.comb(n, j) for j in range(leader_count + 1))
    return float(Fraction(total, 2**n))


def leader(samples: Sequence[Letter | None]) -> Letter | None:
    """The letter MP would choose now (MP's tie rule: the first valid sample's letter)."""
    valid = [s for s in samples if s is not None]
    if not valid:
        return None
    a = valid.count("A")
    b = len(valid) - a
    if a != b:
        return "A" if a > b else "B"
    return valid[0]


def stopping_decision(
    count_a: int,
    count_b: int,
    drawn: int,
    max_samples: int,
    *,
    first: Letter | None = None,
    min_samples: int = 3,
    stop_confidence: float = 0.9,
) -> StopDecision:
    """The rule of the module docstring, on counts: stop now or draw another round?

    ``count_a``/``count_b``: valid samples per letter; ``drawn``: samples drawn so far (invalid
    ones included); ``first``: the first valid sample's letter (breaks ties; default: the letter
    with more votes, A on an exact tie).
    """
    if min(count_a, count_b, drawn) < 0 or count_a + count_b > drawn:
        raise ValueError(f"inconsistent counts: a={count_a}, b={count_b}, drawn={drawn}")
    if drawn > max_samples or max_samples < 1:
        raise ValueError(f"drawn={drawn} exceeds max_samples={max_samples}")
    if not 0.5 < stop_confidence <= 1.0:
        raise ValueError(f"stop_confidence must be in (0.5, 1], got {stop_confidence!r}")
    remaining = max_samples - drawn
    if remaining == 0:
        return StopDecision(True, "budget")
    if count_a == count_b == 0:
        return StopDecision(False, "continue")
    if count_a != count_b:
        top: Letter = "A" if count_a > count_b else "B"
    else:
        top = first if first is not None else "A"
    lead, trail = (count_a, count_b) if top == "A" else (count_b, count_a)
    tie_goes_to_leader = first is not None and first == top
    if trail + remaining < lead or (trail + remaining == lead and tie_goes_to_leader):
        return StopDecision(True, "decided")
    if lead + trail < min_samples or lead == trail:
        return StopDecision(False, "continue")
    posterior = prob_leader_above_half(lead, trail)
    if posterior >= stop_confidence:
        return StopDecision(True, "confident", posterior)
    return StopDecision(False, "continue", posterior)


def _first_valid(samples: Sequence[Letter | None]) -> Letter | None:
    return next((s for s in samples if s is not None), None)


async def sample_adaptively(
    draw: Callable[[int, int], Awaitable[Sequence[Letter | None]]],
    *,
    max_samples: int,
    round_size: int = 1,
    min_samples: int = 3,
    stop_confidence: float = 0.9,
) -> AdaptiveResult:
    """Draw samples in rounds until :func:`stopping_decision` says stop (module docstring).

    ``draw(start, count)`` returns the letters of samples ``start .. start + count - 1``, in
    order (``None`` for a sample that failed or could not be read); it must return exactly
    ``count`` entries.
    """
    if max_samples < 1 or round_size < 1 or min_samples < 1:
        raise ValueError("max_samples, round_size and min_samples must be >= 1")
    samples: list[Letter | None] = []
    rounds = 0
    while True:
        size = max(round_size, min_samples) if rounds == 0 else round_size
        size = min(size, max_samples - len(samples))
        got = list(await draw(len(samples), size))
        if len(got) != size:
            raise ValueError(f"draw({len(samples)}, {size}) returned {len(got)} samples")
        samples.extend(got)
        rounds += 1
        decision = stopping_decision(
            samples.count("A"),
            samples.count("B"),
            len(samples),
            max_samples,
            first=_first_valid(samples),
            min_samples=min_samples,
            stop_confidence=stop_confidence,
        )
        if decision.stop:
            return AdaptiveResult(samples, rounds, decision.reason, max_samples)


def adaptive_note(result: AdaptiveResult) -> str:
    """The vote note: ``"adaptive: stopped after k of K samples (decided, 2 rounds)"``."""
    return (
        f"adaptive: stopped after {result.drawn} of {result.max_samples} samples "
        f"({result.reason}, {result.rounds} round{'s' if result.rounds != 1 else ''})"
    )
