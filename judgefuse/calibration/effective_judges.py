"""The effective number of independent judges in a panel, from the correlation of their errors.

``k`` judges whose errors have mean pairwise correlation ``rho`` carry the evidence of

    k_eff = k / (1 + (k - 1) * rho)

independent ones (Kish's design effect for equicorrelated observations): ``rho = 0`` gives
``k``, ``rho = 1`` gives 1. Judges that err together add votes, not evidence, which is why big
panels disappoint: ten judges at ``rho = 0.5`` are worth fewer than two independent ones.

Input: an (items x judges) matrix of errors (1 wrong, 0 right, NaN no vote). What an error is
against is the caller's choice: the label when there is one; without labels, a label-free
consensus (Dawid-Skene's; :mod:`judgefuse.fusion.panel_structure`). A pair of judges contributes
the Pearson correlation of its two error series over the items both voted on, when there are at
least ``min_shared`` such items and both series vary; ``rho`` is the mean over the pairs that
qualify, clipped at 0 below for ``k_eff`` (negatively correlated errors are reported, but a
panel is never counted as more than ``k`` judges). Pure numpy; imports nothing of ours.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["MIN_SHARED", "effective_number", "pairwise_error_correlations"]

MIN_SHARED = 10


def pairwise_error_correlations(errors: NDArray[np.float64], *, min_shared: int = MIN_SHARED) -> list[float]:
    """The error correlation of every pair of judges that qualifies (module docstring)."""
    errors = np.asarray(errors, dtype=float)
    if errors.ndim != 2:
        raise ValueError(f"errors must be an (items x judges) matrix, got shape {errors.shape}")
    k = errors.shape[1]
    out: list[float] = []
    for a in range(k):
        for b in range(a + 1, k):
            both = ~np.isnan(errors[:, a]) & ~np.isnan(errors[:, b])
            x, y = errors[both, a], errors[both, b]
            if both.sum() >= min_shared and x.std() > 0 and y.std() > 0:
                out.append(float(np.corrcoef(x, y)[0, 1]))
    return out


def effective_number(
    errors: NDArray[np.float64], *, min_shared: int = MIN_SHARED
) -> tuple[float | None, float | None]:
    """(k_eff, mean pairwise error correlation) of the matrix; (None, None) when no pair
    qualifies. ``k`` counts the judges (columns) with at least one vote: a judge that never
    answered adds no evidence."""
    rhos = pairwise_error_correlations(errors, min_shared=min_shared)
    if not rhos:
        return None, None
    k = int(np.sum(~np.all(np.isnan(np.asarray(errors, dtype=float)), axis=0)))
    rho = float(np.mean(rhos))
    return k / (1.0 + (k - 1) * max(0.0, rho)), rho
