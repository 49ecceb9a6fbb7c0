"""Streaming calibration record: counters from which every headline metric is read in O(bins).

The live service (docs/design.md, 'Live calibration') keeps one record per
(tenant, judge or method, mode). A label must cost O(1) to add, a relabel must be undoable
exactly, and a metrics query must cost O(bins), not O(labels). The design is **field
increments**: :meth:`CalibrationAccumulator.increments` turns one labelled verdict into a small
``{field name: integer delta}`` dict; a storage backend adds each delta to a stored counter
atomically (Redis ``HINCRBY key field delta`` in a pipeline/MULTI, SQLite
``INSERT ... ON CONFLICT DO UPDATE SET v = v + excluded.v``) without understanding the fields;
:meth:`CalibrationAccumulator.metrics_from_fields` reads the counters back into the same
dict :func:`~judgefuse.calibration.summarize` returns, plus the reliability diagram.

Fields are integers (int64 is enough, see Capacity), not floats: integer addition is exact,
so ``sign=-1`` undoes ``sign=+1`` *exactly* whatever happened in between (a relabel is
"subtract the old increments, add the new ones"), and the counters of several records
(e.g. hourly buckets) add exactly in any order. Real-valued sums (of c, Brier, NLL) are kept in
fixed point with quantum 2**-32: each item's value is rounded to the nearest multiple, an error
<= 2**-33 ~ 1.2e-10 per item, so every mean read back is within ~1.2e-10 of the float
computation.

Fields (absent = 0, so a record only holds the fields it touched):

* ``n{b}``, ``k{b}``, ``c{b}``: per fine bin ``b`` (``fine_bins`` equal-width bins, default
  1000) the count, the correct count and the fixed-point sum of confidence. Fine bins use the
  edge rule of :mod:`.binning` (bin i is ``[i/F, (i+1)/F)``, the last closed; edges are the
  correctly rounded ``i/F``). For any ``n_bins`` dividing ``F`` the edge ``j/n_bins`` is the
  same float as the fine edge ``(j*F/n_bins)/F`` (both are the correctly rounded value of one
  rational), so coarse bin = fine bin // (F / n_bins) *exactly*, items on edges included.
* ``cz``: fixed-point sum of c over correct items (MacroCE, ICE).
* ``sb``, ``sl``: fixed-point sums of (c - z)^2 and of the NLL term with c clipped to
  [1e-12, 1 - 1e-12] (as :func:`~judgefuse.calibration.nll`).
* ``th{e}hn``, ``th{e}hk``, ``th{e}ln``, ``th{e}lk``: for each tracked TH-Score eps (default
  0.05, 0.10, 0.15; ``e`` = eps in thousandths, ``050``/``100``/``150``) the count and correct
  count of the high interval ``c >= 1 - eps`` and the low interval ``c <= eps``, with the float
  tolerance of :mod:`.th_score`. (These cannot come from fine bins: the tolerance reaches
  across a fine edge.)

Exact (to ~1e-10) against :func:`summarize` on the same items: n, accuracy, ECE and MCE for
every ``n_bins`` dividing ``fine_bins``, Brier, NLL, ICE, MacroCE, TH-Score at tracked eps.
Approximate, from fine bins, each fine bin treated as one tie group at its mean confidence
(exact whenever every fine bin holds a single distinct confidence, e.g. confidences on a
0.001 or coarser grid such as SC scores /100 or MP vote shares of 10 samples):
``adaptive_ce`` (a fine bin cut by an equal-mass boundary is shared pro rata at its mean
correctness *and* mean confidence, the tie rule of :func:`adaptive_ce`; error bounded by the
fine-bin width 1/F per boundary), ``auroc`` (items in the same fine bin count as ties, 1/2),
``aurc`` (items in the same fine bin ordered at random in expectation, as for ties).

Capacity: a fixed-point field grows by at most 2**32 per item (27.64 * 2**32 for NLL), so
int64 holds >= 2**31 items per fine bin and >= 77 million items in ``sl`` even if every item
were a maximally confident error (typical NLL < 1: > 2 billion). SQLite turns an overflowing
integer into a REAL silently: a backend should bucket records by time (see below) long before.

Windows are the storage layer's job and fit this design: keep one record per time bucket
(e.g. per hour; key ``(tenant, judge, mode, hour)``) and sum the buckets' fields for "last 24 h"
(24 dicts of at most ~3,000 small ints); for "last N labels" keep a label log and a rolling
record (add each new label's increments, subtract those of the label falling out), or
label-count buckets of e.g. 100 labels. A relabel is applied to the bucket that holds the
original label. :meth:`CalibrationAccumulator.add_fields` sums records.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from .binning import (
    BinTotals,
    equal_mass_bounds,
    equal_width_bin_index,
    equal_width_edges,
)
from .metric_registry import FieldTotals, registered_metrics
from .reliability import ReliabilityBin
from .scores import NLL_CLIP
from .th_score import TOLERANCE, th_score_from_parts
from .validation import check_n_bins, check_pair

__all__ = ["DEFAULT_TH_EPS", "FIXED_POINT_SCALE", "CalibrationAccumulator"]

FIXED_POINT_SCALE = 2**32
DEFAULT_TH_EPS = (0.05, 0.10, 0.15)


def _check_sign(sign: Any) -> None:
    if isinstance(sign, bool) or sign not in (1, -1):
        raise ValueError(f"sign must be +1 or -1, got {sign!r}")


def _fixed(values: np.ndarray) -> np.ndarray:
    """Round to the 2**-32 grid, as int64 (values * 2**32 is exact in float64)."""
    return np.rint(values * FIXED_POINT_SCALE).astype(np.int64)


class CalibrationAccumulator:
    """The field schema of one calibration record; stateless apart from its configuration.

    ``fine_bins``: equal-width fine bins (default 1000; ECE/MCE/reliability are exact for any
    ``n_bins`` dividing it). ``th_eps``: the TH-Score eps values tracked exactly, each in
    [0, 0.5) with at most three decimals. Two accumulators with the same configuration read
    each other's fields; changing the configuration means a new record.
    """

    def __init__(self, *, fine_bins: int = 1000, th_eps: Iterable[float] = DEFAULT_TH_EPS) -> None:
        self.fine_bins = check_n_bins(fine_bins)
        eps = tuple(float(e) for e in th_eps)
        for e in eps:
            if not 0.0 <= e < 0.5 or abs(e * 1000 - round(e * 1000)) > 1e-9:
                raise ValueError(f"th_eps values must lie in [0, 0.5) with <= 3 decimals, got {e}")
        if len(set(eps)) != len(eps):
            raise ValueError(f"duplicate th_eps values: {eps}")
        self.th_eps = eps
        self._th_codes = [f"th{round(e * 1000):03d}" for e in eps]
        f = self.fine_bins
        self._inner_edges = equal_width_edges(f)[1:-1].tolist()
        self._n_keys = [f"n{b}" for b in range(f)]
        self._k_keys = [f"k{b}" for b in range(f)]
        self._c_keys = [f"c{b}" for b in range(f)]
        self._known = set(self._n_keys) | set(self._k_keys) | set(self._c_keys) | {"cz", "sb", "sl"}
        for code in self._th_codes:
            self._known |= {code + s for s in ("hn", "hk", "ln", "lk")}

    def __repr__(self) -> str:
        return f"CalibrationAccumulator(fine_bins={self.fine_bins}, th_eps={self.th_eps})"

    @property
    def field_names(self) -> frozenset[str]:
        """Every field a record of this configuration can hold."""
        return frozenset(self._known)

    # ------------------------------------------------------------ writing
    def increments(self, confidence: float, correct: bool | int, *, sign: int = +1) -> dict[str, int]:
        """Field deltas for one labelled verdict (``sign=-1``: remove it, exactly).

        Only non-zero deltas are returned (about 6 to 12 fields). Raises ``ValueError`` for a
        confidence outside [0, 1], a correctness other than 0/1/bool, or a sign other than +-1.
        A scalar fast path (~25 us, most of it validation) giving exactly the integers of
        :meth:`increments_many` on a one-item batch (same float operations, same rounding).
        """
        _check_sign(sign)
        c_arr, z_arr = check_pair([confidence], [correct])
        c, right = float(c_arr[0]), bool(z_arr[0] == 1.0)
        z = 1.0 if right else 0.0
        b = bisect_right(self._inner_edges, c)
        qc = round(c * FIXED_POINT_SCALE)  # half-to-even, like np.rint
        p = min(max(c, NLL_CLIP), 1.0 - NLL_CLIP)
        out: dict[str, int] = {self._n_keys[b]: sign}
        if right:
            out[self._k_keys[b]] = sign
        values = {
            self._c_keys[b]: qc,
            "cz": qc if right else 0,
            "sb": round((c - z) ** 2 * FIXED_POINT_SCALE),
            "sl": round(float(-np.log(p if right else 1.0 - p)) * FIXED_POINT_SCALE),
        }
        for eps, code in zip(self.th_eps, self._th_codes, strict=True):
            if c >= (1.0 - eps) - TOLERANCE:
                values[code + "hn"] = 1
                values[code + "hk"] = int(right)
            if c <= eps + TOLERANCE:
                values[code + "ln"] = 1
                values[code + "lk"] = int(right)
        for key, value in values.items():
            if value:
                out[key] = sign * value
        _metric_increments(out, c, right, sign)
        return out

    def increments_many(self, confidence: Any, correct: Any, *, sign: int = +1) -> dict[str, int]:
        """Summed field deltas for many labelled verdicts (shape (n,) each), in O(n + bins).

        Equal to adding :meth:`increments` of each item, exactly (integer sums).
        """
        _check_sign(sign)
        c, z = check_pair(confidence, correct)
        f = self.fine_bins
        b = equal_width_bin_index(c, f)
        right = z == 1.0
        qc = _fixed(c)
        out: dict[str, int] = {}

        def put_bins(keys: list[str], counts: np.ndarray) -> None:
            for i in np.flatnonzero(counts):
                out[keys[i]] = sign * int(counts[i])

        put_bins(self._n_keys, np.bincount(b, minlength=f))
        put_bins(self._k_keys, np.bincount(b[right], minlength=f))
        order = np.argsort(b, kind="stable")
        b_sorted = b[order]
        starts = np.flatnonzero(np.r_[True, b_sorted[1:] != b_sorted[:-1]])
        sums = np.add.reduceat(qc[order], starts)  # exact int64 sums per occupied bin
        for start, total in zip(starts.tolist(), sums.tolist(), strict=True):
            if total:
                out[self._c_keys[b_sorted[start]]] = sign * total
        p = np.clip(c, NLL_CLIP, 1.0 - NLL_CLIP)
        scalars = {
            "cz": qc[right].sum(),
            "sb": _fixed((c - z) ** 2).sum(),
            "sl": _fixed(-np.log(np.where(right, p, 1.0 - p))).sum(),
        }
        for eps, code in zip(self.th_eps, self._th_codes, strict=True):
            high = c >= (1.0 - eps) - TOLERANCE
            low = c <= eps + TOLERANCE
            scalars[code + "hn"] = high.sum()
            scalars[code + "hk"] = (high & right).sum()
            scalars[code + "ln"] = low.sum()
            scalars[code + "lk"] = (low & right).sum()
        for key, value in scalars.items():
            if value:
                out[key] = sign * int(value)
        if any(metric.increments for metric in registered_metrics()):
            for c_item, right_item in zip(c.tolist(), right.tolist(), strict=True):
                _metric_increments(out, c_item, right_item, sign)
            out = {key: value for key, value in out.items() if value}
        return out

    @staticmethod
    def add_fields(*records: Mapping[str, int]) -> dict[str, int]:
        """Field-wise sum of records (increments or stored counters); zero fields dropped."""
        total: dict[str, int] = {}
        for record in records:
            for key, value in record.items():
                total[key] = total.get(key, 0) + int(value)
        return {k: v for k, v in total.items() if v}

    # ------------------------------------------------------------ reading
    def unknown_fields(self, fields: Mapping[str, Any]) -> list[str]:
        """The field names this configuration never writes, sorted (a metric's own
        ``name.field`` counters are known, registered or not). A set difference: O(fields) in C."""
        return sorted(k for k in fields.keys() - self._known if not _is_metric_field(k))

    def _bins(self, fields: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        unknown = self.unknown_fields(fields)
        if unknown:
            raise ValueError(f"unknown calibration fields {sorted(unknown)[:5]} for {self!r}")
        get = fields.get
        f = self.fine_bins
        n = np.fromiter((int(get(k, 0)) for k in self._n_keys), dtype=np.int64, count=f)
        k = np.fromiter((int(get(k, 0)) for k in self._k_keys), dtype=np.int64, count=f)
        qc = np.fromiter((int(get(k, 0)) for k in self._c_keys), dtype=np.int64, count=f)
        if (n < 0).any() or (k < 0).any() or (k > n).any() or (qc < 0).any() or (
            (qc >> 32) > n
        ).any():
            raise ValueError("inconsistent calibration fields (negative or impossible counts): "
                             "an increment was removed that was never added")
        return n, k, qc

    def metrics_from_fields(
        self, fields: Mapping[str, Any], *, n_bins: int = 10, eps: float = 0.1
    ) -> dict[str, Any]:
        """The :func:`summarize` dict (same keys) plus ``reliability`` (``n_bins`` bins).

        A registered metric beyond the built-ins is read through its ``from_fields`` over a
        :class:`~.metric_registry.FieldTotals` (NaN when it declares none).

        ``fields``: stored counters (values int or int-like strings, absent = 0). ``n_bins``
        must divide ``fine_bins``; ``eps`` must be one of ``th_eps``. See the module docstring
        for which values are exact and which approximate. With no labels, ``n`` is 0 and every
        other metric NaN (the reliability bins are all empty). Cost O(fine_bins).
        """
        n_bins = check_n_bins(n_bins)
        if self.fine_bins % n_bins:
            raise ValueError(f"n_bins={n_bins} must divide fine_bins={self.fine_bins}")
        code = next((cd for e, cd in zip(self.th_eps, self._th_codes, strict=True)
                     if abs(e - float(eps)) < 1e-12), None)
        if code is None:
            raise ValueError(f"eps={eps} is not tracked; tracked: {self.th_eps}")
        n_f, k_f, qc_f = self._bins(fields)
        n = int(n_f.sum())
        edges = equal_width_edges(n_bins)
        if n == 0:
            out: dict[str, Any] = {metric.name: math.nan for metric in registered_metrics()}
            out["n"] = 0.0
            out["reliability"] = [
                ReliabilityBin(i, float(edges[i]), float(edges[i + 1]),
                               float(edges[i] + edges[i + 1]) / 2.0, 0, math.nan, math.nan)
                for i in range(n_bins)
            ]
            return out
        scale = float(FIXED_POINT_SCALE)
        n_correct = int(k_f.sum())
        qc_total = int(qc_f.sum())
        cz = int(fields.get("cz", 0))
        sum_c_right, sum_c_wrong = cz / scale, (qc_total - cz) / scale
        n_wrong = n - n_correct

        # coarse bins: exact sums, exact nesting
        group = self.fine_bins // n_bins
        cnt = n_f.reshape(n_bins, group).sum(axis=1)
        kk = k_f.reshape(n_bins, group).sum(axis=1)
        qq = qc_f.reshape(n_bins, group).sum(axis=1)
        totals = BinTotals(count=cnt.astype(np.float64), weight=cnt.astype(np.float64),
                           sum_confidence=qq / scale, sum_correct=kk.astype(np.float64))
        ece = totals.calibration_error()
        mce = totals.max_gap()

        macro_parts = []
        if n_correct:
            macro_parts.append((n_correct - sum_c_right) / n_correct)
        if n_wrong:
            macro_parts.append(sum_c_wrong / n_wrong)

        hn, hk = int(fields.get(code + "hn", 0)), int(fields.get(code + "hk", 0))
        ln, lk = int(fields.get(code + "ln", 0)), int(fields.get(code + "lk", 0))
        th = th_score_from_parts(hk / hn if hn else 0.0, hn / n, lk / ln if ln else 0.0, ln / n)

        out = {
            "n": float(n),
            "accuracy": n_correct / n,
            "ece": ece,
            "adaptive_ce": _adaptive_ce_bins(n_f, k_f, qc_f / scale, n_bins),
            "mce": mce,
            "brier": int(fields.get("sb", 0)) / scale / n,
            "nll": int(fields.get("sl", 0)) / scale / n,
            "ice": ((n_correct - sum_c_right) + sum_c_wrong) / n,
            "th_score": th,
            "macroce": float(sum(macro_parts) / len(macro_parts)),
            "auroc": _auroc_bins(n_f, k_f),
            "aurc": _aurc_bins(n_f, k_f),
        }
        view = FieldTotals(
            count=n_f.astype(np.float64), correct=k_f.astype(np.float64), sum_confidence=qc_f / scale,
            sum_confidence_correct=sum_c_right, sum_brier=int(fields.get("sb", 0)) / scale,
            sum_nll=int(fields.get("sl", 0)) / scale,
        )
        for metric in registered_metrics():  # the registered metrics beyond the fast path above
            if metric.name not in out:
                if metric.from_fields is None:
                    out[metric.name] = math.nan
                    continue
                prefix = metric.name + "."
                own = {k[len(prefix):]: int(v) for k, v in fields.items() if k.startswith(prefix)}
                out[metric.name] = float(metric.from_fields(replace(view, fields=own)))
        reliability = []
        for i in range(n_bins):
            m = int(cnt[i])
            lo, hi = float(edges[i]), float(edges[i + 1])
            acc = float(kk[i] / m) if m else math.nan
            conf = float(qq[i] / scale / m) if m else math.nan
            reliability.append(ReliabilityBin(i, lo, hi, (lo + hi) / 2.0, m, acc, conf))
        out["reliability"] = reliability
        return out


# ---------------------------------------------------------------- registered metrics' own fields
def _metric_increments(out: dict[str, int], c: float, right: bool, sign: int) -> None:
    """Add each registered metric's own field deltas for one item (``name.field``) to ``out``."""
    for metric in registered_metrics():
        if metric.increments is None:
            continue
        for key, value in metric.increments(c, right).items():
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"metric {metric.name!r}: field {key!r} increment must be an int, got {value!r}")
            if value:
                name = f"{metric.name}.{key}"
                out[name] = out.get(name, 0) + sign * int(value)


