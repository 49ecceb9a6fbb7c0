"""Dawid-Skene fusion: learn each judge's confusion between A and B from unlabelled votes.

Before any label exists, the only evidence of which judge to trust is how the judges agree with
each other. Dawid & Skene (1979) model it: item i's true answer ``t_i`` is A with prior ``pi``;
judge j says letter ``l`` with probability ``theta_j[t, l]`` (its 2x2 confusion matrix), every
observation independent given the truth. EM alternates the posterior ``P(t_i = A)`` (E step) and
the prior and confusion matrices re-estimated from those posteriors (M step), started from the
smoothed majority share of each item. A Laplace prior (``alpha`` pseudo-counts per cell) keeps a
judge with few observations away from 0/1.

Observations are **hard votes**. A position-swapped judge contributes two observations, one per
answer order (docs/design.md, 'Position swap'): from ``samples`` when a replayed vote keeps its two games,
else reconstructed from the ``position_inconsistent`` signal (consistent: the choice twice;
inconsistent: one A and one B). MP votes and votes without swap count once (their ``choice``).
A tie vote (``JudgeVote.tie``) is no observation: the model's confusion is over A and B only, so a
tie leaves the posterior where the other judges put it (and votes that are all ties are an exact
tie), the abstention reading of docs/design.md, 'Fusion'.

Use: ``fit_unlabelled(batches)`` (or ``fit(batches, labels)``, which ignores the labels: the model
is label-free by construction, so offline it is fitted transductively on every item, honestly) and
then ``predict`` / ``__call__``. ``predict`` on an unfitted instance fits on the batches it is
given first (at least ``min_items`` of them). A single item with no fitted model cannot teach EM
anything: it gets the cold-start rule (``mean_probability``, whose confidence never exceeds the
most confident supporting vote) with a note saying so. Posteriors are products over judges that
are assumed independent, so confidence grows quickly with agreement: recalibrate it
(``dawid_skene+isotonic``) once labels exist.

After fitting, :attr:`estimated_accuracy` holds each judge's accuracy estimated without labels
(``pi * theta[A, A] + (1 - pi) * theta[B, B]``).

The service fits it in the background on a panel's stored, unlabelled votes (its cold start:
``fits_unlabelled`` below, read by :mod:`judgefuse.fusion.capabilities`) and stores the fit as
``to_params()`` output; ``from_params`` restores it, and ``model_version`` (a digest of the
parameters) stamps its verdicts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Self

import numpy as np
from numpy.typing import NDArray

from judgefuse.fusion.registry import NotFitted, fusion_method
from judgefuse.fusion.verdict import Verdict
from judgefuse.fusion.voting import (
    count_tie_votes,
    exact_tie,
    mean_probability,
    single_valid_vote_verdict,
    tie_votes_note,
)
from judgefuse.judges.types import JudgeVote, Letter

NAME = "dawid_skene"
PARAMS_FORMAT = "dawid_skene/v1"
"""The ``format`` tag of :meth:`DawidSkeneFusion.to_params` output."""

Observation = tuple[str, Letter]


def observations(votes: Sequence[JudgeVote]) -> list[Observation]:
    """The hard (judge, letter) observations of one item's votes (module docstring)."""
    return [(vote.judge, letter) for vote in votes for letter in vote_games(vote.mode, vote.samples, vote.signals,
                                                                            vote.choice)]


def vote_games(
    mode: str, samples: Sequence[Letter | None], signals: Mapping[str, float], choice: Letter | None
) -> list[Letter]:
    """The letters one vote is observed saying, in order (0, 1 or 2: module docstring)."""
    games = [s for s in samples if s is not None] if mode != "mp" else []
    if games and len(samples) <= 2:
        return games
    if "position_inconsistent" in signals:
        if signals["position_inconsistent"] >= 0.5:
            return ["A", "B"]
        return [choice, choice] if choice is not None else []
    return [choice] if choice is not None else []


class DawidSkeneModel:
    """The fitted parameters: class prior and one 2x2 confusion matrix per judge (rows: truth B, A;
    columns: said B, A)."""

    def __init__(self, judges: list[str], prior_a: float, confusion: NDArray[np.float64], n_iter: int):
        self.judges = judges
        self.prior_a = prior_a
        self.confusion = confusion  # shape (n_judges, 2, 2)
        self.n_iter = n_iter
        self._index = {name: j for j, name in enumerate(judges)}

    def posterior_a(self, batch_obs: Sequence[Observation]) -> float | None:
        """P(truth = A | observations); None when no observation comes from a known judge."""
        log_a, log_b, seen = np.log(self.prior_a), np.log1p(-self.prior_a), False
        for judge, letter in batch_obs:
            j = self._index.get(judge)
            if j is None:
                continue
            col = 1 if letter == "A" else 0
            log_a += np.log(self.confusion[j, 1, col])
            log_b += np.log(self.confusion[j, 0, col])
            seen = True
        if not seen:
            return None
        return float(1.0 / (1.0 + np.exp(log_b - log_a)))

    def accuracy(self) -> dict[str, float]:
        pi = self.prior_a
        return {
            name: float(pi * self.confusion[j, 1, 1] + (1.0 - pi) * self.confusion[j, 0, 0])
            for name, j in self._index.items()
        }


