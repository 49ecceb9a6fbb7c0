"""Fusion: turn a panel's votes into one verdict (voting baselines, stacked fusion, recalibration).

Public API::

    get_method(name, **options) -> FusionMethod     # "majority", "stacked", "majority+isotonic"
    available_methods() -> list[str]
    @fusion_method("name")                          # register a factory
    cross_fit_predict(method_factory, batches, labels, *, n_folds=5, seed=0) -> list[Verdict]


Re-exported names load their submodule on first use (PEP 562 ``__getattr__``): the Python client
reaches fusion and calibration through the gateway's models, and loading every metric (scipy's
stats and optimisers) at import would cost it seconds for names it never touches.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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

# submodule -> the names this package re-exports from it (loaded on first use, see above)
_EXPORTS_BY_MODULE: dict[str, tuple[str, ...]] = {
    "crossfit": ("cross_fit_predict", "fold_indices"),
    "recalibrated": ("Recalibrated",),
    "registry": (
        "DuplicateFusionMethod",
        "FusionError",
        "FusionMethod",
        "LearnedFusionMethod",
        "NotEnoughLabels",
        "NotFitted",
        "UnknownFusionMethod",
        "UnknownRecalibrator",
        "available_methods",
        "fusion_method",
        "get_method",
        "replayable_methods",
        "requires_fit",
    ),
    "stacking": ("StackedFusion",),
    "verdict": ("Verdict",),
    "voting": (
        "VotingMethod",
        "binary_entropy",
        "confidence_weighted",
        "entropy_weighted",
        "majority",
        "mean_probability",
        "sqrt_confidence_weighted",
    ),
}
_MODULE_OF = {name: module for module, names in _EXPORTS_BY_MODULE.items() for name in names}


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})


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
