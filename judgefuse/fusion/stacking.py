"""Stacked (learned) fusion: L2 logistic regression on per-judge features.

Features, per judge seen at fit (sorted by name, frozen at fit):

* ``logodds``: ``logit(p_a)`` with ``p_a`` clipped to [1e-4, 1 - 1e-4] (signed: > 0 favours A);
  0 when the judge is absent or carries no ``p_a``. An abstaining vote that carries ``p_a``
  (e.g. from reward margins) contributes its log-odds.
* ``missing``: 1 when the judge is absent from the item or its vote carries no ``p_a``.
* ``invalid``: 1 when the judge's votes are present and all *failed* (no letter and no tie:
  abstained, unparsable, a transport error).
* ``tie``: the share of the judge's votes that say the answers are equally good. A tie is an
  answer, not a failure: its signed log-odds is 0 (``p_a`` 0.5, so ``missing`` is 0) and this
  flag lets the model learn what a judge's tie means (docs/design.md, 'Fusion').
* ``direction``: the vote's direction alone, +1 for A, -1 for B, 0 for a tie or no answer
  (averaged over the judge's votes). Without it the direction reached the model only multiplied
  by the confidence's log-odds, so a judge whose stated confidence is noise (uniform in
  [0.5, 1] whether right or wrong) is a noisy feature, and stacking loses to a plain vote count
  (75.7% against majority's 80.6% at 10,000 labels). With ``direction`` beside
  ``logodds`` (= direction x confidence log-odds) the model is a weighted vote whose weights grow
  with confidence exactly as far as the labels show confidence carries information: ``logodds``
  is the confidence's log-odds signed by the vote, so its weight is 0 when confidence says
  nothing. An unsigned confidence column (the log-odds of the stated confidence whatever the
  vote) was tried beside it and left out: it cost stacking 1.2 points of cross-fitted accuracy on
  JudgeBench (350 pairs, ten judges: 76.9% against 77.9% without it, 3 fold seeds) and gained
  nothing on the synthetic panels (benchmarks/synthetic_panels.py).

Which kinds a model uses is its **feature set** (:data:`FEATURE_SETS`), saved with its
parameters: 2 (all five); 1 (``logodds``, ``missing``, ``invalid``, ``tie``: models saved before
``direction`` existed); 0 (the first three, before ties had a column) reads a tie as ``invalid``, as when such a model was
fitted. A saved model predicts with the features it was fitted on, so an upgrade never changes
a served model's answers; its next refit uses the current set.
* one column per numeric ``signals`` key the judge carried at fit (e.g. a reward margin),
  standardised with the fit mean/std (std 0 -> 1); a missing value is imputed with the fit mean
  (0 after standardising).

When a judge casts several votes on one item (e.g. position swap replayed as two votes), their
log-odds and signals are averaged and a note says so. Judges unseen at fit are ignored at
predict (noted); judges seen at fit but absent get 0 and ``missing = 1``. When no judge seen
at fit voted at all, the verdict is undecided (``choice=None``, 0.5), not the label prior.

The model is ``sklearn.linear_model.LogisticRegression`` (L2, ``C=1.0`` by default, solver
newton-cholesky: exact Newton steps, fast and deterministic for the few features a panel has). ``p_a`` = predicted P(A); ``choice = A iff p_a > 0.5``, and an exact 0.5 goes to
A with ``tie_broken=True``; ``confidence = max(p_a, 1 - p_a)``; ``model_version`` = the first 12
hex digits of a SHA-256 over the feature names and fitted coefficients.

Fitting needs at least ``min_labels`` labels (default 10) and both classes, else
:class:`~judgefuse.fusion.registry.NotEnoughLabels` (the caller falls back to voting).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Self

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:  # sklearn costs ~1 s to import: only fitting pays for it
    from sklearn.linear_model import LogisticRegression

from judgefuse.fusion.registry import NotEnoughLabels, NotFitted, fusion_method
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote, Letter

P_CLIP = 1e-4
FEATURE_SETS: dict[int, tuple[str, ...]] = {
    0: ("logodds", "missing", "invalid"),
    1: ("logodds", "missing", "invalid", "tie"),
    2: ("logodds", "missing", "invalid", "tie", "direction"),
}
"""The per-judge features of each feature set, in column order (module docstring)."""
FEATURE_SET = 2
"""The feature set new fits use."""
VOTE_KINDS = FEATURE_SETS[FEATURE_SET]
"""The per-judge features of a new fit, in column order."""
LEGACY_KINDS = FEATURE_SETS[0]
"""The per-judge features of models saved before ties had their own column."""
_DIRECTION = {"A": 1.0, "B": -1.0}
PARAMS_FORMAT = "judgefuse.stacked/1"
"""The ``format`` tag of :meth:`StackedFusion.to_params` output."""


def check_labels(
    batches: Sequence[Sequence[JudgeVote]],
    labels: Sequence[str],
    *,
    min_labels: int = 1,
    min_per_class: int = 1,
) -> NDArray[np.int64]:
    """Validate labels against batches; return y (1 for A, 0 for B).

    Raises ``ValueError`` for a length mismatch or a label other than "A"/"B", and
    :class:`NotEnoughLabels` for too few labels or a class with too few members.
    """
    if len(batches) != len(labels):
        raise ValueError(f"length mismatch: {len(batches)} batches, {len(labels)} labels")
    bad = sorted({repr(label) for label in labels if label not in ("A", "B")})
    if bad:
        raise ValueError(f"labels must be 'A' or 'B', got {', '.join(bad[:5])}")
    y = np.array([1 if label == "A" else 0 for label in labels], dtype=np.int64)
    check_label_counts(int(y.sum()), int(y.size - y.sum()), min_labels=min_labels, min_per_class=min_per_class)
    return y


def check_label_counts(n_a: int, n_b: int, *, min_labels: int = 1, min_per_class: int = 1) -> None:
    """:func:`check_labels`' refusals from the class counts alone (labels held as arrays)."""
    if n_a + n_b < min_labels:
        raise NotEnoughLabels(f"{n_a + n_b} labels; at least {min_labels} are needed to fit")
    if min(n_a, n_b) < min_per_class:
        raise NotEnoughLabels(
            f"labels have {n_a} A and {n_b} B; each class needs at least {min_per_class} "
            f"(a single class cannot be fitted)"
        )