def fit_em(
    batches_obs: Sequence[Sequence[Observation]],
    *,
    alpha: float = 1.0,
    max_iter: int = 500,
    tol: float = 1e-7,
) -> DawidSkeneModel:
    """EM for the two-class Dawid-Skene model over hard observations (module docstring)."""
    judges = sorted({judge for obs in batches_obs for judge, _ in obs})
    if not judges:
        raise ValueError("no valid observation in any item: Dawid-Skene has nothing to fit")
    index = {name: j for j, name in enumerate(judges)}
    rows = [(i, index[judge], 1 if letter == "A" else 0) for i, obs in enumerate(batches_obs) for judge, letter in obs]
    item, judge, said = (np.array(col, dtype=np.int64) for col in zip(*rows, strict=True))
    return fit_em_rows(judges, item, judge, said, len(batches_obs), alpha=alpha, max_iter=max_iter, tol=tol)


def fit_em_rows(
    judges: list[str],
    item: NDArray[np.int64],
    judge: NDArray[np.int64],
    said: NDArray[np.int64],
    n_items: int,
    *,
    alpha: float = 1.0,
    max_iter: int = 500,
    tol: float = 1e-7,
) -> DawidSkeneModel:
    """:func:`fit_em` on its observations as rows: ``item``, ``judge`` (into ``judges``, sorted
    by name) and ``said`` (1 for A) of each, items in order and each item's in its own order."""
    n_judges = len(judges)
    has_obs = np.bincount(item, minlength=n_items) > 0
    n_a = np.bincount(item, weights=said, minlength=n_items)
    n_all = np.bincount(item, minlength=n_items)
    post = (n_a + 0.5) / (n_all + 1.0)  # smoothed majority share: starts EM in the sensible mode
    cell = judge * 2 + said  # (judge, letter said) flattened
    confusion = np.full((n_judges, 2, 2), 0.5)
    prior_a = 0.5
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        # M step: prior and confusion from the current posteriors.
        prior_a = float(np.clip((post[has_obs].sum() + 1.0) / (has_obs.sum() + 2.0), 1e-3, 1 - 1e-3))
        # (bincount, not np.add.at: the same sums, an order of magnitude faster)
        counts = np.empty((n_judges, 2, 2))
        counts[:, 1, :] = np.bincount(cell, weights=post[item], minlength=2 * n_judges).reshape(n_judges, 2)
        counts[:, 0, :] = np.bincount(cell, weights=1.0 - post[item], minlength=2 * n_judges).reshape(n_judges, 2)
        confusion = (counts + alpha) / (counts.sum(axis=2, keepdims=True) + 2.0 * alpha)
        # E step: posteriors from the prior and confusion.
        step = (np.log(confusion[:, 1, :]) - np.log(confusion[:, 0, :])).ravel()[cell]
        log_ratio = np.log(prior_a) - np.log1p(-prior_a) + np.bincount(item, weights=step, minlength=n_items)
        new_post = np.where(has_obs, 1.0 / (1.0 + np.exp(-log_ratio)), 0.5)
        change = float(np.max(np.abs(new_post - post)))
        post = new_post
        if change < tol:
            break
    return DawidSkeneModel(judges, prior_a, confusion, n_iter)


