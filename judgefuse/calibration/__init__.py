"""Calibration metrics of LLM judges (numeric core; imports nothing else of judgefuse).

Inputs everywhere: ``confidence`` (floats in [0, 1], the confidence of the chosen answer) and
``correct`` (0/1 or bool), shape (n,). See docs/design.md, 'Metrics'.


Re-exported names load their submodule on first use (PEP 562 ``__getattr__``): the Python client
reaches fusion and calibration through the gateway's models, and loading every metric (scipy's
stats and optimisers) at import would cost it seconds for names it never touches.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .accumulator import DEFAULT_TH_EPS, FIXED_POINT_SCALE, CalibrationAccumulator
    from .binning import BinTotals, bin_totals, equal_width_bin_index, equal_width_edges
    from .bootstrap import BOOTSTRAP_METRICS, bootstrap_ci
    from .capability import capability_brier, capability_random_baseline, expected_accuracy
    from .comparison import HelpedHarmed, JudgeComparison, ViewScores, compare_judges, helped_harmed
    from .drift import BrierDrift, MeanShiftDetector, VoteDrift
    from .label_budget import (
        AuditPlan,
        DetectionDelay,
        HalfWidths,
        expected_detection_delay,
        expected_half_width,
        plan_audit_rate,
    )
    from .ranking import aurc, auroc, risk_coverage_curve
    from .recalibration import (
        RECALIBRATORS,
        HistogramBinning,
        IsotonicCalibration,
        PlattScaling,
        Recalibrator,
        TemperatureScaling,
        make_recalibrator,
    )
    from .reliability import ReliabilityBin, reliability_diagram
    from .scores import accuracy, adaptive_ce, brier, ece, ice, macroce, mce, nll
    from .sequential import PrecisionMonitor, first_crossing, precision_alarm_times
    from .stratified import (
        BOOTSTRAP_REPLICATES,
        TH_RANGE,
        Interval,
        StratumData,
        population_estimates,
        precision_estimate,
    )
    from .stratified_tuning import stratified_precision_lower_bound, tune_threshold_stratified
    from .summary import SUMMARY_KEYS, per_category, summarize
    from .th_score import THScore, th_score, th_score_from_parts
    from .thresholds import ScanStep, ThresholdReport, clopper_pearson_lower, tune_threshold
    from .validation import check_confidence, check_correct, check_pair

# A submodule named like one of its names binds the package attribute to itself when it loads
# (``import judgefuse.calibration.th_score``), hiding the lazy name: such names load eagerly.
from .th_score import th_score

# submodule -> the names this package re-exports from it (loaded on first use, see above)
_EXPORTS_BY_MODULE: dict[str, tuple[str, ...]] = {
    "accumulator": ("DEFAULT_TH_EPS", "FIXED_POINT_SCALE", "CalibrationAccumulator"),
    "binning": ("BinTotals", "bin_totals", "equal_width_bin_index", "equal_width_edges"),
    "bootstrap": ("BOOTSTRAP_METRICS", "bootstrap_ci"),
    "capability": ("capability_brier", "capability_random_baseline", "expected_accuracy"),
    "comparison": ("HelpedHarmed", "JudgeComparison", "ViewScores", "compare_judges", "helped_harmed"),
    "drift": ("BrierDrift", "MeanShiftDetector", "VoteDrift"),
    "label_budget": (
        "AuditPlan",
        "DetectionDelay",
        "HalfWidths",
        "expected_detection_delay",
        "expected_half_width",
        "plan_audit_rate",
    ),
    "ranking": ("aurc", "auroc", "risk_coverage_curve"),
    "recalibration": (
        "RECALIBRATORS",
        "HistogramBinning",
        "IsotonicCalibration",
        "PlattScaling",
        "Recalibrator",
        "TemperatureScaling",
        "make_recalibrator",
    ),
    "reliability": ("ReliabilityBin", "reliability_diagram"),
    "scores": ("accuracy", "adaptive_ce", "brier", "ece", "ice", "macroce", "mce", "nll"),
    "sequential": ("PrecisionMonitor", "first_crossing", "precision_alarm_times"),
    "stratified": (
        "BOOTSTRAP_REPLICATES",
        "TH_RANGE",
        "Interval",
        "StratumData",
        "population_estimates",
        "precision_estimate",
    ),
    "stratified_tuning": ("stratified_precision_lower_bound", "tune_threshold_stratified"),
    "summary": ("SUMMARY_KEYS", "per_category", "summarize"),
    "th_score": ("THScore", "th_score", "th_score_from_parts"),
    "thresholds": ("ScanStep", "ThresholdReport", "clopper_pearson_lower", "tune_threshold"),
    "validation": ("check_confidence", "check_correct", "check_pair"),
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


__all__ = sorted(_MODULE_OF)
