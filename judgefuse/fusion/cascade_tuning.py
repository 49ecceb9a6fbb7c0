"""Cascade tuning and evaluation: per-stage thresholds with a precision guarantee, and replay.

Tuning (:func:`tune_cascade`): stage by stage, on the labelled items that *reach* the stage
(those no earlier stage accepted with the thresholds already tuned),
:func:`judgefuse.calibration.thresholds.tune_threshold` picks the smallest threshold whose
accepted set has precision >= ``target_precision`` with probability >= 1 - ``delta_s``
(one-sided Clopper-Pearson, fixed-sequence). The accepted set of the whole cascade is the
union of the stages' accepted sets, so its precision is >= target whenever every stage's is.
``delta_split="bonferroni"`` (the default) uses ``delta / S`` per stage, so the whole
cascade's guarantee is 1 - delta outright (union bound over the S stages): a default must keep
the guarantee the output prints. ``"per_stage"`` gives every stage the full ``delta``: each
stage's guarantee holds at 1 - delta but the whole cascade's only at >= 1 - S * delta (measured
on Trust-or-Escalate, 3 stages, delta 0.1: met in 86% of held-out splits, below 1 - delta);
it accepts more and is there for who wants that trade, named as such in the report. Caveat: the items that
reach stage ``s`` depend on the earlier thresholds, which were chosen from the labels of the
same calibration set; the per-stage bound treats that set as given (the dependence is weak: an
earlier threshold moves only with the labels near it). ``tests/evaluation/test_tune_cascade.py``
and ``benchmarks/bench_cascade.py`` check the realised failure rate over random splits.

Kept apart from :mod:`judgefuse.fusion.cascade` (the cascade types and runners, which serving
needs) because tuning is offline work with its own statistics; imports run one way, from here
to there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from judgefuse.calibration.scores import ece
from judgefuse.calibration.thresholds import ThresholdReport, tune_threshold
from judgefuse.fusion.cascade import Cascade, CascadeRun, CascadeStage, DeltaSplit, run_cascade_detailed
from judgefuse.judges.types import JudgedItem

__all__ = ["CascadeEvaluation", "CascadeReport", "StageReport", "evaluate_cascade", "tune_cascade"]


@dataclass(frozen=True)
class StageReport:
    """One stage's tuning: how many labelled items reached it and what its threshold accepts."""

    name: str
    judges: tuple[str, ...]
    n_reached: int
    n_accepted: int
    threshold: float | None
    delta: float
    report: ThresholdReport | None
    """None when no item reached the stage."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "judges": list(self.judges), "n_reached": self.n_reached,
            "n_accepted": self.n_accepted, "threshold": self.threshold, "delta": self.delta,
            "report": None if self.report is None else self.report.as_dict(),
        }  # fmt: skip


@dataclass(frozen=True)
class CascadeEvaluation:
    """A cascade replayed on labelled items."""

    n: int
    coverage: float
    """Share auto-accepted."""
    accuracy_accepted: float
    """Precision of the auto-accepted set (NaN when nothing was accepted)."""
    accuracy: float
    """Accuracy of every verdict (review items scored on the suggestion; no answer = wrong)."""
    ece: float
    """ECE of every verdict's confidence (no answer = 0.5, wrong), 10 bins."""
    ece_accepted: float
    calls_per_item: float
    cost_per_item: float
    tokens_per_item: float
    accepted_by_stage: list[int]

    def as_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class CascadeReport:
    """:func:`tune_cascade`'s result: the tuned cascade, per-stage reports, the calibration replay."""

    cascade: Cascade
    stages: list[StageReport]
    target: float
    delta: float
    delta_split: DeltaSplit
    min_count: int
    calibration: CascadeEvaluation

    @property
    def guarantee(self) -> str:
        """What the thresholds promise, in words (the report prints this, never more)."""
        stages = len(self.stages)
        if self.delta_split == "bonferroni":
            return (f"whole cascade: precision of everything auto-accepted >= {self.target:g} "
                    f"w.p. >= {1 - self.delta:g} (Bonferroni: delta/{stages} per stage)")
        return (f"per stage only: each stage's accepted set >= {self.target:g} w.p. >= "
                f"{1 - self.delta:g}; the whole cascade is NOT guaranteed at {1 - self.delta:g} "
                f"(only >= {max(0.0, 1 - stages * self.delta):g}); use delta_split bonferroni for that")

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target, "delta": self.delta, "delta_split": self.delta_split,
            "guarantee": self.guarantee,
            "min_count": self.min_count, "fallback": self.cascade.fallback,
            "stages": [s.as_dict() for s in self.stages],
            "calibration": self.calibration.as_dict(),
        }  # fmt: skip