@fusion_method(NAME)
class DawidSkeneFusion:
    """Dawid-Skene EM over the panel's hard votes, fitted without labels (module docstring)."""

    requires_fit = False
    label_free = True
    fits_unlabelled = True
    """Fitted from unlabelled batches (``fit_unlabelled``): the service's cold-start fit."""

    def __init__(self, *, alpha: float = 1.0, min_items: int = 2, max_iter: int = 500, name: str = NAME):
        if alpha <= 0:
            raise ValueError("alpha must be > 0")
        self.name = name
        self.alpha = alpha
        self.min_items = min_items
        self.max_iter = max_iter
        self.model: DawidSkeneModel | None = None
        self.n_fit_items = 0
        self.model_version: str | None = None

    @property
    def fitted(self) -> bool:
        return self.model is not None

    @property
    def estimated_accuracy(self) -> dict[str, float]:
        """Each judge's accuracy estimated from unlabelled votes ({} before fitting)."""
        return self.model.accuracy() if self.model is not None else {}

    def fit_unlabelled(self, batches: Sequence[Sequence[JudgeVote]]) -> Self:
        """Fit EM on ``batches`` (one item's votes each); ``ValueError`` when no batch holds a
        valid observation."""
        self.model = fit_em([observations(b) for b in batches], alpha=self.alpha, max_iter=self.max_iter)
        self.n_fit_items = len(batches)
        self.model_version = model_digest(self._model_params())
        return self

    def _model_params(self) -> dict[str, Any]:
        """The fit, rounded: what :func:`model_digest` versions (stable across platforms)."""
        assert self.model is not None
        return {
            "judges": list(self.model.judges),
            "prior_a": round(float(self.model.prior_a), 12),
            "confusion": np.round(self.model.confusion, 12).tolist(),
        }

    def to_params(self) -> dict[str, Any]:
        """JSON-ready parameters of the fit (:meth:`from_params` rebuilds it); ``NotFitted``
        before a fit."""
        if self.model is None:
            raise NotFitted(f"{self.name} is not fitted")
        return {
            "format": PARAMS_FORMAT, "alpha": self.alpha, "min_items": self.min_items,
            "max_iter": self.max_iter, "n_iter": self.model.n_iter, "n_items": self.n_fit_items,
            "judges": list(self.model.judges), "prior_a": float(self.model.prior_a),
            "confusion": self.model.confusion.tolist(),  # exact: JSON floats round-trip
            "estimated_accuracy": self.estimated_accuracy,
            "model_version": self.model_version,
        }

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> DawidSkeneFusion:
        """A fitted model from :meth:`to_params` output (``ValueError`` for another format or
        a confusion array of the wrong shape)."""
        if params.get("format") != PARAMS_FORMAT:
            raise ValueError(f"unknown dawid_skene model format {params.get('format')!r}")
        judges = [str(j) for j in params["judges"]]
        confusion = np.asarray(params["confusion"], dtype=float)
        if confusion.shape != (len(judges), 2, 2):
            raise ValueError(f"dawid_skene model: confusion shape {confusion.shape} does not match "
                             f"{len(judges)} judges")
        prior_a = float(params["prior_a"])
        if not (0.0 < prior_a < 1.0) or not np.all((confusion > 0.0) & (confusion < 1.0)):
            raise ValueError("dawid_skene model: prior and confusion entries must be in (0, 1)")
        method = cls(alpha=float(params["alpha"]), min_items=int(params["min_items"]),
                     max_iter=int(params["max_iter"]))
        method.model = DawidSkeneModel(judges, prior_a, confusion, int(params.get("n_iter", 0)))
        method.n_fit_items = int(params.get("n_items", 0))
        method.model_version = model_digest(method._model_params())
        return method

    def fit(self, batches: Sequence[Sequence[JudgeVote]], labels: Sequence[Literal["A", "B"]] | None = None) -> Self:
        """Fit on ``batches``; ``labels`` are ignored (the model is label-free)."""
        del labels
        return self.fit_unlabelled(batches)

    def predict(self, batches: Sequence[Sequence[JudgeVote]]) -> list[Verdict]:
        if self.model is None and len(batches) >= self.min_items and any(observations(b) for b in batches):
            self.fit_unlabelled(batches)
        return [self(batch) for batch in batches]

    def choices(self, batches: Sequence[Sequence[JudgeVote]]) -> list[Letter | None]:
        """The choice of each batch's verdict (what :meth:`predict` would choose), without
        building verdicts: the consensus the panel-structure numbers compare votes with."""
        if self.model is None:
            return [v.choice for v in self.predict(batches)]
        out: list[Letter | None] = []
        for votes in batches:
            valid = [v for v in votes if v.choice is not None]
            if len(valid) == 1 and not count_tie_votes(votes):
                out.append(valid[0].choice)
                continue
            p_a = self.model.posterior_a(observations(votes))
            out.append(None if p_a is None else ("A" if p_a >= 0.5 else "B"))
        return out

    def __call__(self, votes: Sequence[JudgeVote]) -> Verdict:
        single = single_valid_vote_verdict(self.name, votes)
        if single is not None:  # one judge's word keeps its own confidence, fitted or not
            return single.model_copy(update={"model_version": self.model_version}) if self.model else single
        if self.model is None:
            verdict = mean_probability(votes)
            return verdict.model_copy(
                update={
                    "method": self.name,
                    "notes": [*verdict.notes, "dawid_skene not fitted: cold-start rule mean_probability"],
                }
            )
        n_valid = sum(1 for v in votes if v.valid)
        n_ties = count_tie_votes(votes)
        n_invalid = len(votes) - n_valid - n_ties
        p_a = self.model.posterior_a(observations(votes))
        if p_a is None and n_ties:
            p_a = 0.5
        if p_a is None:
            return Verdict(
                choice=None, confidence=0.5, p_a=0.5, method=self.name, votes=list(votes),
                n_valid=n_valid, n_invalid=n_invalid, notes=["no observation from a judge seen at fit: undecided"],
                model_version=self.model_version,
            )
        if bool(np.isclose(p_a, 0.5, rtol=0.0, atol=1e-12)):
            tie = exact_tie(self.name, votes, n_valid=n_valid, n_invalid=n_invalid, notes=tie_votes_note(n_ties))
            return tie.model_copy(update={"model_version": self.model_version})
        choice: Letter = "A" if p_a > 0.5 else "B"
        return Verdict(
            choice=choice,
            confidence=max(p_a, 1.0 - p_a),
            p_a=p_a,
            method=self.name,
            votes=list(votes),
            n_valid=n_valid,
            n_invalid=n_invalid,
            model_version=self.model_version,
        )

    def __repr__(self) -> str:
        return f"DawidSkeneFusion(alpha={self.alpha}, fitted={self.fitted})"


def model_digest(params: Mapping[str, Any]) -> str:
    """A model version: the first 12 hex digits of the parameters' SHA-256."""
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]
