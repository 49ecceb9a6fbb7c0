"""Which labelled verdicts are evidence for a method's threshold, as (confidence, correct).

A threshold is tuned for one fusion method (and, for a learned one, one model version), so
only data that method would have produced counts: a learned model's own verdicts (never in its
training set, so an honest hold-out; a label-free cold-start model's likewise, as it is one
fit), an item-reading method's own verdicts (the fuser LLM is
not re-runnable offline),
or, for a voting method, every stored vote set re-fused (a pure function of the votes). Cascade
verdicts hold only the votes of the judges they consulted, so they are never re-fused.

Each point also carries the review stratum of its verdict (:func:`label_stratum_key`:
``review``, ``auto@{rate}`` or ``unsolicited``), so the tuner can weight it by the share of
traffic its stratum stands for (docs/design.md, 'Tuning and monitoring on the population'),
and how it was routed (:class:`Routing`: the threshold that routed it, its inclusion
probability and reason from the stamp, and whether the tuned method's own confidence routed it),
so the tuner can pool labels by inclusion probability when every stamp says how
(:mod:`judgefuse.service.learning.pooled_inputs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from judgefuse.service.kernel.panels import PanelRuntime
from judgefuse.service.ledger import label_stratum_key
from judgefuse.service.storage import VerdictRecord

__all__ = ["Routing", "TuningData", "tuning_data"]


class Routing(NamedTuple):
    """How one labelled verdict was routed, as stored with it."""

    threshold: float | None
    """The threshold value that routed the verdict (``Verdict.threshold``; None: none)."""
    inclusion: float | None
    """The stamp's inclusion probability (None: a record from before the review loop)."""
    reason: str | None
    """The stamp's reason (``no_threshold``, ``below_threshold``, ``audit``, ...)."""
    by_tuned_method: bool
    """Whether the verdict was made (and so routed) by the tuned method itself (and model
    version): only then is the confidence tuned the one its route compared with the threshold."""


def _routing(record: VerdictRecord, method_name: str, model_version: str | None) -> Routing:
    v, stamp = record.verdict, record.review
    same = v.method == method_name and (model_version is None or v.model_version == model_version)
    return Routing(v.threshold, stamp.inclusion_probability if stamp else None,
                   stamp.reason if stamp else None, same)


class TuningData(NamedTuple):
    how: str
    """What the data is, in words."""
    confidences: list[float]
    correct: list[bool]
    """Whether each verdict matched its label."""
    strata: list[str]
    """Each point's review stratum key."""
    routing: list[Routing]
    """Each point's routing (:class:`Routing`)."""


def tuning_data(
    records: Sequence[VerdictRecord], runtime: PanelRuntime, method_name: str,
    model_version: str | None,
) -> TuningData:
    """The evidence for ``method_name``'s threshold (see the module docstring)."""
    confidences: list[float] = []
    correct: list[bool] = []
    strata: list[str] = []
    routing: list[Routing] = []
    how: str
    kind = runtime.capabilities(method_name, field="body.method")
    if kind.requires_fit or kind.fits_unlabelled:
        # only verdicts this very model made: their labels were never in its training set
        how = f"verdicts made by {method_name} model {model_version} (held out from its fit)"
        for r in records:
            v = r.verdict
            if v.method == method_name and v.model_version == model_version:
                confidences.append(v.confidence if v.choice else 0.5)
                correct.append(v.choice == r.label)
                strata.append(label_stratum_key(r))
                routing.append(_routing(r, method_name, model_version))
    elif kind.reads_item:
        # it reads the item and calls a model: not re-runnable offline, only its own verdicts
        how = f"verdicts made by {method_name}"
        for r in records:
            if r.verdict.method == method_name:
                confidences.append(r.verdict.confidence)
                correct.append(r.verdict.choice == r.label)
                strata.append(label_stratum_key(r))
                routing.append(_routing(r, method_name, model_version))
    else:
        # a voting method is a pure function of the stored votes: re-fuse every record
        how = f"every labelled verdict's votes re-fused with {method_name}"
        method = runtime.method(method_name)
        for r in records:
            if r.verdict.method == "cascade":
                continue  # a cascade verdict holds only the votes of the judges it consulted
            v = method(r.verdict.votes)
            confidences.append(v.confidence)
            correct.append(v.choice == r.label)
            strata.append(label_stratum_key(r))
            routing.append(_routing(r, method_name, model_version))
    return TuningData(how, confidences, correct, strata, routing)
