"""Cross-fitted learned predictions for the model-assisted estimates
(judgefuse.calibration.cross_fitted): checked against ppi-python's cross-PPI on one stratum, by
hand on small cases, for the held-out property that keeps them valid, and by a seeded coverage
simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judgefuse.calibration.cross_fitted import CrossFit, cross_fit, cross_fitted_strata, vote_features
from judgefuse.calibration.model_assisted import difference_mean

ppi_py = pytest.importorskip("ppi_py")


def _panel(rng, size, judges=5):
    """Judges' probabilities for the fused answer and whether it is right: the share of judges
    that agree predicts correctness far better than the (flat) method confidence."""
    right = (rng.random(size) < 0.7).astype(float)
    skill = np.where(right[:, None] == 1.0, 0.75, 0.35)
    p_choice = np.clip(skill + rng.normal(0.0, 0.12, (size, judges)), 0.01, 0.99)
    confidence = np.clip(0.8 + rng.normal(0.0, 0.02, size), 0.5, 1.0)
    return vote_features(p_choice, confidence), confidence, right


def test_vote_features_by_hand():
    x = vote_features(np.array([[0.8, 0.5, 0.2], [0.9, 0.9, 0.6]]), np.array([0.7, 0.9]))
    assert x.shape == (2, 1 + 3 + 3 + 4)
    assert x[0, 0] == 0.7
    assert x[0, 1:4].tolist() == [0.8, 0.5, 0.2]
    assert x[0, 4:7] == pytest.approx([math.log(4.0), 0.0, -math.log(4.0)])
    assert x[0, 7:9].tolist() == pytest.approx([1 / 3, 1 / 3])  # agree, disagree (the 0.5 is neither)
    assert x[0, 9] == pytest.approx(-(1 / 3 * math.log(1 / 3) + 2 / 3 * math.log(2 / 3)))
    assert x[0, 10] == pytest.approx(0.0)  # mean log odds: +ln 4, 0, -ln 4
    assert x[1, 7:9].tolist() == pytest.approx([1.0, 0.0])
    with pytest.raises(ValueError, match="one row per confidence"):
        vote_features(np.array([0.8, 0.2]), np.array([0.7, 0.9]))


def test_a_labelled_verdicts_prediction_never_sees_its_own_label():
    """Flipping one labelled verdict's label leaves its own prediction unchanged (its fold's model
    did not train on it) while the other folds' models, and so the unlabelled ones, move."""
    rng = np.random.default_rng(1)
    x, _, right = _panel(rng, 400)
    labelled = rng.random(400) < 0.4
    strata = np.where(np.arange(400) < 200, "review", "auto@0.3")
    fit = cross_fit(x, right, labelled, strata, folds=4, seed=7)
    i = int(np.flatnonzero(labelled)[3])
    flipped = right.copy()
    flipped[i] = 1.0 - flipped[i]
    fit2 = cross_fit(x, flipped, labelled, strata, folds=4, seed=7)
    assert fit2.prediction[i] == pytest.approx(fit.prediction[i], abs=1e-12)
    k = fit.fold[i]
    assert fit2.per_fold[i, k] == pytest.approx(fit.per_fold[i, k], abs=1e-12)
    others = [j for j in range(4) if j != k]
    assert not np.allclose(fit2.per_fold[:, others], fit.per_fold[:, others])
    # every labelled verdict has a fold, balanced within each stratum; unlabelled: the folds' mean
    assert (fit.fold[labelled] >= 0).all() and (fit.fold[~labelled] == -1).all()
    for s in ("review", "auto@0.3"):
        counts = np.bincount(fit.fold[labelled & (strata == s)], minlength=4)
        assert counts.max() - counts.min() <= 1
    assert fit.prediction[~labelled] == pytest.approx(fit.per_fold[~labelled].mean(axis=1))