def _is_metric_field(key: str) -> bool:
    """A metric's own field (``name.field``; no built-in field has a dot). One of a metric no
    longer registered (a plugin uninstalled) is kept in storage and ignored when read."""
    name, dot, field = key.partition(".")
    return bool(dot and name and field)


# ---------------------------------------------------------------- approximations over fine bins
def _adaptive_ce_bins(n_f: np.ndarray, k_f: np.ndarray, sc_f: np.ndarray, n_bins: int) -> float:
    """Equal-mass CE with each fine bin a tie group shared pro rata (c and z at its means)."""
    n = int(n_f.sum())
    bounds = equal_mass_bounds(n, n_bins)
    cum_n = np.r_[0, np.cumsum(n_f)]
    cum_z = np.r_[0.0, np.cumsum(k_f.astype(np.float64))]
    cum_c = np.r_[0.0, np.cumsum(sc_f)]
    # fine bin holding each boundary position (the group g with cum_n[g] <= pos < cum_n[g+1])
    g = np.clip(np.searchsorted(cum_n, bounds, side="right") - 1, 0, n_f.size - 1)
    size = np.maximum(n_f[g], 1)
    frac = (bounds - cum_n[g]) / size
    z_at = cum_z[g] + frac * (cum_z[g + 1] - cum_z[g])
    c_at = cum_c[g] + frac * (cum_c[g + 1] - cum_c[g])
    return float(np.abs(np.diff(z_at) - np.diff(c_at)).sum() / n)


