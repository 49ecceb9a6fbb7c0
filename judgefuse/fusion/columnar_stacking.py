"""``stacked`` and ``offset_stacked`` over arrays: features, fits and verdicts for many items at
once.

Why: :class:`~judgefuse.fusion.stacking.StackedFusion` builds its feature matrix item by item
(``_raw_rows``: a dict of the item's votes by judge, ``math.fsum`` per feature), and
cross-fitting builds it again for every fold's training and held-out items: 80% of a
100,000-item ``eval``. Here every judge's features (feature set 2, :data:`~.stacking.VOTE_KINDS`:
``logodds``, ``missing``, ``invalid``, ``tie``, ``direction``; and the judges' numeric signals)
are computed once for every item from the vote arrays (:class:`StackingColumns`, from
:class:`~judgefuse.fusion.columnar.VoteColumns`), and a fold's matrix is a choice of rows and of
the judges and signal keys its training items saw, as ``fit`` freezes them.

The numbers are the per-item path's to the bit where it matters: each feature is the same
arithmetic on the same values (a judge's log-odds are ``math.log`` of each distinct ``p_a``, as
``_logodds`` computes them, averaged with ``math.fsum``'s correctly rounded sum,
:func:`~judgefuse.fusion.columnar.fsum_rows`; the signals' standardisation is the same
``nanmean`` over the same training rows in the same order), so a fold's matrix equals the one
``StackedFusion._matrix`` builds, and ``stacked`` is the same scikit-learn fit on it: its
coefficients and probabilities are the reference's. ``offset_stacked``'s fits
(:func:`~judgefuse.fusion.offset_stacking.fit_offset_logistic`: Newton from zero, a step halved
while it raises the penalised loss, until a step is below 1e-10; 40 of them per training set in
the penalty search) are solved here by :func:`fit_offset` (see the comments above it): the same
penalised optimum to about 1e-13, not the same iterates, so the inner cross-validation's choice
of penalty is the reference's unless two candidates' scores lie within about that of the
standard-error rule's boundary, and the probabilities agree to about 1e-15. The tests compare
every verdict with ``cross_fit_predict`` of the per-item methods (``stacked`` to the bit,
``offset_stacked`` to 1e-9) on the shared data sets, on panels with every feature's branch and on
the synthetic generator (benchmarks/synthetic_panels.py).

The per-item classes stay what the service fits and serves (they save and restore their
parameters); this module is what ``judgefuse eval`` and ``tune`` cross-fit with.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from judgefuse.fusion.columnar import NONE, A, B, Bools, Floats, FusedColumns, Ints, VoteColumns, fsum_rows, row_count
from judgefuse.fusion.crossfit import folds_of, label_array
from judgefuse.fusion.offset_stacking import (
    INNER_FOLDS,
    INTERCEPT_FLOOR,
    LOSS_TOLERANCE,
    PENALTIES,
    RULE,
    OffsetStackedFusion,
    inner_folds,
    log_losses,
    penalised_loss,
    penalty_from_losses,
    penalty_search_rows,
    sigmoid,
)
from judgefuse.fusion.registry import FusionMethod, NotEnoughLabels, get_method
from judgefuse.fusion.stacking import (
    FEATURE_SET,
    P_CLIP,
    VOTE_KINDS,
    StackedFusion,
    check_label_counts,
    logistic,
    row_dot,
)
from judgefuse.judges.types import Letter

__all__ = [
    "StackingColumns",
    "columnar_stacking",
    "cross_fit_stacking",
    "fit_and_apply_stacking",
    "fit_method",
    "fit_offset",
]

ABSENT = {"logodds": 0.0, "missing": 1.0, "invalid": 0.0, "tie": 0.0, "direction": 0.0}
"""A judge's features on an item it did not vote on (``_judge_features`` of no votes)."""
assert FEATURE_SET == 2 and tuple(ABSENT) == VOTE_KINDS, "columnar stacking computes feature set 2"


def columnar_stacking(method: FusionMethod) -> bool:
    """True for ``stacked`` and ``offset_stacked`` themselves (a subclass may change the features)."""
    return type(method) in (StackedFusion, OffsetStackedFusion)


def logodds_exact(p: Floats) -> Floats:
    """``math.log(q) - math.log1p(-q)`` with ``q`` = ``p`` clipped to [P_CLIP, 1 - P_CLIP], per
    element: ``stacking._logodds`` to the bit (``math``'s functions, once per distinct value)."""
    distinct, where = np.unique(p, return_inverse=True)
    q = np.minimum(np.maximum(distinct, P_CLIP), 1.0 - P_CLIP)  # min(max(...)) of each; a NaN stays NaN
    log_q = np.fromiter(map(math.log, q.tolist()), dtype=float, count=q.size)  # libm's, called from C
    log1p_q = np.fromiter(map(math.log1p, (-q).tolist()), dtype=float, count=q.size)
    return (log_q - log1p_q)[where].reshape(p.shape) if distinct.size else np.zeros_like(p)


