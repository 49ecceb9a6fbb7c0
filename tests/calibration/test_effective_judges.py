"""k_eff = k / (1 + (k - 1) * rho) from a matrix of 0/1 errors (NaN: no vote)."""

from __future__ import annotations

import numpy as np
import pytest

from judgefuse.calibration.effective_judges import effective_number, pairwise_error_correlations


def test_identical_errors_are_one_judge_and_independent_ones_count_fully() -> None:
    rng = np.random.default_rng(0)
    shared = (rng.random(5000) < 0.3).astype(float)
    assert effective_number(np.column_stack([shared] * 4)) == (pytest.approx(1.0), pytest.approx(1.0))
    independent = (rng.random((5000, 4)) < 0.3).astype(float)
    k_eff, rho = effective_number(independent)
    print(f"independent: k_eff {k_eff:.3f} (target 4), rho {rho:+.4f}")
    assert k_eff == pytest.approx(4.0, abs=0.1)


def test_by_hand_and_silent_judges_do_not_count() -> None:
    e1 = [1, 1, 1] + [0] * 9
    e2 = [1, 1, 0, 1] + [0] * 8
    e3 = [1, 0, 1, 0, 1] + [0] * 7
    silent = [np.nan] * 12  # a judge that never answered
    errors = np.array([e1, e2, e3, silent], dtype=float).T
    assert pairwise_error_correlations(errors) == pytest.approx([5 / 9, 5 / 9, 1 / 9])
    rho = (5 / 9 + 5 / 9 + 1 / 9) / 3
    assert effective_number(errors) == (pytest.approx(3 / (1 + 2 * rho)), pytest.approx(rho))


def test_negative_correlation_is_reported_but_never_counts_above_k() -> None:
    a = np.array([1, 0] * 10, dtype=float)
    k_eff, rho = effective_number(np.column_stack([a, 1 - a]))
    assert rho == pytest.approx(-1.0) and k_eff == pytest.approx(2.0)


def test_too_few_shared_items_gives_nothing() -> None:
    errors = np.array([[1, 0], [0, 1], [1, 1]], dtype=float)
    assert effective_number(errors) == (None, None)
    with pytest.raises(ValueError, match="matrix"):
        effective_number(np.zeros(5))
