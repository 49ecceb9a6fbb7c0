"""Which posted ``signals`` a refit learns from (docs/design.md, 'Bounded learning').

A vote may carry numeric ``signals`` (a reward margin, a log-probability gap) and the stacked
model makes one feature per distinct (judge, signal name); its solver builds a p x p Hessian.
Clients choose the names, so without a bound one tenant posting fresh names on every vote made
a refit of 6,400 features that ran for minutes and took gigabytes. The boundary bounds each
vote (``max_signals_per_vote``, ``max_signal_name_chars``: a 422); this module bounds what a
refit learns from, whatever is stored:

* per judge, the ``max_signals_per_judge`` names carried by the most labelled votes (ties by
  name) are kept;
* then, if the model would still have more than ``refit_max_features`` features (5 per judge:
  log-odds, missing, invalid, tie, direction; plus one per kept signal), the kept names carried by the fewest
  votes are dropped until it fits;
* a panel whose judges alone need more features than the cap is not refitted
  (:class:`TooManyFeatures`).

The other names are **ignored for learning**, never refused after the fact: the votes keep
them in storage and the refit's outcome says how many were ignored. A name a client posts on
every vote is always kept before one posted once, so fresh names cannot push a real signal out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from judgefuse.errors import JudgefuseError
from judgefuse.fusion.stacking import VOTE_KINDS
from judgefuse.judges.types import JudgeVote

__all__ = ["CappedSignals", "SignalCaps", "TooManyFeatures", "cap_signals"]

FEATURES_PER_JUDGE = len(VOTE_KINDS)
"""log-odds, missing, invalid, tie and direction (:mod:`judgefuse.fusion.stacking`)."""


class TooManyFeatures(JudgefuseError, ValueError):
    """The panel's judges alone need more features than ``refit_max_features``."""


@dataclass(frozen=True)
class SignalCaps:
    """The learning side's bounds (``settings.learning``)."""

    per_judge: int
    max_features: int


@dataclass
class CappedSignals:
    """The batches with only the kept signals, and what was kept and ignored."""

    batches: list[list[JudgeVote]]
    kept: dict[str, list[str]] = field(default_factory=dict)
    """Judge -> the signal names learned from."""
    ignored: dict[str, int] = field(default_factory=dict)
    """Judge -> how many distinct names were ignored (only judges with any)."""

    @property
    def n_features(self) -> int:
        """Features of a stacked model on these batches."""
        judges = {v.judge for batch in self.batches for v in batch}
        return FEATURES_PER_JUDGE * len(judges) + sum(len(names) for names in self.kept.values())

    def note(self) -> str | None:
        """What was ignored, in words (None: nothing)."""
        if not self.ignored:
            return None
        parts = ", ".join(f"{judge}: {n}" for judge, n in sorted(self.ignored.items()))
        return (f"{sum(self.ignored.values())} signal names ignored for learning, over the caps "
                f"(per judge {parts})")


def cap_signals(batches: Sequence[Sequence[JudgeVote]], caps: SignalCaps) -> CappedSignals:
    """The module docstring's rule; votes are copied only where a signal is dropped."""
    judges = sorted({v.judge for batch in batches for v in batch})
    budget = caps.max_features - FEATURES_PER_JUDGE * len(judges)
    if budget < 0:
        raise TooManyFeatures(
            f"{len(judges)} judges need {FEATURES_PER_JUDGE * len(judges)} features, over "
            f"refit_max_features {caps.max_features}: not refitted"
        )
    counts: dict[str, Counter[str]] = {}
    for batch in batches:
        for vote in batch:
            if vote.signals:
                counts.setdefault(vote.judge, Counter()).update(vote.signals.keys())
    ranked: list[tuple[int, str, str]] = []
    for judge, names in counts.items():
        best = sorted(names.items(), key=lambda kv: (-kv[1], kv[0]))[: caps.per_judge]
        ranked += [(-n, judge, name) for name, n in best]
    ranked.sort()
    keep: dict[str, set[str]] = {}
    for _n, judge, name in ranked[:budget]:
        keep.setdefault(judge, set()).add(name)
    ignored = {judge: len(names) - len(keep.get(judge, ()))
               for judge, names in counts.items() if len(names) > len(keep.get(judge, ()))}
    if not ignored:
        out = [list(batch) for batch in batches]
    else:
        out = [[_only(vote, keep.get(vote.judge, set())) for vote in batch] for batch in batches]
    return CappedSignals(out, {judge: sorted(names) for judge, names in keep.items()}, ignored)


def _only(vote: JudgeVote, names: set[str]) -> JudgeVote:
    if all(name in names for name in vote.signals):
        return vote
    return vote.model_copy(update={"signals": {k: v for k, v in vote.signals.items() if k in names}})
