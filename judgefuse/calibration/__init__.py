"""Calibration metrics of LLM judges (numeric core; imports nothing else of judgefuse).

Inputs everywhere: ``confidence`` (floats in [0, 1], the confidence of the chosen answer) and
``correct`` (0/1 or bool), shape (n,). See docs/design.md, 'Metrics'.
"""

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