def logistic(coef: NDArray[np.float64], intercept: float, C: float) -> LogisticRegression:
    """A scikit-learn logistic regression with these coefficients, as if fitted (classes 0, 1)."""
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=C)
    model.coef_ = np.asarray(coef, dtype=float).reshape(1, -1)
    model.intercept_ = np.asarray([float(intercept)])
    model.classes_ = np.asarray([0, 1])
    model.n_features_in_ = model.coef_.shape[1]
    return model


def _logodds(p: float) -> float:
    p = min(max(p, P_CLIP), 1.0 - P_CLIP)
    return math.log(p) - math.log1p(-p)


def row_dot(x: NDArray[np.float64], w: NDArray[np.float64]) -> NDArray[np.float64]:
    """``x @ w`` summed row by row (numpy's pairwise sum along each row), so a row's value does
    not depend on the rows beside it."""
    return np.asarray((x * w).sum(axis=1), dtype=float)


def _judge_features(votes: Sequence[JudgeVote], *, legacy: bool = False) -> dict[str, float]:
    """Every per-judge feature of one judge's votes on one item (module docstring); ``legacy``
    is feature set 0's reading of ``invalid`` (no valid vote, so a tie counts as invalid)."""
    carried = [v.p_a for v in votes if v.p_a is not None]
    if legacy:
        invalid = bool(votes) and not any(v.valid for v in votes)
    else:
        invalid = bool(votes) and all(v.failed for v in votes)
    return {
        "logodds": math.fsum(_logodds(p) for p in carried) / len(carried) if carried else 0.0,
        "missing": 0.0 if carried else 1.0,
        "invalid": float(invalid),
        "tie": sum(v.tie for v in votes) / len(votes) if votes else 0.0,
        "direction": math.fsum(_DIRECTION.get(v.choice or "", 0.0) for v in votes) / len(votes) if votes else 0.0,
    }


