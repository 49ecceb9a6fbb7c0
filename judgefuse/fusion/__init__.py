"""Fusion: turn a panel's votes into one verdict (voting baselines, stacked fusion, recalibration).

Public API::

    get_method(name, **options) -> FusionMethod     # "majority", "stacked", "majority+isotonic"
    available_methods() -> list[str]
    @fusion_method("name")                          # register a factory
    cross_fit_predict(method_factory, batches, labels, *, n_folds=5, seed=0) -> list[Verdict]
"""

from judgefuse.fusion.crossfit import cross_fit_predict, fold_indices
from judgefuse.fusion.recalibrated import Recalibrated
from judgefuse.fusion.registry import (
    DuplicateFusionMethod,
    FusionError,
    FusionMethod,
    LearnedFusionMethod,
    NotEnoughLabels,
    NotFitted,
    UnknownFusionMethod,
    UnknownRecalibrator,
    available_methods,
    fusion_method,
    get_method,
    replayable_methods,
    requires_fit,
)
from judgefuse.fusion.stacking import StackedFusion
from judgefuse.fusion.verdict import Verdict
from judgefuse.fusion.voting import (
    VotingMethod,
    binary_entropy,
    confidence_weighted,
    entropy_weighted,
    majority,
    mean_probability,
    sqrt_confidence_weighted,
)

__all__ = [
    "DuplicateFusionMethod",
    "FusionError",
    "FusionMethod",
    "LearnedFusionMethod",
    "NotEnoughLabels",
    "NotFitted",
    "Recalibrated",
    "StackedFusion",
    "UnknownFusionMethod",
    "UnknownRecalibrator",
    "Verdict",
    "VotingMethod",
    "available_methods",
    "binary_entropy",
    "confidence_weighted",
    "cross_fit_predict",
    "entropy_weighted",
    "fold_indices",
    "fusion_method",
    "get_method",
    "replayable_methods",
    "majority",
    "mean_probability",
    "requires_fit",
    "sqrt_confidence_weighted",
]