@dataclass(frozen=True)
class StackingColumns:
    """Every judge's stacking features on every item, read once from the vote arrays.

    ``judges`` are the judges of the data sorted by name; ``features[i, j]`` is judge ``j``'s
    :data:`~.stacking.VOTE_KINDS` on item ``i`` (its absent values where it did not vote);
    ``voted[i, j]`` whether it cast any vote there. ``signal_keys`` are the ``(judge, key)``
    pairs any vote carried, sorted; ``signals[i, s]`` the mean of the judge's values of that key
    on the item (NaN where none), ``has_signal[i, s]`` whether it had one. ``rule`` is the
    cold-start rule's log-odds per item (``offset_stacking.rule_logodds``).
    """

    judges: tuple[str, ...]
    features: Floats
    voted: Bools
    signal_keys: tuple[tuple[str, str], ...]
    signals: Floats
    has_signal: Bools
    rule: Floats
    n_valid: Ints
    n_votes: Ints

    @property
    def n_items(self) -> int:
        return int(self.voted.shape[0])

    @classmethod
    def of(cls, columns: VoteColumns) -> StackingColumns:
        """:meth:`from_columns`, computed once per vote arrays (kept in their ``derived``)."""
        found = columns.derived.get("stacking")
        if not isinstance(found, StackingColumns):
            found = columns.derived["stacking"] = cls.from_columns(columns)
        return found

    @classmethod
    def from_columns(cls, columns: VoteColumns) -> StackingColumns:
        n = columns.n_items
        carried = ~np.isnan(columns.p_a)
        logodds = logodds_exact(np.where(carried, columns.p_a, 0.5))
        failed = columns.present & ~columns.valid & ~columns.tie
        direction = np.where(columns.valid, np.where(columns.says_a, 1.0, -1.0), 0.0)
        order = sorted(range(len(columns.judges)), key=lambda j: columns.judges[j])
        judges = tuple(columns.judges[j] for j in order)
        features = np.empty((n, len(judges), len(VOTE_KINDS)))
        voted = np.zeros((n, len(judges)), dtype=bool)
        keys: list[tuple[str, str]] = []
        signal_values: list[Floats] = []
        signal_present: list[Bools] = []
        for k, j in enumerate(order):
            mine = columns.judge == j
            count = row_count(mine)
            some = count > 0
            voted[:, k] = some
            kept = mine & carried
            n_kept = row_count(kept)
            with np.errstate(invalid="ignore", divide="ignore"):
                features[:, k, 0] = np.where(n_kept > 0, fsum_rows(np.where(kept, logodds, 0.0)) / n_kept, 0.0)
                features[:, k, 3] = np.where(some, row_count(mine & columns.tie) / count, 0.0)
                features[:, k, 4] = np.where(some, np.where(mine, direction, 0.0).sum(axis=1) / count, 0.0)
            features[:, k, 1] = np.where(n_kept > 0, 0.0, 1.0)
            features[:, k, 2] = np.where(some & ~(mine & ~failed).any(axis=1), 1.0, 0.0)
            for key in sorted(columns.signals):
                values = columns.signals[key]
                has = mine & ~np.isnan(values)
                n_has = row_count(has)
                if not n_has.any():
                    continue
                keys.append((judges[k], key))
                with np.errstate(invalid="ignore", divide="ignore"):
                    signal_values.append(np.where(n_has > 0, fsum_rows(np.where(has, values, 0.0)) / n_has, np.nan))
                signal_present.append(n_has > 0)
        order_keys = sorted(range(len(keys)), key=lambda s: keys[s])
        signals = np.empty((n, len(keys)))
        has_signal = np.zeros((n, len(keys)), dtype=bool)
        for s, at in enumerate(order_keys):
            signals[:, s] = signal_values[at]
            has_signal[:, s] = signal_present[at]
        n_carried = row_count(carried)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = fsum_rows(np.where(carried, columns.p_a, 0.0)) / n_carried
        rule = np.where(n_carried > 0, logodds_exact(np.where(n_carried > 0, mean, 0.5)), 0.0)
        return cls(
            judges,
            features,
            voted,
            tuple(keys[s] for s in order_keys),
            signals,
            has_signal,
            rule,
            row_count(columns.valid),
            row_count(columns.present),
        )

    def judge_index(self, names: Sequence[str]) -> Ints:
        """Each name's position in :attr:`judges` (-1 for a judge this data does not have)."""
        at = {name: j for j, name in enumerate(self.judges)}
        return np.asarray([at.get(name, -1) for name in names], dtype=np.int64)

    def raw_signals(self, rows: Ints, keys: Sequence[tuple[str, str]]) -> Floats:
        """The raw signal block of ``rows`` for ``keys`` (NaN where a key is absent)."""
        at = {key: s for s, key in enumerate(self.signal_keys)}
        out = np.full((rows.size, len(keys)), np.nan)
        for c, key in enumerate(keys):
            if key in at:
                out[:, c] = self.signals[rows, at[key]]
        return out

    def matrix(self, rows: Ints, model: StackingModel) -> Floats:
        """``StackedFusion._matrix`` of the items at ``rows`` for a model's judges and signals."""
        index = self.judge_index(model.judges)
        block = np.empty((rows.size, index.size, len(VOTE_KINDS)))
        known = index >= 0
        if known.all():
            block[:] = self.features[np.ix_(rows, index)] if rows.size else block
        else:
            block[:, known] = self.features[np.ix_(rows, index[known])]
            block[:, ~known] = [ABSENT[kind] for kind in VOTE_KINDS]
        if not model.signal_keys:
            return block.reshape(rows.size, -1)
        sig = (self.raw_signals(rows, model.signal_keys) - model.mean) / model.std
        sig = np.where(np.isnan(sig), 0.0, sig)
        return np.hstack([block.reshape(rows.size, -1), sig])

    def seen(self, rows: Ints, use_signals: bool) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
        """The judges (sorted) and signal keys a fit on ``rows`` freezes (``_freeze_features``)."""
        voted: list[bool] = np.asarray(self.voted[rows].any(axis=0), dtype=bool).tolist()
        judges = tuple(name for name, any_vote in zip(self.judges, voted, strict=True) if any_vote)
        keys: tuple[tuple[str, str], ...] = ()
        if use_signals:
            present: list[bool] = np.asarray(self.has_signal[rows].any(axis=0), dtype=bool).tolist()
            keys = tuple(key for key, has in zip(self.signal_keys, present, strict=True) if has)
        return judges, keys


