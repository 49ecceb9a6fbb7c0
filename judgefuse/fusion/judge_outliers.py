"""A judge that disagrees with the rest of its panel far more than chance allows, found without labels.

Why: the label-free methods (the voting rules, ``mean_probability``, ``dawid_skene``)
weigh every judge as the votes come; one broken judge (letters swapped by a parser, a judge that
answers A whenever a position or a letter suits it) moves every verdict it can and nothing in
their rows says so. Without labels the only evidence is agreement, so each judge is compared with
the **majority of the other judges** on each item (their first A/B vote each; items where the
others tie or fewer than two others voted are left out), over every item, labelled or not:

* **inverted**: the judge disagrees with the others' majority on more than half of the items, by
  at least :data:`MIN_EFFECT` and :data:`Z` standard errors. A judge that answers at random
  disagrees on half of them; one right more often than not, beside others right more often than
  not, on fewer. More than half means its answers point the wrong way (swapped letters, a
  reversed scale).
* **one-sided**: the judge says A where the others' majority says B (``a_when_others_b``) much
  more often than B where they say A (``b_when_others_a``), or the reverse: a letter or position
  bias (e.g. A on every item shown in one order). Unequal labels make every judge's two rates
  differ the same way, so the judge's difference is compared with the median of the other judges'
  and flagged when it exceeds it by at least :data:`MIN_ONE_SIDED` and :data:`Z` standard errors.

What this cannot see: a judge whose errors are random flips (30% of a 0.75 judge's answers
flipped make a 0.60 judge, which agreement cannot tell from an honest 0.60 one), or errors the
other judges share. Labels show those (the judges' rows); a learned method weighs them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from judgefuse.judges.types import JudgeVote

__all__ = ["MIN_EFFECT", "MIN_ONE_SIDED", "Z", "JudgeWarning", "judge_warnings", "warnings_from_letters"]

Z = 3.3
"""Standard errors a judge's excess must reach (one-sided p < 0.0005 per test)."""
MIN_EFFECT = 0.05
"""How far above one half a judge's disagreement must be to call it inverted."""
MIN_ONE_SIDED = 0.2
"""How far a judge's one-sidedness must exceed the other judges' median to be called one-sided."""
MIN_ITEMS = 30
"""Items compared (with a decided majority of the others) below which nothing is said of a judge."""


@dataclass(frozen=True)
class JudgeWarning:
    """One judge found disagreeing with the rest (module docstring)."""

    judge: str
    kind: Literal["inverted", "one_sided"]
    n_items: int
    """Items where the judge and a majority of the others both answered A or B."""
    disagreement: float
    """Share of those items where the judge's answer is not the others' majority's."""
    a_when_others_b: float | None
    """Share of the items the others' majority calls B that the judge calls A."""
    b_when_others_a: float | None
    """Share of the items the others' majority calls A that the judge calls B."""
    message: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _first_letters(batches: Sequence[Sequence[JudgeVote]]) -> tuple[list[str], np.ndarray]:
    """(judges, items x judges array: +1 A, -1 B, 0 no A/B vote), each judge's first A/B vote."""
    names = sorted({vote.judge for votes in batches for vote in votes})
    index = {name: j for j, name in enumerate(names)}
    said = np.zeros((len(batches), len(names)), dtype=np.int8)
    for i, votes in enumerate(batches):
        for vote in votes:
            j = index[vote.judge]
            if said[i, j] == 0 and vote.choice is not None:
                said[i, j] = 1 if vote.choice == "A" else -1
    return names, said


def _rate(hits: int, total: int) -> float | None:
    return hits / total if total else None


def judge_warnings(
    batches: Sequence[Sequence[JudgeVote]], *, z: float = Z, min_items: int = MIN_ITEMS
) -> list[JudgeWarning]:
    """The judges of ``batches`` (one item's votes each) that disagree with the rest far more than
    chance allows (module docstring), in judge name order; [] with fewer than three judges."""
    names, said = _first_letters(batches)
    return warnings_from_letters(names, said, z=z, min_items=min_items)


def warnings_from_letters(
    names: Sequence[str], said: np.ndarray, *, z: float = Z, min_items: int = MIN_ITEMS
) -> list[JudgeWarning]:
    """:func:`judge_warnings` from each judge's first A/B vote per item (``said``: items x
    ``names``, sorted; +1 A, -1 B, 0 none), e.g. read from vote arrays."""
    if len(names) < 3:
        return []
    total = said.sum(axis=1, dtype=np.int64)
    stats = []
    for j, name in enumerate(names):
        mine = said[:, j].astype(np.int64)
        others = total - mine
        n_others = (said != 0).sum(axis=1) - (mine != 0)
        compared = (mine != 0) & (others != 0) & (n_others >= 2)
        others_a = compared & (others > 0)
        others_b = compared & (others < 0)
        n_a, n_b = int(others_a.sum()), int(others_b.sum())
        a_when_b = int((others_b & (mine > 0)).sum())
        b_when_a = int((others_a & (mine < 0)).sum())
        stats.append((name, n_a, n_b, a_when_b, b_when_a))
    one_sided = [
        (a_when_b / n_b - b_when_a / n_a) if n_a and n_b else math.nan for _, n_a, n_b, a_when_b, b_when_a in stats
    ]
    warnings = []
    for j, (name, n_a, n_b, a_when_b, b_when_a) in enumerate(stats):
        n = n_a + n_b
        if n < min_items:
            continue
        disagreement = (a_when_b + b_when_a) / n
        rates = _rate(a_when_b, n_b), _rate(b_when_a, n_a)
        counts = f"{n:,} items"
        if disagreement - 0.5 >= MIN_EFFECT and (disagreement - 0.5) / math.sqrt(0.25 / n) >= z:
            warnings.append(JudgeWarning(
                name, "inverted", n, disagreement, *rates,
                f"judge {name} disagrees with the other judges' majority on {100 * disagreement:.0f}% of {counts}, "
                "more than a judge answering at random would (50%): its answers may point the wrong way "
                "(swapped letters, a reversed scale)",
            ))  # fmt: skip
            continue
        if rates[0] is None or rates[1] is None or n_a < 10 or n_b < 10:
            continue
        peers = [value for k, value in enumerate(one_sided) if k != j and not math.isnan(value)]
        if not peers:
            continue
        excess = one_sided[j] - float(np.median(peers))
        se = math.sqrt(max(rates[0] * (1 - rates[0]) / n_b + rates[1] * (1 - rates[1]) / n_a, 1e-12))
        if abs(excess) >= MIN_ONE_SIDED and abs(excess) / se >= z:
            letter, other = ("A", "B") if excess > 0 else ("B", "A")
            often, seldom = (rates[0], rates[1]) if excess > 0 else (rates[1], rates[0])
            warnings.append(JudgeWarning(
                name, "one_sided", n, disagreement, *rates,
                f"judge {name} says {letter} on {100 * often:.0f}% of the items the other judges' majority calls "
                f"{other}, but {other} on only {100 * seldom:.0f}% of those they call {letter} ({counts}; the "
                f"other judges differ by {100 * float(np.median(peers)):+.0f} points): a one-sided (letter or "
                "position) bias",
            ))  # fmt: skip
    return warnings