@fusion_method("stacked")
class StackedFusion:
    """Logistic regression on the judges' directions, log-odds, flags and signals."""

    requires_fit = True

    def __init__(
        self,
        *,
        C: float = 1.0,
        min_labels: int = 10,
        use_signals: bool = True,
        name: str = "stacked",
    ):
        if C <= 0:
            raise ValueError("C must be > 0")
        self.name = name
        self.C = C
        self.min_labels = min_labels
        self.use_signals = use_signals
        self.judges: list[str] = []
        self.signal_keys: list[tuple[str, str]] = []
        self.feature_names: list[str] = []
        self.model_version: str | None = None
        self._mean: NDArray[np.float64] = np.zeros(0)
        self._std: NDArray[np.float64] = np.ones(0)
        self.feature_set = FEATURE_SET
        self._kinds: tuple[str, ...] = VOTE_KINDS
        self._model: LogisticRegression | None = None

    @property
    def fitted(self) -> bool:
        return self._model is not None

    # -- features ---------------------------------------------------------------------------

    def _raw_rows(
        self, batch: Sequence[JudgeVote]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], list[str]]:
        """(judge block, raw signal block with NaN for missing, notes) for one item."""
        notes: list[str] = []
        by_judge: dict[str, list[JudgeVote]] = {}
        for vote in batch:
            by_judge.setdefault(vote.judge, []).append(vote)
        unseen = sorted(set(by_judge) - set(self.judges))
        if unseen:
            notes.append(f"ignored judges unseen at fit: {', '.join(unseen)}")
        absent = [j for j in self.judges if j not in by_judge]
        if absent:
            notes.append(f"absent judges (missing=1): {', '.join(absent)}")
        width = len(self._kinds)
        block = np.zeros(width * len(self.judges))
        for k, judge in enumerate(self.judges):
            votes = by_judge.get(judge, [])
            if len(votes) > 1:
                notes.append(f"judge {judge} cast {len(votes)} votes: averaged")
            features = _judge_features(votes, legacy=self._kinds == LEGACY_KINDS)
            block[width * k : width * (k + 1)] = [features[kind] for kind in self._kinds]
        signals = np.full(len(self.signal_keys), np.nan)
        for s, (judge, key) in enumerate(self.signal_keys):
            values = [v.signals[key] for v in by_judge.get(judge, []) if key in v.signals]
            if values:
                signals[s] = math.fsum(values) / len(values)
        return block, signals, notes

    def _matrix(
        self, batches: Sequence[Sequence[JudgeVote]]
    ) -> tuple[NDArray[np.float64], list[list[str]]]:
        blocks, signals, notes = [], [], []
        for batch in batches:
            b, s, n = self._raw_rows(batch)
            blocks.append(b)
            signals.append(s)
            notes.append(n)
        sig = np.array(signals, dtype=float).reshape(len(batches), len(self.signal_keys))
        sig = (sig - self._mean) / self._std
        sig = np.where(np.isnan(sig), 0.0, sig)
        x = np.hstack([np.array(blocks, dtype=float).reshape(len(batches), -1), sig])
        return x, notes

    # -- fit / predict ----------------------------------------------------------------------

    def fit(
        self, batches: Sequence[Sequence[JudgeVote]], labels: Sequence[Literal["A", "B"]]
    ) -> Self:
        y = check_labels(batches, labels, min_labels=self.min_labels, min_per_class=1)
        self._freeze_features(batches)
        x, _ = self._matrix(batches)
        from sklearn.linear_model import LogisticRegression

        model = LogisticRegression(C=self.C, solver="newton-cholesky", max_iter=200, tol=1e-8)
        model.fit(x, y)
        self.adopt(model)
        return self

    def adopt(self, model: LogisticRegression) -> None:
        """Take a fitted model (on the frozen features, :meth:`freeze`) and version it: the end of
        :meth:`fit`, and of a fit made over arrays (:func:`~judgefuse.fusion.columnar_stacking.fit_method`)."""
        self._model = model
        digest = hashlib.sha256()
        digest.update("\n".join(self.feature_names).encode())
        digest.update(np.round(model.coef_.ravel(), 10).tobytes())
        digest.update(np.round(model.intercept_, 10).tobytes())
        digest.update(np.round(self._mean, 10).tobytes() + np.round(self._std, 10).tobytes())
        self.model_version = digest.hexdigest()[:12]

    def _freeze_features(self, batches: Sequence[Sequence[JudgeVote]]) -> None:
        """Fix the judges, signal keys and signal standardisation from the fit's batches."""
        judges = sorted({vote.judge for batch in batches for vote in batch})
        if not judges:
            raise NotEnoughLabels("no votes in any batch: nothing to fit on")
        keys = set()
        if self.use_signals:
            keys = {(v.judge, key) for batch in batches for v in batch for key in v.signals}
        self.freeze(judges, sorted(keys), np.zeros(len(keys)), np.ones(len(keys)))
        if self.signal_keys:
            raw = np.array([self._raw_rows(b)[1] for b in batches], dtype=float)
            mean = np.nanmean(raw, axis=0)
            std = np.sqrt(np.nanmean((raw - mean) ** 2, axis=0))
            self._mean = mean
            self._std = np.where(std > 1e-12, std, 1.0)

    def freeze(
        self,
        judges: Sequence[str],
        signal_keys: Sequence[tuple[str, str]],
        mean: NDArray[np.float64],
        std: NDArray[np.float64],
    ) -> None:
        """Fix the features of a fit (feature set :data:`FEATURE_SET`): its judges (sorted), signal
        keys (sorted) and the signals' standardisation."""
        self.judges = list(judges)
        self.signal_keys = list(signal_keys)
        self._mean = np.asarray(mean, dtype=float)
        self._std = np.asarray(std, dtype=float)
        self.feature_set = FEATURE_SET
        self._kinds = VOTE_KINDS
        self.feature_names = [
            f"{judge}:{kind}" for judge in self.judges for kind in self._kinds
        ] + [f"{judge}:signal:{key}" for judge, key in self.signal_keys]

    def _feature_params(self) -> dict[str, Any]:
        """The fitted features' part of :meth:`to_params` (judges, signal keys and their
        standardisation, feature names, coefficients, intercept, version), shared with
        :class:`~judgefuse.fusion.offset_stacking.OffsetStackedFusion`."""
        coefficients = self.coefficients
        return {
            "feature_set": self.feature_set,
            "use_signals": self.use_signals,
            "min_labels": self.min_labels,
            "judges": list(self.judges),
            "signal_keys": [list(k) for k in self.signal_keys],
            "feature_names": list(self.feature_names),
            "coef": [coefficients[name] for name in self.feature_names],
            "intercept": coefficients["intercept"],
            "signal_mean": [float(x) for x in np.asarray(self._mean)],
            "signal_std": [float(x) for x in np.asarray(self._std)],
            "model_version": self.model_version,
        }

    def _restore_features(self, params: Mapping[str, Any]) -> NDArray[np.float64]:
        """Set what :meth:`_feature_params` saved; returns the coefficients (``ValueError``
        for an unknown feature set, or feature names or a coefficient count that do not match it).

        Parameters saved before the feature set was recorded are set 1 when they have a ``tie``
        column and set 0 otherwise."""
        self.judges = [str(j) for j in params["judges"]]
        self.signal_keys = [(str(k[0]), str(k[1])) for k in params["signal_keys"]]
        self.feature_names = [str(f) for f in params["feature_names"]]
        if "feature_set" in params:
            self.feature_set = int(params["feature_set"])
        else:
            tie_column = not self.judges or f"{self.judges[0]}:tie" in self.feature_names
            self.feature_set = 1 if tie_column else 0
        if self.feature_set not in FEATURE_SETS:
            raise ValueError(f"{self.name} model: unknown feature set {self.feature_set!r}")
        self._kinds = FEATURE_SETS[self.feature_set]
        expected = [f"{judge}:{kind}" for judge in self.judges for kind in self._kinds]
        expected += [f"{judge}:signal:{key}" for judge, key in self.signal_keys]
        if expected != self.feature_names:
            raise ValueError(f"{self.name} model: feature names do not match feature set {self.feature_set}")
        self.model_version = params["model_version"]
        self._mean = np.asarray(params["signal_mean"], dtype=float)
        self._std = np.asarray(params["signal_std"], dtype=float)
        coef = np.asarray(params["coef"], dtype=float)
        if coef.size != len(self.feature_names):
            raise ValueError(f"{self.name} model: coefficient count does not match the feature names")
        return coef

    @property
    def coefficients(self) -> dict[str, float]:
        """Fitted weight per feature name (plus ``intercept``)."""
        if self._model is None:
            raise NotFitted(f"{self.name} is not fitted")
        out = dict(zip(self.feature_names, map(float, self._model.coef_.ravel()), strict=True))
        out["intercept"] = float(self._model.intercept_[0])
        return out

    def predict_p_a(self, batches: Sequence[Sequence[JudgeVote]]) -> NDArray[np.float64]:
        """P(A) for each batch."""
        if self._model is None:
            raise NotFitted(f"{self.name} must be fitted before use")
        x, _ = self._matrix(batches)
        return self._probabilities(x)

    def _probabilities(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """P(A) of each row of ``x``.

        Feature sets 0 and 1 go through sklearn's ``predict_proba``, bit for bit as when such a
        model was saved. Set 2 sums each row's products itself (:func:`row_dot`), so an item's
        P(A) is the same alone or in a batch, which a BLAS matrix product does not promise."""
        assert self._model is not None
        if self.feature_set < 2:
            return self._model.predict_proba(x)[:, 1]
        z = row_dot(x, self._model.coef_.ravel()) + float(self._model.intercept_[0])
        return np.exp(-np.logaddexp(0.0, -z))

    def predict(self, batches: Sequence[Sequence[JudgeVote]]) -> list[Verdict]:
        """A verdict per batch (vectorised)."""
        if self._model is None:
            raise NotFitted(f"{self.name} must be fitted before use")
        x, notes = self._matrix(batches)
        probs = self._probabilities(x)
        return [
            self._verdict(batch, float(p), n)
            for batch, p, n in zip(batches, probs, notes, strict=True)
        ]

    def _verdict(self, votes: Sequence[JudgeVote], p_a: float, notes: list[str]) -> Verdict:
        n_valid = sum(1 for v in votes if v.valid)
        if not any(v.judge in self.judges for v in votes):
            return Verdict(
                choice=None,
                confidence=0.5,
                p_a=0.5,
                method=self.name,
                votes=list(votes),
                n_valid=n_valid,
                n_invalid=len(votes) - n_valid,
                notes=[*notes, "no vote from a judge seen at fit: undecided"],
                model_version=self.model_version,
            )
        tie = p_a == 0.5
        choice: Letter = "A" if p_a >= 0.5 else "B"
        if tie:
            notes = [*notes, "predicted P(A) is exactly 0.5: tie broken toward A"]
        return Verdict(
            choice=choice,
            confidence=max(p_a, 1.0 - p_a),
            p_a=p_a,
            method=self.name,
            votes=list(votes),
            n_valid=n_valid,
            n_invalid=len(votes) - n_valid,
            tie_broken=tie,
            notes=notes,
            model_version=self.model_version,
        )

    # -- parameters to save and restore (the service stores them; docs/design.md, 'Fusion') -------

    def to_params(self) -> dict[str, Any]:
        """JSON-ready parameters of the fitted model; :meth:`from_params` rebuilds it.

        Raises :class:`~judgefuse.fusion.registry.NotFitted` when unfitted.
        """
        return {"format": PARAMS_FORMAT, "C": self.C, **self._feature_params()}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> StackedFusion:
        """A ready model from :meth:`to_params` output (``ValueError`` for another format)."""
        if params.get("format") != PARAMS_FORMAT:
            raise ValueError(f"unknown stacked model format {params.get('format')!r}")
        model = cls(
            C=float(params["C"]), min_labels=int(params["min_labels"]),
            use_signals=bool(params["use_signals"]),
        )
        coef = model._restore_features(params)
        model._model = logistic(coef, float(params["intercept"]), model.C)
        return model

    def __call__(self, votes: Sequence[JudgeVote]) -> Verdict:
        return self.predict([votes])[0]

    def __repr__(self) -> str:
        state = f"fitted {self.model_version}" if self.fitted else "unfitted"
        return f"StackedFusion(C={self.C}, {state})"