@dataclass(frozen=True)
class StackingModel:
    """A fitted ``stacked`` or ``offset_stacked``: what its ``predict`` needs."""

    judges: tuple[str, ...]
    signal_keys: tuple[tuple[str, str], ...]
    mean: Floats
    std: Floats
    coef: Floats
    intercept: float
    scale: float | None = None
    """``offset_stacked``'s rule scale ``s`` (None for ``stacked``)."""
    penalty: float | None = None

    def p_a(self, table: StackingColumns, rows: Ints) -> Floats:
        """P(A) of the items at ``rows`` (``predict_p_a``, feature set 2)."""
        x = table.matrix(rows, self)
        if self.scale is None:
            z = row_dot(x, self.coef) + self.intercept
            return np.asarray(np.exp(-np.logaddexp(0.0, -z)), dtype=float)
        return sigmoid((1.0 + self.scale) * table.rule[rows] + self.intercept + row_dot(x, self.coef))


def _standardisation(table: StackingColumns, rows: Ints, keys: Sequence[tuple[str, str]]) -> tuple[Floats, Floats]:
    """The signal mean and std ``_freeze_features`` computes on the training ``rows``."""
    if not keys:
        return np.zeros(0), np.ones(0)
    raw = table.raw_signals(rows, keys)
    mean = np.nanmean(raw, axis=0)
    std = np.sqrt(np.nanmean((raw - mean) ** 2, axis=0))
    return mean, np.where(std > 1e-12, std, 1.0)