def test_each_fold_model_is_scikit_learns_l2_logistic_regression():
    """The Newton fit minimises the same objective as sklearn's LogisticRegression(C) on the
    training fold's standardised features: same probabilities."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(2)
    x, _, right = _panel(rng, 150)
    labelled = np.arange(150) < 100
    fit = cross_fit(x, right, labelled, np.array(["review"] * 150), folds=2, strength=0.5, seed=4)
    train = labelled & (fit.fold != 0)
    centre, scale = x[train].mean(axis=0), x[train].std(axis=0)
    model = LogisticRegression(C=0.5, tol=1e-10, max_iter=10_000).fit((x[train] - centre) / scale, right[train])
    assert fit.per_fold[:, 0] == pytest.approx(model.predict_proba((x - centre) / scale)[:, 1], abs=1e-6)


def test_one_class_in_a_training_fold_predicts_its_mean():
    x = np.arange(20, dtype=float)[:, None]
    labelled = np.ones(20, dtype=bool)
    fit = cross_fit(x, np.ones(20), labelled, np.array(["review"] * 20), folds=2)
    assert (fit.prediction == 1.0).all()
    with pytest.raises(ValueError, match="at least 2 folds"):
        cross_fit(x, np.ones(20), labelled, np.array(["review"] * 20), folds=1)


def test_strata_by_hand():
    """Given predictions, the strata carry the prediction totals of all members, the labelled
    outcomes and predictions, and the Brier prediction q (1 - c)^2 + (1 - q) c^2."""
    q = np.array([0.9, 0.6, 0.3, 0.8])
    c = np.array([0.7, 0.6, 0.9, 0.95])
    right = np.array([1.0, 0.0, 0.0, 1.0])
    labelled = np.array([True, False, True, False])
    fit = CrossFit(q, np.tile(q[:, None], (1, 2)), np.array([0, -1, 1, -1]))
    review, auto = np.array([True, True, False, False]), np.array([False, False, True, True])
    strata = cross_fitted_strata(fit, right, c, labelled, [("review", review), ("auto", auto)])
    acc = strata["accuracy"]
    assert [s.population for s in acc] == [2, 2]
    assert acc[0].prediction_total == pytest.approx(1.5) and acc[1].prediction_total == pytest.approx(1.1)
    assert acc[0].y.tolist() == [1.0] and acc[0].f.tolist() == [0.9]
    brier = strata["brier"]
    expected = q * (1 - c) ** 2 + (1 - q) * c**2
    assert brier[0].prediction_total == pytest.approx(expected[:2].sum())
    assert brier[1].y.tolist() == pytest.approx([0.81]) and brier[1].f.tolist() == pytest.approx([expected[2]])
    # lam = 1 on the review stratum alone, by hand: y_lab + q_unlab + m * (y - q)_lab
    est = difference_mean(acc[:1], lam=1.0)
    assert est.estimate == pytest.approx((1.0 + 0.6 + 1 * (1.0 - 0.9)) / 2)


def test_one_stratum_is_ppi_pythons_cross_ppi_when_the_population_is_large():
    """Same inputs (held-out predictions of the labels, every fold model's predictions of the
    rest), plain interval (lam 1, normal quantile): the same estimate as
    ppi_py.crossppi_mean_ci once the window's own labels are added, and the same variance but
    for the one term a known window does not have."""
    rng = np.random.default_rng(3)
    x, _, right = _panel(rng, 100_000)
    labelled = np.zeros(right.size, dtype=bool)
    labelled[rng.choice(right.size, 200, replace=False)] = True
    fit = cross_fit(x, right, labelled, np.array(["all"] * right.size), folds=5, seed=2)
    c = np.full(right.size, 0.8)
    acc = cross_fitted_strata(fit, right, c, labelled, [("all", np.ones(right.size, dtype=bool))])["accuracy"]
    ours = difference_mean(acc, lam=1.0, small_sample=False)
    args = (right[labelled], fit.prediction[labelled], fit.per_fold[~labelled])
    lower, upper = ppi_py.crossppi_mean_ci(*args, alpha=0.05)
    point = float(np.ravel(ppi_py.crossppi_mean_pointestimate(*args))[0])
    # ppi_py estimates the unlabelled verdicts' mean; the window's adds the 200 labels themselves
    n, big_n = 200, right.size
    assert ours.estimate == pytest.approx(n / big_n * right[labelled].mean() + (big_n - n) / big_n * point, abs=1e-12)
    # ppi_py's variance adds the unlabelled predictions' sampling variance (a superpopulation's
    # mean); the window's predictions are all known, so its interval leaves exactly that out
    half = (float(np.ravel(upper)[0]) - float(np.ravel(lower)[0])) / 2
    z = 1.959963984540054
    imputed = z * z * fit.per_fold[~labelled].mean(axis=1).var() / (big_n - n)
    assert ((ours.upper - ours.lower) / 2) ** 2 + imputed == pytest.approx(half**2, rel=2e-3)


def test_stratified_windows_are_covered_and_learned_predictions_narrow_the_interval():
    """Seeded simulation, 120 windows of 300 verdicts (a review stratum 50% labelled, an audited
    one 20%): the tuned cross-fitted interval covers the window's accuracy in >= 0.9 of them
    and is clearly narrower than the one with the flat confidence as the prediction."""
    rng = np.random.default_rng(11)
    covered, widths, widths_confidence = 0, [], []
    runs = 120
    for _ in range(runs):
        x, c, right = _panel(rng, 300)
        review = np.arange(300) < 120
        labelled = np.where(review, rng.random(300) < 0.5, rng.random(300) < 0.2)
        strata = [("review", review), ("auto@0.2", ~review)]
        fit = cross_fit(x, np.where(labelled, right, 0.0), labelled, np.where(review, "review", "auto@0.2"),
                        seed=int(rng.integers(1 << 30)))
        est = difference_mean(cross_fitted_strata(fit, right, c, labelled, strata)["accuracy"])
        flat = CrossFit(c, c[:, None], fit.fold)
        base = difference_mean(cross_fitted_strata(flat, right, c, labelled, strata)["accuracy"])
        covered += est.lower <= right.mean() <= est.upper
        widths.append(est.upper - est.lower)
        widths_confidence.append(base.upper - base.lower)
    assert covered / runs >= 0.9
    assert np.mean(widths) < 0.75 * np.mean(widths_confidence)
