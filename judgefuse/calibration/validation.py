"""Up-front checks of the ``(confidence, correct)`` pair every metric takes.

Every public metric validates its inputs here, once, and then works on clean float arrays.
Failing loudly with a ``ValueError`` that names the problem is deliberate: a NaN confidence or
a label of ``2`` silently turned into a number would give a calibration score that looks
plausible and is wrong, which is the worst failure a calibration library can have.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["check_confidence", "check_correct", "check_n_bins", "check_pair", "check_weights"]


def _as_1d(values: Any, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty: metrics need at least one item")
    return arr


def check_confidence(confidence: Any, *, name: str = "confidence") -> np.ndarray:
    """Return ``confidence`` as a float64 array of shape (n,), each value in [0, 1].

    Raises ``ValueError`` for non-numeric input, NaN, values outside [0, 1] (including
    +-inf), a non 1-D shape, or an empty array.
    """
    arr = _as_1d(confidence, name)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name} must be numeric probabilities in [0, 1], got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    if np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN at index {int(np.flatnonzero(np.isnan(arr))[0])}")
    lo, hi = arr.min(), arr.max()
    if lo < 0.0 or hi > 1.0:
        bad = int(np.flatnonzero((arr < 0.0) | (arr > 1.0))[0])
        raise ValueError(f"{name} must lie in [0, 1]; index {bad} is {arr[bad]!r}")
    return arr


def check_correct(correct: Any, *, name: str = "correct") -> np.ndarray:
    """Return ``correct`` as a float64 array of shape (n,) holding only 0.0 and 1.0.

    Accepts bool arrays or numeric arrays whose values are exactly 0 or 1. Anything else
    (2, 0.5, NaN, strings) raises ``ValueError``: correctness is a fact, not a probability.
    """
    arr = _as_1d(correct, name)
    if arr.dtype == bool:
        return arr.astype(np.float64)
    if not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name} must be 0/1 or bool, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    ok = (arr == 0.0) | (arr == 1.0)
    if not ok.all():
        bad = int(np.flatnonzero(~ok)[0])
        raise ValueError(f"{name} must contain only 0/1 (or bool); index {bad} is {arr[bad]!r}")
    return arr


def check_pair(confidence: Any, correct: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validate both arrays and their lengths; return ``(c, z)``, float64, shape (n,)."""
    c = check_confidence(confidence)
    z = check_correct(correct)
    if c.shape != z.shape:
        raise ValueError(
            f"confidence and correct must have the same length, got {c.size} and {z.size}"
        )
    return c, z


def check_weights(sample_weight: Any, n: int) -> np.ndarray | None:
    """Return ``sample_weight`` as float64 of shape (n,), finite, >= 0, with a positive sum.

    ``None`` passes through (unweighted). Weights are relative: only their ratios matter.
    """
    if sample_weight is None:
        return None
    w = _as_1d(sample_weight, "sample_weight")
    if w.dtype == bool or not np.issubdtype(w.dtype, np.number):
        raise ValueError(f"sample_weight must be numeric, got dtype {w.dtype}")
    w = w.astype(np.float64, copy=False)
    if w.size != n:
        raise ValueError(f"sample_weight must have length {n}, got {w.size}")
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("sample_weight must be finite and non-negative")
    if not w.sum() > 0:
        raise ValueError("sample_weight must have a positive sum")
    return w


def check_n_bins(n_bins: Any) -> int:
    """``n_bins`` must be an int >= 1 (bools are refused)."""
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins must be an integer >= 1, got {n_bins!r}")
    return int(n_bins)