def _auroc_bins(n_f: np.ndarray, k_f: np.ndarray) -> float:
    """Mann-Whitney AUROC with every fine bin a tie group (ties count 1/2)."""
    pos = k_f.astype(np.float64)
    neg = (n_f - k_f).astype(np.float64)
    n_pos, n_neg = pos.sum(), neg.sum()
    if n_pos == 0 or n_neg == 0:
        return math.nan
    neg_below = np.r_[0.0, np.cumsum(neg)[:-1]]
    return float(np.dot(pos, neg_below + neg / 2.0) / (n_pos * n_neg))


def _aurc_bins(n_f: np.ndarray, k_f: np.ndarray) -> float:
    """AURC, accepting fine bins from high to low, random order within a bin (in expectation).

    Within a group starting after s items with E errors before it, m items and e errors in
    it, the expected risk after j of its items is (E + j e / m) / (s + j); summed over j that
    is E * dH + (e / m) * (m - s * dH) with dH = H(s + m) - H(s) (harmonic numbers, via the
    digamma function), so the cost is O(bins), not O(n).
    """
    from scipy.special import digamma

    m = n_f[::-1].astype(np.float64)
    err = (n_f - k_f)[::-1].astype(np.float64)
    keep = m > 0
    m, err = m[keep], err[keep]
    s = np.r_[0.0, np.cumsum(m)[:-1]]
    e_before = np.r_[0.0, np.cumsum(err)[:-1]]
    d_h = digamma(s + m + 1.0) - digamma(s + 1.0)
    total = e_before * d_h + (err / m) * (m - s * d_h)
    return float(total.sum() / m.sum())
