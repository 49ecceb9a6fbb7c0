"""Post-hoc recalibration of a confidence: fitted on (confidence, correct) pairs.

Pure numpy/scipy/scikit-learn; imports nothing of judgefuse. Every recalibrator has
``fit(confidence, correct) -> self`` and ``transform(confidence) -> ndarray`` (values in [0, 1]):

* :class:`PlattScaling` - logistic regression on ``logit(c)``: ``c' = sigmoid(a logit(c) + b)``,
  fitted by maximum likelihood with Platt's smoothed targets ((N+ + 1)/(N+ + 2) and
  1/(N- + 2)), so a single-class sample still gives a finite fit.
* :class:`TemperatureScaling` - one scale: ``c' = sigmoid(logit(c) / T)``, T > 0 minimising
  the NLL (scipy, bounded search on log T in [-6, 6]).
* :class:`IsotonicCalibration` - ``sklearn.isotonic.IsotonicRegression`` (increasing, output in
  [0, 1], ``out_of_bounds="clip"``).
* :class:`HistogramBinning` - equal-width bins on [0, 1]; a bin's value is the accuracy of the
  training points in it; an empty bin takes the mean of its nearest non-empty neighbours (one on
  each side when both exist), and the global accuracy if no bin has data.

A fitted recalibrator saves and restores its state as JSON-ready parameters
(:func:`recalibrator_params`, :func:`restore_recalibrator`), so a recalibrated learned method can
be stored by the service like any other fitted model.

Inputs are validated: empty arrays, NaN/inf, confidences outside [0, 1], correctness other than
0/1 and length mismatches raise ``ValueError``; ``transform`` before ``fit`` raises
``RuntimeError``. Logits use ``c`` clipped to [1e-6, 1 - 1e-6].
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

if TYPE_CHECKING:  # sklearn costs ~1 s to import: only isotonic fitting pays for it
    from sklearn.isotonic import IsotonicRegression

CLIP = 1e-6

__all__ = [
    "RECALIBRATORS",
    "HistogramBinning",
    "IsotonicCalibration",
    "PlattScaling",
    "Recalibrator",
    "TemperatureScaling",
    "make_recalibrator",
    "recalibrator_params",
    "restore_recalibrator",
]


@runtime_checkable
class Recalibrator(Protocol):
    """Maps a raw confidence to a calibrated one, fitted on labelled pairs."""

    name: str

    def fit(self, confidence: ArrayLike, correct: ArrayLike) -> Self: ...

    def transform(self, confidence: ArrayLike) -> NDArray[np.float64]: ...


def _check_confidence(confidence: ArrayLike, *, allow_empty: bool = False) -> NDArray[np.float64]:
    try:
        c = np.asarray(confidence, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"confidence must be numbers: {exc}") from exc
    if c.ndim != 1:
        c = c.reshape(-1) if c.ndim == 0 else c
        if c.ndim != 1:
            raise ValueError(f"confidence must be one-dimensional, got shape {c.shape}")
    if c.size == 0 and not allow_empty:
        raise ValueError("confidence is empty")
    if not np.all(np.isfinite(c)):
        raise ValueError("confidence contains NaN or infinite values")
    if np.any((c < 0.0) | (c > 1.0)):
        raise ValueError("confidence must lie in [0, 1]")
    return c


def _check_pairs(
    confidence: ArrayLike, correct: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    c = _check_confidence(confidence)
    try:
        z = np.asarray(correct, dtype=float).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"correct must be 0/1 values: {exc}") from exc
    if z.shape != c.shape:
        raise ValueError(f"length mismatch: {c.size} confidences, {z.size} correctness values")
    if not np.all(np.isfinite(z)) or np.any((z != 0.0) & (z != 1.0)):
        raise ValueError("correct must contain only 0/1 (or booleans)")
    return c, z


def _logit(c: NDArray[np.float64]) -> NDArray[np.float64]:
    c = np.clip(c, CLIP, 1.0 - CLIP)
    return np.log(c) - np.log1p(-c)


class _Base:
    name = "base"
    _fitted = False

    def _require_fit(self) -> None:
        if not self._fitted:
            raise RuntimeError(f"{type(self).__name__} must be fitted before transform")

    def fit_transform(self, confidence: ArrayLike, correct: ArrayLike) -> NDArray[np.float64]:
        return self.fit(confidence, correct).transform(confidence)  # type: ignore[attr-defined]


class PlattScaling(_Base):
    """``c' = sigmoid(a * logit(c) + b)``; ``a = 1/T, b = 0`` is temperature scaling."""

    name = "platt"

    def __init__(self, smooth_targets: bool = True):
        self.smooth_targets = smooth_targets
        self.a: float = 1.0
        self.b: float = 0.0

    def fit(self, confidence: ArrayLike, correct: ArrayLike) -> Self:
        from scipy.optimize import minimize  # scipy loads on first fit, not at import
        from scipy.special import expit, log_expit

        c, z = _check_pairs(confidence, correct)
        x = _logit(c)
        if self.smooth_targets:
            n_pos = float(z.sum())
            n_neg = float(z.size - n_pos)
            t = np.where(z == 1.0, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
        else:
            t = z

        # every per-point term below is a function of the point's (x, t) alone, and a recalibrated
        # voting rule's confidences take few values: the terms are computed once per distinct pair
        # and laid out per point, so each mean adds the very floats, in the same order, as before
        values, at = np.unique(x, return_inverse=True)
        ux: NDArray[np.float64] = x
        ut: NDArray[np.float64] = t
        where = None
        if values.size * 8 <= x.size:
            where = at.reshape(-1) * 2 + (z == 1.0)  # t is a function of z
            ux, ut = np.zeros(2 * values.size), np.zeros(2 * values.size)
            ux[where], ut[where] = x, t

        def nll(params: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
            s = params[0] * ux + params[1]
            terms = ut * log_expit(s) + (1.0 - ut) * log_expit(-s)
            r = expit(s) - ut
            rx = r * ux
            if where is not None:
                terms, r, rx = terms[where], r[where], rx[where]
            return float(-np.mean(terms)), np.array([np.mean(rx), np.mean(r)])

        result = minimize(nll, np.array([1.0, 0.0]), jac=True, method="L-BFGS-B")
        self.a, self.b = float(result.x[0]), float(result.x[1])
        self._fitted = True
        return self

    def transform(self, confidence: ArrayLike) -> NDArray[np.float64]:
        from scipy.special import expit

        self._require_fit()
        c = _check_confidence(confidence, allow_empty=True)
        return expit(self.a * _logit(c) + self.b)


class TemperatureScaling(_Base):
    """``c' = sigmoid(logit(c) / T)``: one scale, T > 1 softens an overconfident source."""

    name = "temperature"

    def __init__(self, log_t_bounds: tuple[float, float] = (-6.0, 6.0)):
        self.log_t_bounds = log_t_bounds
        self.temperature: float = 1.0

    def fit(self, confidence: ArrayLike, correct: ArrayLike) -> Self:
        from scipy.optimize import minimize_scalar
        from scipy.special import log_expit

        c, z = _check_pairs(confidence, correct)
        x = _logit(c)

        def nll(log_t: float) -> float:
            s = x * np.exp(-log_t)
            return float(-np.mean(z * log_expit(s) + (1.0 - z) * log_expit(-s)))

        result = minimize_scalar(
            nll, bounds=self.log_t_bounds, method="bounded", options={"xatol": 1e-8}
        )
        self.temperature = float(np.exp(result.x))
        self._fitted = True
        return self

    def transform(self, confidence: ArrayLike) -> NDArray[np.float64]:
        from scipy.special import expit

        self._require_fit()
        c = _check_confidence(confidence, allow_empty=True)
        return expit(_logit(c) / self.temperature)


class IsotonicCalibration(_Base):
    """Monotone non-decreasing step map (scikit-learn), clipped outside the training range."""

    name = "isotonic"

    def __init__(self) -> None:
        self._model: IsotonicRegression | None = None
        self._knots: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None

    def fit(self, confidence: ArrayLike, correct: ArrayLike) -> Self:
        c, z = _check_pairs(confidence, correct)
        from sklearn.isotonic import IsotonicRegression

        self._model = IsotonicRegression(
            y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip"
        ).fit(c, z)
        self._knots = (np.asarray(self._model.X_thresholds_, dtype=float),
                       np.asarray(self._model.y_thresholds_, dtype=float))
        self._fitted = True
        return self

    def transform(self, confidence: ArrayLike) -> NDArray[np.float64]:
        self._require_fit()
        c = _check_confidence(confidence, allow_empty=True)
        assert self._knots is not None
        if c.size == 0:
            return np.empty(0)
        # sklearn's predict: clip to the fitted range, then linear interpolation between the
        # knots; np.interp does both (and works on a restored model, which has no sklearn object)
        x, y = self._knots
        return np.clip(np.interp(c, x, y), 0.0, 1.0)


class HistogramBinning(_Base):
    """Equal-width bins on [0, 1] (bin i = [i/n, (i+1)/n), last closed); value = bin accuracy."""

    name = "histogram"

    def __init__(self, n_bins: int = 10):
        if n_bins < 1:
            raise ValueError("n_bins must be >= 1")
        self.n_bins = n_bins
        self.values: NDArray[np.float64] = np.full(n_bins, 0.5)
        self.counts: NDArray[np.int64] = np.zeros(n_bins, dtype=np.int64)

    def _bins(self, c: NDArray[np.float64]) -> NDArray[np.intp]:
        return np.minimum((c * self.n_bins).astype(np.intp), self.n_bins - 1)

    def fit(self, confidence: ArrayLike, correct: ArrayLike) -> Self:
        c, z = _check_pairs(confidence, correct)
        idx = self._bins(c)
        counts = np.bincount(idx, minlength=self.n_bins)
        sums = np.bincount(idx, weights=z, minlength=self.n_bins)
        filled = counts > 0
        values = np.full(self.n_bins, float(z.mean()))
        values[filled] = sums[filled] / counts[filled]
        where = np.flatnonzero(filled)
        for i in np.flatnonzero(~filled):
            left = where[where < i]
            right = where[where > i]
            neighbours = [values[left[-1]]] if left.size else []
            neighbours += [values[right[0]]] if right.size else []
            if neighbours:
                values[i] = float(np.mean(neighbours))
        self.values, self.counts = values, counts
        self._fitted = True
        return self

    def transform(self, confidence: ArrayLike) -> NDArray[np.float64]:
        self._require_fit()
        c = _check_confidence(confidence, allow_empty=True)
        return self.values[self._bins(c)].astype(float)


RECALIBRATORS: dict[str, type[Any]] = {
    "platt": PlattScaling,
    "temperature": TemperatureScaling,
    "isotonic": IsotonicCalibration,
    "histogram": HistogramBinning,
}


def make_recalibrator(name: str, **options: Any) -> Recalibrator:
    """Build a recalibrator by name (``platt``, ``temperature``, ``isotonic``, ``histogram``)."""
    try:
        cls = RECALIBRATORS[name]
    except KeyError:
        raise ValueError(
            f"unknown recalibrator {name!r}; known: {', '.join(sorted(RECALIBRATORS))}"
        ) from None
    recalibrator: Recalibrator = cls(**options)
    return recalibrator


def recalibrator_params(recalibrator: Recalibrator) -> dict[str, Any]:
    """A fitted recalibrator's state as JSON-ready parameters (``RuntimeError`` before fit;
    ``TypeError`` for a recalibrator that is not one of :data:`RECALIBRATORS`)."""
    if isinstance(recalibrator, _Base):
        recalibrator._require_fit()
    if isinstance(recalibrator, PlattScaling):
        return {"a": recalibrator.a, "b": recalibrator.b, "smooth_targets": recalibrator.smooth_targets}
    if isinstance(recalibrator, TemperatureScaling):
        return {"temperature": recalibrator.temperature}
    if isinstance(recalibrator, IsotonicCalibration):
        assert recalibrator._knots is not None
        x, y = recalibrator._knots
        return {"x": x.tolist(), "y": y.tolist()}
    if isinstance(recalibrator, HistogramBinning):
        return {"n_bins": recalibrator.n_bins, "values": recalibrator.values.tolist(),
                "counts": recalibrator.counts.tolist()}
    raise TypeError(f"recalibrator {type(recalibrator).__name__} has no parameters to save")


def restore_recalibrator(name: str, params: dict[str, Any]) -> Recalibrator:
    """The fitted recalibrator ``name`` rebuilt from :func:`recalibrator_params` output
    (``ValueError`` for an unknown name or malformed parameters)."""
    try:
        if name == "platt":
            platt = PlattScaling(smooth_targets=bool(params.get("smooth_targets", True)))
            platt.a, platt.b = float(params["a"]), float(params["b"])
            restored: PlattScaling | TemperatureScaling | IsotonicCalibration | HistogramBinning = platt
        elif name == "temperature":
            temperature = TemperatureScaling()
            temperature.temperature = float(params["temperature"])
            if not temperature.temperature > 0:
                raise ValueError("temperature must be > 0")
            restored = temperature
        elif name == "isotonic":
            isotonic = IsotonicCalibration()
            x = np.asarray(params["x"], dtype=float)
            y = np.asarray(params["y"], dtype=float)
            if x.ndim != 1 or x.shape != y.shape or x.size == 0:
                raise ValueError("isotonic knots x and y must be equal-length, non-empty lists")
            isotonic._knots = (x, y)
            restored = isotonic
        elif name == "histogram":
            histogram = HistogramBinning(n_bins=int(params["n_bins"]))
            histogram.values = np.asarray(params["values"], dtype=float)
            histogram.counts = np.asarray(params["counts"], dtype=np.int64)
            if histogram.values.shape != (histogram.n_bins,):
                raise ValueError("histogram values must have n_bins entries")
            restored = histogram
        else:
            raise ValueError(f"unknown recalibrator {name!r}; known: {', '.join(sorted(RECALIBRATORS))}")
    except (KeyError, TypeError) as exc:
        raise ValueError(f"recalibrator {name!r}: malformed parameters ({exc})") from None
    restored._fitted = True
    return restored
