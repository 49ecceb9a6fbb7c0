"""The votes of many items as arrays, and the voting rules fused over them at once.

Why: offline, ``judgefuse eval`` fuses every item with every method, several times over (each
rule, each recalibrated variant's folds, the tie-labelled items). Item by item that is a Python
call, a few list comprehensions and a validated :class:`~judgefuse.fusion.verdict.Verdict` per
item and method: 2 ms of CPU per item, most of a 100,000-item run. Here the votes are read once
into items x slots arrays (:class:`VoteColumns`; a slot is a vote's position in its item, so
judge identity is kept in ``judge`` for the methods that need it) and each rule of
:mod:`judgefuse.fusion.voting` is a handful of array operations over all items
(:func:`fuse_columns`), giving a :class:`FusedColumns` (per item: answer, confidence, ``p_a``,
counts, ``tie_broken``).

The per-item functions stay what the service calls (they carry the notes a verdict shows); they
are the reference this module is tested against item by item (choice, exact tie, confidence,
``p_a``, ``n_valid``, ``n_invalid``, ``tie_broken``, to 1e-9) on the shared data sets and on
synthetic panels with every case (one valid vote, tie votes, no valid vote, tied scores). The
rules' definitions, tie tolerance included, are in :mod:`judgefuse.fusion.voting`. The numbers
are the per-item rules' to the bit, not only to 1e-9: a confidence one ulp off can fall in the
next ECE bin or past a histogram recalibrator's edge. So the scores are ``math.fsum``'s
correctly rounded sums (:func:`fsum_rows`: a running sum whose every step is checked exact,
``math.fsum`` only on the rows where a step rounded) and the entropy weight is voting's own
``math.log2`` formula applied to each distinct confidence.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from judgefuse.fusion.dawid_skene import vote_games
from judgefuse.fusion.voting import ENTROPY_EPS, TIE_TOLERANCE, TIE_VOTE_P_A, VOTING_FUNCTIONS
from judgefuse.judges.types import JudgeVote

NONE, A, B, TIE = 0, 1, 2, 3
"""Answer codes of :attr:`FusedColumns.answer`: undecided (no usable vote), A, B, exact tie."""
LETTER_CODES = {"A": A, "B": B}

Floats = NDArray[np.float64]
Bools = NDArray[np.bool_]
Ints = NDArray[np.int64]


@dataclass(frozen=True)
class VoteColumns:
    """Items x slots arrays of votes (``n`` items, ``k`` = the most votes any item has).

    ``present`` marks a slot that holds a vote; ``valid`` a vote with a letter (``says_a`` which),
    ``tie`` a tie vote; ``confidence`` is 0 and ``p_a`` NaN where a vote has none. ``judge`` is
    the index of the vote's judge in ``judges`` (-1 for an empty slot). ``cost_usd`` and
    ``calls`` are per item (every vote's), what a scored row adds up; ``vote_cost_usd`` and
    ``vote_calls`` per vote (a judge's row adds up its own). ``signals`` holds, per key of any
    vote's ``signals``, an items x slots array of the values (NaN where a vote has none): what
    stacking reads (:mod:`judgefuse.fusion.columnar_stacking`).
    """

    present: Bools
    valid: Bools
    says_a: Bools
    tie: Bools
    confidence: Floats
    p_a: Floats
    judge: Ints
    judges: tuple[str, ...]
    cost_usd: Floats
    calls: Ints
    vote_cost_usd: Floats
    vote_calls: Ints
    games: NDArray[np.int8]
    """Items x slots x 2: the letters Dawid-Skene observes each vote saying, in order
    (:func:`~judgefuse.fusion.dawid_skene.vote_games`: 1 A, 2 B, 0 none)."""
    signals: Mapping[str, Floats] = field(default_factory=dict)
    derived: dict[str, object] = field(default_factory=dict, compare=False, repr=False)
    """What methods compute once from these arrays and reuse (e.g. stacking's features)."""

    @property
    def n_items(self) -> int:
        return int(self.present.shape[0])

    @classmethod
    def empty(cls, n: int, k: int, judges: Sequence[str] = (), signal_keys: Sequence[str] = ()) -> VoteColumns:
        """Arrays for ``n`` items of up to ``k`` votes with no vote in them, to be filled in."""
        return cls(
            np.zeros((n, k), dtype=bool), np.zeros((n, k), dtype=bool), np.zeros((n, k), dtype=bool),
            np.zeros((n, k), dtype=bool), np.zeros((n, k)), np.full((n, k), np.nan),
            np.full((n, k), -1, dtype=np.int64), tuple(judges), np.zeros(n), np.zeros(n, dtype=np.int64),
            np.zeros((n, k)), np.zeros((n, k), dtype=np.int64), np.zeros((n, k, 2), dtype=np.int8),
            {key: np.full((n, k), np.nan) for key in signal_keys},
        )  # fmt: skip

    @classmethod
    def from_batches(cls, batches: Sequence[Sequence[JudgeVote]]) -> VoteColumns:
        """The arrays of ``batches`` (one item's votes each, in order), read in one pass."""
        n = len(batches)
        k = max((len(votes) for votes in batches), default=0)
        out = cls.empty(n, k)
        present, valid, says_a, tie, confidence, p_a = out.present, out.valid, out.says_a, out.tie, out.confidence, out.p_a
        judge, cost, calls, vote_cost, vote_calls, games = (
            out.judge, out.cost_usd, out.calls, out.vote_cost_usd, out.vote_calls, out.games,
        )  # fmt: skip
        names: dict[str, int] = {}
        signals: dict[str, Floats] = {}
        for i, votes in enumerate(batches):
            item_cost = 0.0
            item_calls = 0
            for s, vote in enumerate(votes):
                present[i, s] = True
                if vote.choice is not None:
                    valid[i, s] = True
                    says_a[i, s] = vote.choice == "A"
                    confidence[i, s] = vote.confidence or 0.0
                tie[i, s] = vote.tie
                if vote.p_a is not None:
                    p_a[i, s] = vote.p_a
                judge[i, s] = names.setdefault(vote.judge, len(names))
                vote_cost[i, s] = vote.cost_usd
                vote_calls[i, s] = vote.calls
                item_cost += vote.cost_usd
                item_calls += vote.calls
                for key, value in vote.signals.items():
                    if key not in signals:
                        signals[key] = np.full((n, k), np.nan)
                    signals[key][i, s] = value
                for g, letter in enumerate(vote_games(vote.mode, vote.samples, vote.signals, vote.choice)):
                    games[i, s, g] = LETTER_CODES[letter]
            cost[i] = item_cost
            calls[i] = item_calls
        return dataclasses.replace(out, judges=tuple(names), signals=signals)

    def take(self, rows: Ints | Sequence[int]) -> VoteColumns:
        """The columns of the items at ``rows`` (cross-fitting's folds are index arrays)."""
        index = np.asarray(rows, dtype=np.int64)
        return VoteColumns(
            self.present[index], self.valid[index], self.says_a[index], self.tie[index],
            self.confidence[index], self.p_a[index], self.judge[index], self.judges,
            self.cost_usd[index], self.calls[index], self.vote_cost_usd[index], self.vote_calls[index],
            self.games[index], {key: values[index] for key, values in self.signals.items()},
        )

    def first_vote(self, name: str) -> tuple[Bools, Ints]:
        """Per item, whether judge ``name`` voted and the slot of its first vote (what
        ``find_vote`` picks; 0 where it did not vote)."""
        j = self.judges.index(name) if name in self.judges else -1
        mine = self.judge == j
        return mine.any(axis=1), np.argmax(mine, axis=1) if mine.shape[1] else np.zeros(self.n_items, dtype=np.int64)


@dataclass(frozen=True)
class FusedColumns:
    """One method's verdicts on every item as arrays: what a :class:`Verdict` per item would say.

    ``answer`` is :data:`A`, :data:`B`, :data:`TIE` (an exact tie: no choice, confidence 0.5) or
    :data:`NONE` (no usable vote: no choice, confidence 0.5).
    """

    method: str
    answer: NDArray[np.int8]
    confidence: Floats
    p_a: Floats
    n_valid: Ints
    n_invalid: Ints
    tie_broken: Bools

    def take(self, rows: Ints | Sequence[int]) -> FusedColumns:
        index = np.asarray(rows, dtype=np.int64)
        return FusedColumns(
            self.method, self.answer[index], self.confidence[index], self.p_a[index],
            self.n_valid[index], self.n_invalid[index], self.tie_broken[index],
        )

    @property
    def decided(self) -> Bools:
        """Items with a letter (A or B)."""
        return (self.answer == A) | (self.answer == B)


def _close(x: Floats, y: Floats) -> Bools:
    """``math.isclose(x, y, rel_tol=TIE_TOLERANCE, abs_tol=TIE_TOLERANCE)`` elementwise (voting's tie test)."""
    return np.abs(x - y) <= np.maximum(TIE_TOLERANCE * np.maximum(np.abs(x), np.abs(y)), TIE_TOLERANCE)


def fsum_rows(values: Floats) -> Floats:
    """``math.fsum`` of each row (correctly rounded, whatever the order of the terms).

    Most rows are summed exactly in integers (:func:`_grid_sums`); of the others, a row whose
    running sum over the columns made no rounding error (each step's error found by TwoSum) holds
    its exact sum, which is ``fsum``'s, and the rest are summed by ``math.fsum`` itself (rows
    whose terms span more than about 2^6 in magnitude, with low bits set: rare in a panel's
    weights and probabilities).
    """
    total = _grid_sums(values)
    rows = np.flatnonzero(np.isnan(total))
    if rows.size == 0:
        return total
    rest = values[rows]
    running = np.zeros(rows.size)
    inexact = np.zeros(rows.size, dtype=bool)
    for column in rest.T:
        step = running + column
        back = step - running
        inexact |= ((running - (step - back)) + (column - back)) != 0.0
        running = step
    total[rows] = running
    left = np.flatnonzero(inexact)
    if left.size:
        total[rows[left]] = [math.fsum(row) for row in rest[left].tolist()]
    return total


def _grid_sums(values: Floats) -> Floats:
    """Each row's correctly rounded sum where it can be found in 64-bit integers, NaN elsewhere.

    A row's terms, scaled by one power of two so that their largest is below 2^62 / (number of
    terms) (exactly: scaling up by a power of two loses nothing), are integers unless a term has
    bits below the scaled grid; a row of integers is summed exactly in int64, and the conversion of
    that exact sum to a float rounds it once, to nearest, ties to even, as ``math.fsum`` rounds.
    Rows with a non-finite term, or whose largest term is 2^62 / (number of terms) or more, are left (NaN)."""
    n, k = values.shape
    total = np.full(n, np.nan)
    if n == 0:
        return total
    if k == 0:
        return np.zeros(n)
    finite = np.asarray(np.isfinite(values).all(axis=1), dtype=bool)
    top = np.abs(np.where(finite[:, None], values, 0.0)).max(axis=1)
    shift = (62 - math.ceil(math.log2(k))) - np.frexp(top)[1]  # top < 2^exponent
    usable = finite & (shift >= 0)
    shift = np.where(usable, shift, 0).astype(np.int32)
    scaled = np.ldexp(np.where(usable[:, None], values, 0.0), shift[:, None])
    whole = usable & (scaled == np.trunc(scaled)).all(axis=1)
    exact = scaled[whole].astype(np.int64).sum(axis=1)
    total[whole] = np.ldexp(exact.astype(np.float64), -shift[whole])
    return total


def row_count(mask: Bools) -> Ints:
    """``mask.sum(axis=1)`` (int64) for an items x slots mask, a column at a time: numpy reduces a
    row of a few slots 4x slower than it adds whole columns (the counts are the same integers)."""
    out = np.zeros(mask.shape[0], dtype=np.int64)
    for column in mask.T:
        out += column
    return out


def _entropy_weight(c: Floats) -> Floats:
    """voting's ``c / (binary_entropy(c) + eps)`` (``math.log2``, to the bit) per distinct value."""
    distinct, where = np.unique(c, return_inverse=True)
    if not distinct.size:
        return np.zeros_like(c)
    # binary_entropy's arithmetic, one IEEE operation at a time in its order, on every distinct
    # value at once; its two math.log2 calls through map (libm's, called from C): to the bit
    inside = (distinct > 0.0) & (distinct < 1.0)
    v = distinct[inside]
    log_v = np.fromiter(map(math.log2, v.tolist()), dtype=float, count=v.size)
    log_rest = np.fromiter(map(math.log2, (1.0 - v).tolist()), dtype=float, count=v.size)
    entropy = np.zeros(distinct.size)
    entropy[inside] = -(v * log_v + (1.0 - v) * log_rest)
    weights = distinct / (entropy + ENTROPY_EPS)
    return weights[where].reshape(c.shape)


WEIGHTS: dict[str, Callable[[Floats], Floats]] = {
    "majority": lambda c: np.ones_like(c),
    "confidence_weighted": lambda c: c,
    "sqrt_confidence_weighted": np.sqrt,  # IEEE square root, as math.sqrt
    "entropy_weighted": _entropy_weight,
}
"""The weight of a vote of confidence ``c`` in each weighted rule (voting's lambdas, on arrays)."""

COLUMNAR_METHODS = (*WEIGHTS, "mean_probability")
"""The methods :func:`fuse_columns` fuses (every rule of :mod:`judgefuse.fusion.voting`)."""
assert set(COLUMNAR_METHODS) == set(VOTING_FUNCTIONS), "a voting rule without its columnar form"


def _counts(columns: VoteColumns) -> tuple[Ints, Ints, Ints]:
    n_valid = row_count(columns.valid)
    n_ties = row_count(columns.tie)
    n_invalid = row_count(columns.present) - n_valid - n_ties
    return n_valid, n_ties, n_invalid


def single_vote_rows(columns: VoteColumns, n_valid: Ints, n_ties: Ints) -> tuple[Bools, Bools, Floats]:
    """Items with exactly one valid vote and no tie vote: (mask, its vote says A, its confidence)."""
    single = (n_valid == 1) & (n_ties == 0)
    if columns.valid.shape[1] == 0:  # no item has a vote
        return single, np.zeros(single.size, dtype=bool), np.zeros(single.size)
    slot = np.argmax(columns.valid, axis=1)
    rows = np.arange(columns.n_items)
    return single, columns.says_a[rows, slot], columns.confidence[rows, slot]


def fuse_columns(method: str, columns: VoteColumns) -> FusedColumns:
    """``method`` (a name in :data:`COLUMNAR_METHODS`) over every item of ``columns``."""
    if method == "mean_probability":
        return _mean_probability(columns)
    weight = WEIGHTS.get(method)
    if weight is None:
        raise KeyError(f"no columnar form of {method!r}; columnar methods: {', '.join(COLUMNAR_METHODS)}")
    n_valid, n_ties, n_invalid = _counts(columns)
    valid_a = columns.valid & columns.says_a
    valid_b = columns.valid & ~columns.says_a
    w = weight(columns.confidence)
    half = float(weight(np.asarray([TIE_VOTE_P_A]))[0]) / 2.0
    # the per-item rule fsums the letter's weights and half a tie vote's weight per tie vote
    tie_terms = np.where(columns.tie, half, 0.0)
    score_a = fsum_rows(np.where(valid_a, w, tie_terms))
    score_b = fsum_rows(np.where(valid_b, w, tie_terms))
    top_a = np.where(valid_a, columns.confidence, -1.0).max(axis=1, initial=-1.0)
    top_b = np.where(valid_b, columns.confidence, -1.0).max(axis=1, initial=-1.0)
    scores_tie = _close(score_a, score_b)
    tops_tie = _close(top_a, top_b)
    wins_a = np.where(scores_tie, top_a > top_b, score_a > score_b)
    total = score_a + score_b
    winner = np.where(wins_a, score_a, score_b)
    with np.errstate(invalid="ignore", divide="ignore"):
        confidence = np.where(total <= 0.0, 0.5, winner / np.where(total == 0.0, 1.0, total))
    answer = np.where(wins_a, A, B).astype(np.int8)
    answer[scores_tie & tops_tie] = TIE
    tie_broken = scores_tie & ~tops_tie
    # the rules before the scores: no valid vote, then one valid vote
    single, single_a, single_conf = single_vote_rows(columns, n_valid, n_ties)
    answer[single] = np.where(single_a[single], A, B)
    confidence = np.where(single, single_conf, confidence)
    none_valid = n_valid == 0
    answer[none_valid] = np.where(n_ties[none_valid] > 0, TIE, NONE)
    tie_broken &= ~(single | none_valid)
    return _finish(method, answer, confidence, n_valid, n_invalid, tie_broken)


def _mean_probability(columns: VoteColumns) -> FusedColumns:
    n_valid, n_ties, n_invalid = _counts(columns)
    carried = ~np.isnan(columns.p_a)
    n_carried = row_count(carried)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = fsum_rows(np.where(carried, columns.p_a, 0.0)) / n_carried
    answer = np.where(mean > 0.5, A, B).astype(np.int8)
    answer[_close(mean, np.full_like(mean, 0.5))] = TIE
    answer[n_carried == 0] = NONE
    confidence = np.maximum(mean, 1.0 - mean)
    single, single_a, single_conf = single_vote_rows(columns, n_valid, n_ties)
    answer[single] = np.where(single_a[single], A, B)
    confidence = np.where(single, single_conf, confidence)
    return _finish("mean_probability", answer, confidence, n_valid, n_invalid, np.zeros(answer.size, dtype=bool))


def _finish(
    method: str, answer: NDArray[np.int8], confidence: Floats, n_valid: Ints, n_invalid: Ints, tie_broken: Bools
) -> FusedColumns:
    """Confidence clipped to [0, 1] and ``p_a`` as ``voting._verdict`` makes them; 0.5 for
    an exact tie and an undecided item, whose counts are those the per-item verdicts carry."""
    letter = (answer == A) | (answer == B)
    confidence = np.where(letter, np.clip(np.nan_to_num(confidence, nan=0.5), 0.0, 1.0), 0.5)
    p_a = np.where(answer == A, confidence, np.where(answer == B, 1.0 - confidence, 0.5))
    # an undecided verdict of the per-item rules counts no valid vote
    n_valid = np.where(answer == NONE, 0, n_valid)
    return FusedColumns(method, answer, confidence, p_a, n_valid, n_invalid, tie_broken & letter)