def fit_stacking(method: StackedFusion, table: StackingColumns, rows: Ints, label_a: Bools) -> StackingModel:
    """``method.fit`` on the items at ``rows`` with labels ``label_a`` (its checks and messages)."""
    n_a = int(label_a.sum())
    check_label_counts(n_a, int(label_a.size) - n_a, min_labels=method.min_labels, min_per_class=1)
    y = label_a.astype(np.int64)
    judges, keys = table.seen(rows, method.use_signals)
    if not judges:
        raise NotEnoughLabels("no votes in any batch: nothing to fit on")
    mean, std = _standardisation(table, rows, keys)
    frozen = StackingModel(judges, keys, mean, std, np.zeros(0), 0.0)
    if not isinstance(method, OffsetStackedFusion):
        from sklearn.linear_model import LogisticRegression

        model = LogisticRegression(C=method.C, solver="newton-cholesky", max_iter=200, tol=1e-8)
        model.fit(table.matrix(rows, frozen), y)
        return StackingModel(judges, keys, mean, std, model.coef_.ravel().copy(), float(model.intercept_[0]))
    width = 1 + len(judges) * len(VOTE_KINDS) + len(keys)

    def design(order: Ints) -> Floats:
        """The design of the training rows in ``order``, after a spare column, filled a chunk at a
        time: it is the only copy (200 MB at 10^6 items)."""
        picked = rows[order]
        out = np.empty((picked.size, width + 1))
        for lo in range(0, picked.size, CHUNK_ROWS):
            chunk = picked[lo : lo + CHUNK_ROWS]
            out[lo : lo + chunk.size, 1] = table.rule[chunk]
            out[lo : lo + chunk.size, 2:] = table.matrix(chunk, frozen)
        return out

    penalty, beta = fit_offset(design, y.astype(float))
    return StackingModel(judges, keys, mean, std, beta[2:], float(beta[0]), float(beta[1]), penalty)


# -- offset stacking's Newton fits ------------------------------------------------------------
#
# fit_offset_logistic's problem, per penalty lam: minimise the log-loss of
# sigmoid(offset + b + x w) + lam/2 |w|^2 + max(lam, INTERCEPT_FLOOR)/2 b^2 over (b, w): strictly
# convex, so every method that converges finds the same optimum. The reference solves each of the
# penalty search's 35 fits (7 finite penalties x 5 inner folds) by Newton's method from zero, a
# Hessian over all its rows per step. Here, with fewer passes over the rows:
# * the columns are reduced first: an all-zero column has weight 0; m identical columns (a
#   judge's `missing` and `invalid` when its failed votes carry no p_a) share one weight, found
#   as one column with 1/m of the penalty;
# * the 35 fits are solved together (InnerFolds.solve): one pass over the rows, in chunks, gives
#   every fit's gradient (a matrix product with a column per fit, each fit's held-out fold
#   zeroed); the Hessians come from a sample of the rows (HESSIAN_ROWS), per penalty at its
#   folds' mean solution and per fold the other folds' blocks summed; while steps are large
#   they are taken afresh at every step and a step is halved while it raises its fit's
#   penalised loss (as the reference's); near the optimum BFGS updates them instead;
# * designs with many columns (LLMBar's 65 judges: 333) fit fold by fold with Newton's method,
#   each penalty started at the previous one's optimum (InnerFolds.solve_each);
# * the chosen penalty's fit on every row is Newton's method (as the reference's), started at
#   the mean of its inner folds' solutions.
# Each fit stops when a step is below 1e-10, as the reference does.

TOLERANCE = 1e-10
REFRESH_ABOVE = 1e-2
"""A step larger than this means the Hessians were taken too far from the solution: take them again."""
MAX_STEPS = 200
BATCHED_COLUMNS = 64
"""Designs with more columns fit the inner folds one by one (:meth:`InnerFolds.solve_each`)."""
HESSIAN_ROWS = 8192
"""Rows the inner fits' Hessians are taken on (spread over the folds)."""
CHUNK_ROWS = 32768
"""Rows per matrix product of the inner fits' gradients (memory: rows x fits)."""


@dataclass(frozen=True)
class ReducedDesign:
    """The columns of a design that carry information: ``keep[c]`` is the first of each group of
    identical columns (all-zero columns dropped), ``group[j]`` the reduced column of design
    column ``j`` (-1 for a zero column) and ``size`` each reduced column's group size."""

    keep: Ints
    group: Ints
    size: Floats

    @classmethod
    def of(cls, x: Floats) -> ReducedDesign:
        d = x.shape[1]
        nonzero = (x != 0.0).any(axis=0).tolist()
        # columns are compared in full only when two random projections of them agree
        probe = np.random.default_rng(0).random((x.shape[0], 2))
        signature = [tuple(row) for row in (x.T @ probe).tolist()]
        group = np.full(d, -1, dtype=np.int64)
        keep: list[int] = []
        for j in range(d):
            if not nonzero[j]:
                continue
            for g, first in enumerate(keep):
                if signature[first] == signature[j] and np.array_equal(x[:, j], x[:, first]):
                    group[j] = g
                    break
            else:
                group[j] = len(keep)
                keep.append(j)
        size = np.bincount(group[group >= 0], minlength=len(keep)).astype(float)
        return cls(np.asarray(keep, dtype=np.int64), group, size)

    def penalties(self, lam: float) -> Floats:
        """[intercept, reduced columns]: a group of m columns shares one weight at lam / m."""
        return np.concatenate(([max(lam, INTERCEPT_FLOOR)], lam / self.size))

    def expand(self, beta: Floats) -> Floats:
        """[intercept, weight of every design column] from [intercept, reduced weights]."""
        shares = beta[1:] / self.size if self.size.size else beta[1:]
        weights = np.where(self.group >= 0, shares[np.maximum(self.group, 0)] if shares.size else 0.0, 0.0)
        return np.concatenate((beta[:1], weights))