def _labelled(items: Sequence[JudgedItem]) -> list[JudgedItem]:
    labelled = [judged for judged in items if judged.item.label is not None]
    if not labelled:
        raise ValueError("no labelled items: a cascade is tuned and evaluated on items with a label")
    return labelled


def _stage_scores(stage: CascadeStage, items: Sequence[JudgedItem]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(confidence, correct, usable) of the stage's verdicts; no answer scores 0.5 and wrong."""
    conf, correct, usable = [], [], []
    for judged in items:
        run = CascadeRun(Cascade((stage,)))
        run.add(judged.votes, list(stage.judges))
        verdict = stage.verdict([run.consulted[j] for j in stage.judges])
        usable.append(verdict.choice is not None)
        conf.append(verdict.confidence if verdict.choice is not None else 0.5)
        correct.append(verdict.choice is not None and verdict.choice == judged.item.label)
    return np.asarray(conf, dtype=float), np.asarray(correct, dtype=bool), np.asarray(usable, dtype=bool)


def tune_cascade(
    items: Sequence[JudgedItem],
    cascade: Cascade,
    *,
    target_precision: float,
    delta: float = 0.1,
    min_count: int = 30,
    delta_split: DeltaSplit = "bonferroni",
    max_candidates: int | None = 200,
) -> CascadeReport:
    """Tune every stage's threshold on the labelled items that reach it (module docstring)."""
    if delta_split not in ("bonferroni", "per_stage"):
        raise ValueError(f"delta_split must be 'bonferroni' or 'per_stage', got {delta_split!r}")
    labelled = _labelled(items)
    stages = cascade.all_stages()
    delta_s = delta / len(stages) if delta_split == "bonferroni" else delta
    reach = list(range(len(labelled)))
    thresholds: list[float | None] = []
    reports: list[StageReport] = []
    for stage in stages:
        if not reach:
            thresholds.append(None)
            reports.append(StageReport(stage.name, stage.judges, 0, 0, None, delta_s, None))
            continue
        conf, correct, usable = _stage_scores(stage, [labelled[i] for i in reach])
        rep = tune_threshold(
            conf, correct, target_precision=target_precision, delta=delta_s, min_count=min_count,
            max_candidates=max_candidates,
        )  # fmt: skip
        tuned = replace(stage, threshold=rep.threshold)
        kept: list[int] = []
        accepted = 0
        for position, index in enumerate(reach):
            # an unusable verdict (scored 0.5, wrong) is never accepted, even when tau <= 0.5
            if tuned.threshold is not None and usable[position] and conf[position] >= tuned.threshold:
                accepted += 1
            else:
                kept.append(index)
        thresholds.append(rep.threshold)
        reports.append(StageReport(stage.name, stage.judges, len(reach), accepted, rep.threshold, delta_s, rep))
        reach = kept
    tuned_cascade = cascade.with_thresholds(thresholds)
    return CascadeReport(
        cascade=tuned_cascade,
        stages=reports,
        target=float(target_precision),
        delta=float(delta),
        delta_split=delta_split,
        min_count=int(min_count),
        calibration=evaluate_cascade(labelled, tuned_cascade),
    )


def evaluate_cascade(items: Sequence[JudgedItem], cascade: Cascade) -> CascadeEvaluation:
    """Replay ``cascade`` on the labelled ``items``: coverage, accuracy, ECE, calls per item."""
    labelled = _labelled(items)
    decisions = [run_cascade_detailed(cascade, judged.votes) for judged in labelled]
    conf = np.array([d.verdict.confidence if d.verdict.choice is not None else 0.5 for d in decisions])
    correct = np.array([d.verdict.choice == j.item.label for d, j in zip(decisions, labelled, strict=True)])
    accepted = np.array([d.accepted for d in decisions])
    by_stage = [0] * len(cascade.all_stages())
    for d in decisions:
        if d.stage is not None:
            by_stage[d.stage] += 1
    n = len(labelled)
    return CascadeEvaluation(
        n=n,
        coverage=float(accepted.mean()),
        accuracy_accepted=float(correct[accepted].mean()) if accepted.any() else math.nan,
        accuracy=float(correct.mean()),
        ece=float(ece(conf, correct)),
        ece_accepted=float(ece(conf[accepted], correct[accepted])) if accepted.any() else math.nan,
        calls_per_item=sum(d.calls for d in decisions) / n,
        cost_per_item=math.fsum(d.cost_usd for d in decisions) / n,
        tokens_per_item=sum(d.prompt_tokens + d.completion_tokens for d in decisions) / n,
        accepted_by_stage=by_stage,
    )
