"""Capability calibration ("On Calibration of Large Language Models: From Response To Capability"): confidence against the judge's *expected* accuracy.

With k sampled answers per item (MP mode), the single correctness bit is a noisy target;
mu_i = correct samples / k estimates the probability the judge gets item i right. Scoring
confidence against mu rather than z measures whether confidence tracks capability, and is
what decides where extra samples are worth spending.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .validation import check_confidence

__all__ = ["capability_brier", "capability_random_baseline", "expected_accuracy"]


def expected_accuracy(n_correct: Any, n_samples: Any) -> np.ndarray:
    """mu = n_correct / n_samples per item, shape (n,). Counts must satisfy 0 <= n_correct <= k, k >= 1."""
    k_correct = np.asarray(n_correct, dtype=np.float64)
    k = np.broadcast_to(np.asarray(n_samples, dtype=np.float64), k_correct.shape)
    if k_correct.ndim != 1 or k_correct.size == 0:
        raise ValueError("n_correct must be a non-empty 1-D array")
    if not (np.isfinite(k).all() and (k >= 1).all()):
        raise ValueError("n_samples must be >= 1")
    if not (np.isfinite(k_correct).all() and (k_correct >= 0).all() and (k_correct <= k).all()):
        raise ValueError("n_correct must lie in [0, n_samples]")
    return k_correct / k


def capability_brier(confidence: Any, expected_accuracy: Any) -> float:
    """Capability Brier score mean (c_i - mu_i)^2 ("From Response To Capability", eq. for L_Brier^capability).

    ``confidence`` and ``expected_accuracy`` (mu, e.g. from :func:`expected_accuracy`): shape
    (n,), both in [0, 1].
    """
    c = check_confidence(confidence)
    mu = check_confidence(expected_accuracy, name="expected_accuracy")
    if c.shape != mu.shape:
        raise ValueError(
            f"confidence and expected_accuracy must have the same length, got {c.size} and {mu.size}"
        )
    return float(np.mean((c - mu) ** 2))


def capability_random_baseline(expected_accuracy: Any) -> float:
    """Expected capability Brier of a confidence drawn s ~ U(0, 1): mean(1/3 - mu + mu^2).

    From "From Response To Capability", eq. (11) / appendix C.2: E[(s - mu)^2] = int_0^1 (s - mu)^2 ds
    = 1/3 - mu + mu^2. A method that does not beat this uses no information about the item.
    """
    mu = check_confidence(expected_accuracy, name="expected_accuracy")
    return float(np.mean(1.0 / 3.0 - mu + mu**2))