def _expit(z: Floats) -> Floats:
    """``offset_stacking``'s sigmoid (z clipped to +-35), in place (faster than scipy's expit)."""
    np.clip(z, -35.0, 35.0, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    z += 1.0
    return np.reciprocal(z, out=z)


def _newton(x1: Floats, y: Floats, shift: Floats, penalty: Floats, beta: Floats) -> Floats:
    """The optimum of one fit by Newton's method from ``beta`` (a step halved while it raises
    the penalised loss, as ``fit_offset_logistic`` does), until a step is below
    :data:`TOLERANCE` (``x1``: a ones column, then the reduced columns; ``shift``: added to
    the coefficients in the linear predictor, 1 at the offset's column)."""
    beta = beta.copy()
    diagonal = np.diag(penalty)
    loss = penalised_loss(x1 @ (beta + shift), y, penalty, beta)
    for _ in range(MAX_STEPS):
        p = _expit(x1 @ (beta + shift))
        gradient = x1.T @ (p - y) + penalty * beta
        hessian = (x1 * (p * (1.0 - p))[:, None]).T @ x1 + diagonal
        step = np.linalg.solve(hessian, gradient)
        for _halving in range(60):
            trial = penalised_loss(x1 @ (beta - step + shift), y, penalty, beta - step)
            if trial <= loss + LOSS_TOLERANCE * (1.0 + abs(loss)):
                break
            step = step / 2.0
        beta -= step
        loss = trial
        if float(np.abs(step).max()) < TOLERANCE:
            break
    return beta


class InnerFolds:
    """Every fit of the inner cross-validation on one training set at once: each penalty of
    :data:`PENALTIES` on each inner fold (see the comments above). ``x1`` is the design with a
    leading ones column (the intercept's); ``shift`` is added to every fit's coefficients in
    the linear predictor (1 at the offset's column: ``offset + b + x w = x1 (beta + shift)``)."""

    def __init__(self, x1: Floats, y: Floats, shift: Floats, bounds: Sequence[int], order: Ints) -> None:
        """``x1`` and ``y`` in fold order: fold f's rows are ``bounds[f]:bounds[f + 1]``, taken
        from the training set's rows ``order``."""
        self.x1 = x1
        self.y = y
        self.shift = shift
        self.bounds = [int(b) for b in bounds]
        self.order = order
        self.k = len(self.bounds) - 1
        # the rows the Hessians are taken on: evenly spaced in each fold's block
        self.sample: list[tuple[Floats, float]] = []
        for f in range(self.k):
            lo, hi = self.bounds[f], self.bounds[f + 1]
            stride = max(1, -(-(hi - lo) // max(1, HESSIAN_ROWS // self.k)))
            rows = self.x1[lo:hi:stride]
            self.sample.append((rows, (hi - lo) / max(1, rows.shape[0])))

    def evaluate(
        self, betas: Floats, penalty: Floats, folds: Ints, *, with_loss: bool = False
    ) -> tuple[Floats, Floats | None]:
        """Row c: the gradient (and with ``with_loss`` the penalised loss) of fit c, whose fold is
        ``folds[c]``, at ``betas[c]``, over the training rows outside its fold; rows taken in
        chunks (memory: chunk x fits)."""
        weights = np.ascontiguousarray((betas + self.shift).T)
        out = np.zeros((betas.shape[1], betas.shape[0]))
        loss = np.zeros(betas.shape[0]) if with_loss else None
        columns = [np.flatnonzero(folds == f) for f in range(self.k)]
        for lo in range(0, self.y.size, CHUNK_ROWS):
            hi = min(lo + CHUNK_ROWS, self.y.size)
            held = [(max(lo, self.bounds[f]) - lo, min(hi, self.bounds[f + 1]) - lo, columns[f]) for f in range(self.k)]
            z = self.x1[lo:hi] @ weights
            if loss is not None:
                terms = np.logaddexp(0.0, z) - self.y[lo:hi, None] * z
                for a, b, held_columns in held:  # a fold's own rows are held out of its fits
                    if a < b:
                        terms[a:b, held_columns] = 0.0
                loss += terms.sum(axis=0)
            r = _expit(z)
            r -= self.y[lo:hi, None]
            for a, b, held_columns in held:
                if a < b:
                    r[a:b, held_columns] = 0.0
            out += self.x1[lo:hi].T @ r
        if loss is not None:
            loss += 0.5 * (penalty * betas * betas).sum(axis=1)
        return out.T + penalty * betas, loss

    def inverse_hessians(self, betas: Floats, penalty: Floats) -> Floats:
        """Each fit's inverse Hessian: per penalty, the block Hessians at the mean of its folds'
        fits (from the sampled rows, scaled up), fold f's the sum of the other blocks'."""
        groups = betas.reshape(-1, self.k, betas.shape[1])
        centers = groups.mean(axis=1) + self.shift
        blocks = np.empty((groups.shape[0], self.k, betas.shape[1], betas.shape[1]))
        for f, (rows, scale) in enumerate(self.sample):
            p = _expit(rows @ centers.T)
            w = p * (1.0 - p) * scale
            for g in range(groups.shape[0]):
                blocks[g, f] = (rows * w[:, g, None]).T @ rows
        hessians = blocks.sum(axis=1, keepdims=True) - blocks
        diagonal = np.arange(betas.shape[1])
        hessians = hessians.reshape(betas.shape[0], betas.shape[1], betas.shape[1])
        hessians[:, diagonal, diagonal] += penalty
        return np.asarray(np.linalg.inv(hessians))

    def solve(self, penalty: Floats, start: Floats | None = None, tolerance: float = TOLERANCE) -> Floats:
        """Every fit's optimum (row c: penalty row c; fold c % k), quasi-Newton from ``start``
        (zero): while steps are large, Hessians from the sampled rows at every step and a step
        halved while it raises its fit's penalised loss; then BFGS updates. A fit stops when its
        step is below ``tolerance``."""
        folds = np.arange(penalty.shape[0]) % self.k
        betas = np.zeros_like(penalty) if start is None else start.copy()
        done = np.zeros(betas.shape[0], dtype=bool)
        gradient, loss = self.evaluate(betas, penalty, folds, with_loss=True)
        inverse: Floats | None = None
        for _ in range(MAX_STEPS):
            if inverse is None:
                inverse = self.inverse_hessians(betas, penalty)
            steps = np.einsum("cij,cj->ci", inverse, gradient)
            steps[done] = 0.0
            careful = float(np.abs(steps).max()) > REFRESH_ABOVE
            if careful and loss is None:
                loss = self.evaluate(betas, penalty, folds, with_loss=True)[1]
            trial = betas - steps
            live = np.flatnonzero(~done)  # a finished fit is not evaluated again
            new = gradient.copy()
            new[live], live_loss = self.evaluate(trial[live], penalty[live], folds[live], with_loss=careful)
            if careful:
                assert loss is not None and live_loss is not None
                new_loss: Floats | None = loss.copy()
                assert new_loss is not None
                new_loss[live] = live_loss
                for _halving in range(60):
                    rises = new_loss > loss + LOSS_TOLERANCE * (1.0 + np.abs(loss))
                    if not rises.any():
                        break
                    steps[rises] /= 2.0
                    trial[rises] = betas[rises] - steps[rises]
                    again, again_loss = self.evaluate(trial[rises], penalty[rises], folds[rises], with_loss=True)
                    new[rises], new_loss[rises] = again, again_loss
            else:
                new_loss = None
            loss = new_loss
            betas = trial
            done |= np.abs(steps).max(axis=1) < tolerance
            if done.all():
                break
            if careful:
                inverse = None
            else:  # BFGS updates of each fit's inverse Hessian (rank two, skipped without curvature)
                s, change = -steps, new - gradient
                curvature = np.einsum("ci,ci->c", change, s)
                rho = np.where((curvature > 0.0) & ~done, 1.0 / np.where(curvature > 0.0, curvature, 1.0), 0.0)
                h_change = np.einsum("cij,cj->ci", inverse, change)
                scale = rho * rho * np.einsum("ci,ci->c", change, h_change) + rho
                inverse -= rho[:, None, None] * (
                    h_change[:, :, None] * s[:, None, :] + s[:, :, None] * h_change[:, None, :]
                )
                inverse += scale[:, None, None] * (s[:, :, None] * s[:, None, :])
            gradient = new
        return betas

    def solve_each(self, penalties: Sequence[Floats]) -> Floats:
        """Every fit's optimum ([penalty, fold]) by Newton's method, fold by fold, each penalty
        started at the previous one's optimum: for designs with many columns, where the
        batched fits' per-fit Hessians cost more than the passes they save."""
        out = np.empty((len(penalties), self.k, self.x1.shape[1]))
        for f in range(self.k):
            train = np.ones(self.y.size, dtype=bool)
            train[self.bounds[f] : self.bounds[f + 1]] = False
            x1, y = self.x1[train], self.y[train]
            beta = np.zeros(self.x1.shape[1])
            for p, penalty in enumerate(penalties):
                beta = out[p, f] = _newton(x1, y, self.shift, penalty, beta)
        return out

    def losses(self, betas: Floats) -> Floats:
        """Per item (in the training set's order), its log-loss under its own fold's fit
        (``betas[f]``: fold f's), as ``held_out_losses`` computes it."""
        out = np.empty(self.y.size)
        offset = self.x1 @ self.shift
        for f in range(self.k):
            block = slice(self.bounds[f], self.bounds[f + 1])
            z = offset[block] + betas[f, 0] + self.x1[block, 1:] @ betas[f, 1:]
            out[self.order[block]] = log_losses(self.y[block], sigmoid(z))
        return out


def fit_offset(design: Floats | Callable[[Ints], Floats], y: Floats) -> tuple[float, Floats]:
    """``choose_penalty`` and ``fit_offset_logistic`` at the chosen penalty, for a design whose
    first column is the offset (as ``OffsetStackedFusion.fit`` builds it): (penalty, [intercept,
    weights of every column of the design]), the reference's optimum (see the comments above).

    ``design`` may be a function of a row order giving the design of the rows in that order after
    a spare column: the rows are then laid out once, in the inner folds' order, the spare column
    becomes the intercept's and the useful columns are packed in place after it (no copy). Past
    ``PENALTY_SEARCH_ROWS`` labels the search runs on the rows ``penalty_search_rows`` picks, as
    the reference's does, and every row is laid out a second time for the final fit."""
    search = penalty_search_rows(y.size)
    searched = y if search is None else y[search]
    k = min(INNER_FOLDS, int(min(searched.sum(), searched.size - searched.sum())))
    folds = inner_folds(searched, k) if k >= 2 else [np.arange(searched.size)]
    order = np.concatenate(folds)
    if search is not None:
        order = search[order]
    x1, shift, reduced = _laid_out(design, order)
    start = np.zeros(x1.shape[1])
    lam = RULE
    if k >= 2:
        bounds = np.cumsum([0, *(fold.size for fold in folds)]).tolist()
        inner = InnerFolds(x1, y[order], shift, bounds, np.concatenate(folds))
        finite = [candidate for candidate in PENALTIES if not math.isinf(candidate)]
        losses = {RULE: inner.losses(np.zeros((k, x1.shape[1])))}
        if x1.shape[1] <= BATCHED_COLUMNS:
            penalty = np.repeat([reduced.penalties(candidate) for candidate in finite], k, axis=0)
            betas = inner.solve(penalty).reshape(len(finite), k, -1)
        else:
            betas = inner.solve_each([reduced.penalties(candidate) for candidate in finite])
        losses.update((candidate, inner.losses(betas[p])) for p, candidate in enumerate(finite))
        lam = penalty_from_losses(losses)
        if not math.isinf(lam):
            start = betas[finite.index(lam)].mean(axis=0)
    if math.isinf(lam):
        return lam, np.zeros(reduced.group.size + 1)
    if search is not None:  # the final fit is on every row, laid out (and reduced) afresh
        searched_keep = reduced.keep
        order = np.arange(y.size)
        x1, shift, reduced = _laid_out(design, order)
        if not np.array_equal(reduced.keep, searched_keep):
            start = np.zeros(x1.shape[1])  # a column the search never saw: Newton from zero, as the reference
    return lam, reduced.expand(_newton(x1, y[order], shift, reduced.penalties(lam), start))


def _laid_out(design: Floats | Callable[[Ints], Floats], order: Ints) -> tuple[Floats, Floats, ReducedDesign]:
    """(a ones column then the reduced design columns of the rows in ``order``, the shift that
    adds the offset's coefficient 1, the reduction): see :func:`fit_offset`."""
    if callable(design):
        full = design(order)
    else:
        full = np.empty((order.size, design.shape[1] + 1))
        full[:, 1:] = design[order]
    reduced = ReducedDesign.of(full[:, 1:])
    full[:, 0] = 1.0
    for j, column in enumerate(reduced.keep.tolist()):  # left to right: a column moves only leftwards
        full[:, 1 + j] = full[:, 1 + column]
    x1 = full[:, : 1 + reduced.keep.size]
    shift = np.zeros(x1.shape[1])
    if reduced.group[0] >= 0:  # an all-zero offset adds nothing
        shift[1 + reduced.group[0]] = 1.0
    return x1, shift, reduced


# -- verdicts ----------------------------------------------------------------------------------


def _verdicts(name: str, table: StackingColumns, p_a: Floats, decided: Bools) -> FusedColumns:
    """``StackedFusion._verdict`` per item: A when P(A) >= 0.5 (an exact 0.5 is a broken tie),
    undecided (0.5) where no judge seen at fit voted."""
    answer = np.where(p_a >= 0.5, A, B).astype(np.int8)
    answer[~decided] = NONE
    p_a = np.where(decided, p_a, 0.5)
    confidence = np.maximum(p_a, 1.0 - p_a)
    tie_broken = decided & (p_a == 0.5)
    return FusedColumns(name, answer, confidence, p_a, table.n_valid, table.n_votes - table.n_valid, tie_broken)


def _stacking_method(name: str) -> StackedFusion:
    method = get_method(name)
    if not isinstance(method, StackedFusion) or not columnar_stacking(method):
        raise ValueError(f"{name!r} is not stacked or offset_stacked")
    return method


def cross_fit_stacking(
    name: str, columns: VoteColumns, labels: Sequence[Letter] | Bools, *, n_folds: int = 5, seed: int = 0
) -> FusedColumns:
    """Out-of-fold verdicts of ``stacked`` / ``offset_stacked`` for every item, as
    :func:`~judgefuse.fusion.crossfit.cross_fit_predict` gives them (same folds, same checks)."""
    method = _stacking_method(name)
    if len(labels) != columns.n_items:
        raise ValueError(f"length mismatch: {columns.n_items} batches, {len(labels)} labels")
    label_a = label_array(labels)
    folds = folds_of(label_a, n_folds=n_folds, seed=seed)
    table = StackingColumns.of(columns)
    p_a = np.empty(columns.n_items)
    decided = np.zeros(columns.n_items, dtype=bool)
    for test in folds:
        train = np.ones(columns.n_items, dtype=bool)
        train[test] = False
        rows = np.flatnonzero(train)
        model = fit_stacking(method, table, rows, label_a[rows])
        p_a[test] = model.p_a(table, test)
        decided[test] = table.voted[np.ix_(test, table.judge_index(model.judges))].any(axis=1)
    return _verdicts(name, table, p_a, decided)


def fit_method(method: StackedFusion, columns: VoteColumns, labels: Sequence[Letter] | Bools) -> StackedFusion:
    """``method.fit`` on every item of ``columns`` (an unfitted ``stacked`` or ``offset_stacked``),
    made over the arrays and set on ``method``, which then saves, restores and predicts like one
    fitted item by item: the same features and versioning, ``stacked``'s coefficients to the bit,
    ``offset_stacked``'s the same optimum to about 1e-13 (the module docstring)."""
    if not columnar_stacking(method):
        raise ValueError(f"{method.name!r} is not stacked or offset_stacked")
    if len(labels) != columns.n_items:
        raise ValueError(f"length mismatch: {columns.n_items} batches, {len(labels)} labels")
    model = fit_stacking(method, StackingColumns.of(columns), np.arange(columns.n_items), label_array(labels))
    method.freeze(model.judges, model.signal_keys, model.mean, model.std)
    if isinstance(method, OffsetStackedFusion):
        assert model.penalty is not None and model.scale is not None
        method.adopt_offset(model.penalty, model.intercept, model.scale, model.coef)
    else:
        method.adopt(logistic(model.coef, model.intercept, method.C))
    return method


def fit_and_apply_stacking(
    name: str, train: VoteColumns, labels: Sequence[Letter] | Bools, target: VoteColumns
) -> FusedColumns:
    """``stacked`` / ``offset_stacked`` fitted on every item of ``train`` and applied to
    ``target`` (eval's tie-labelled items)."""
    method = _stacking_method(name)
    if len(labels) != train.n_items:
        raise ValueError(f"length mismatch: {train.n_items} batches, {len(labels)} labels")
    table = StackingColumns.of(train)
    model = fit_stacking(method, table, np.arange(train.n_items), label_array(labels))
    other = StackingColumns.of(target)
    rows = np.arange(target.n_items)
    index = other.judge_index(model.judges)
    decided = np.asarray(other.voted[:, index[index >= 0]].any(axis=1), dtype=bool)
    return _verdicts(name, other, model.p_a(other, rows), decided)
