"""AUROC, risk-coverage curve and AURC: hand cases, ties, sklearn cross-check."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from judgefuse.calibration import aurc, auroc, risk_coverage_curve


def auroc_loop(conf, corr):
    pos = [c for c, z in zip(conf, corr, strict=True) if z]
    neg = [c for c, z in zip(conf, corr, strict=True) if not z]
    wins = sum(1.0 if p > q else 0.5 if p == q else 0.0 for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


def test_auroc_hand_cases() -> None:
    assert auroc([0.1, 0.15, 0.95, 1.0, 0.0], [0, 1, 1, 1, 0]) == 1.0
    assert auroc([0.9, 0.1], [0, 1]) == 0.0
    # pairs (pos, neg): (.5,.5)=1/2 (.5,.2)=1 (.8,.5)=1 (.8,.2)=1
    assert auroc([0.5, 0.5, 0.8, 0.2], [1, 0, 1, 0]) == pytest.approx(3.5 / 4)
    assert auroc([0.7] * 4, [1, 0, 1, 0]) == 0.5


def test_auroc_single_class_is_nan() -> None:
    assert math.isnan(auroc([0.2, 0.9], [1, 1]))
    assert math.isnan(auroc([0.2, 0.9], [0, 0]))


@pytest.mark.parametrize("seed", range(5))
def test_auroc_matches_sklearn_and_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    c = np.round(rng.uniform(0.4, 1, 300), 1)  # heavy ties
    z = (rng.uniform(size=300) < c).astype(int)
    assert auroc(c, z) == pytest.approx(roc_auc_score(z, c), abs=1e-12)
    assert auroc(c, z) == pytest.approx(auroc_loop(list(c), list(z)), abs=1e-12)


def test_risk_coverage_curve_hand_case() -> None:
    cov, risk, thr = risk_coverage_curve([0.9, 0.8, 0.8, 0.5], [1, 0, 1, 0])
    np.testing.assert_allclose(thr, [0.9, 0.8, 0.5])
    np.testing.assert_allclose(cov, [0.25, 0.75, 1.0])
    np.testing.assert_allclose(risk, [0.0, 1 / 3, 0.5])


def test_aurc_hand_cases() -> None:
    # perfect ranking, 2 right then 2 wrong: risk@k = 0, 0, 1/3, 1/2
    assert aurc([0.9, 0.8, 0.3, 0.2], [1, 1, 0, 0]) == pytest.approx((0 + 0 + 1 / 3 + 1 / 2) / 4)
    # reversed ranking: risk@k = 1, 1, 2/3, 1/2
    assert aurc([0.2, 0.3, 0.8, 0.9], [1, 1, 0, 0]) == pytest.approx((1 + 1 + 2 / 3 + 1 / 2) / 4)
    # all tied: expected errors among first k = k/2 -> risk 1/2 everywhere
    assert aurc([0.7] * 4, [1, 1, 0, 0]) == pytest.approx(0.5)
    assert aurc([1.0, 1.0], [1, 1]) == 0.0
    assert aurc([0.0, 0.0], [0, 0]) == 1.0


def test_aurc_ties_equal_average_over_orderings() -> None:
    import itertools

    c = [0.9, 0.6, 0.6, 0.6, 0.2]
    z = [1, 1, 0, 0, 1]
    # brute force: average the per-ordering AURC over all orderings of the tied items
    vals = []
    for perm in itertools.permutations([1, 0, 0]):
        order = [1, *perm, 1]
        errs = np.cumsum([1 - v for v in order])
        vals.append(np.mean(errs / np.arange(1, 6)))
    assert aurc(c, z) == pytest.approx(np.mean(vals))
