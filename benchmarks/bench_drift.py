"""Benchmark: anytime-valid precision monitor vs a rolling-window z-test, on simulated audit streams.

Each stream is 20,000 auto-accepted verdicts; each is audited (labelled) with probability r and
the monitor is read after every audit label. Target precision 0.85, alpha 0.05.

* Drift-free streams (precision 0.90 or 0.87 throughout, and the worst case: exactly the
  target 0.85):
  the share of streams with ANY alarm, with its Clopper-Pearson 95% interval, beside alpha.
* Drift streams: precision drops 0.90 -> 0.75 at a verdict drawn uniformly from [2,000, 12,000]:
  median and p90 detection delay in audit labels and in verdicts (over detected drops), the share
  detected by the end, and the share that alarmed before the change (false alarms).
* Side by side: the restarted monitor (``PrecisionMonitor``, vectorised), a single confidence
  sequence since tuning (the same mixture, no restarts), and a naive rolling z-test (last 200
  labels, one-sided z at 0.05, read after every label once the window is full). The "path"
  column is ``expected_detection_delay`` at the median change label (the boundary followed
  along the expected label path), beside the simulated median.

Run: ``PYTHONPATH=. python benchmarks/bench_drift.py [streams]`` (default 500; ~1-3 minutes on
one core). Output of that command on 2026-11-23 (2 shared cores):

RESULTS_PLACEHOLDER
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np
from scipy.stats import beta, norm

from judgefuse.calibration.label_budget import expected_detection_delay
from judgefuse.calibration.mixture_bound import log_evalue_below
from judgefuse.calibration.sequential import precision_alarm_times

VERDICTS = 20_000
TARGET = 0.85
ALPHA = 0.05
BEFORE, AFTER = 0.90, 0.75
CHANGE_RANGE = (2_000, 12_000)
RATES = (0.02, 0.05, 0.10)
Z_WINDOW = 200


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    tail = (1 - level) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(tail, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - tail, k + 1, n - k))
    return lo, hi


def simulate(streams: int, rate: float, change: np.ndarray | None, p_flat: float, seed: int):
    """Padded label matrix, label counts, each label's verdict index, labels before the change."""
    rng = np.random.default_rng(seed)
    rows, positions = [], []
    for s in range(streams):
        audited = np.flatnonzero(rng.uniform(size=VERDICTS) < rate)
        p = np.full(audited.size, p_flat) if change is None else np.where(
            audited < change[s], BEFORE, AFTER)
        rows.append(rng.uniform(size=audited.size) < p)
        positions.append(audited)
    width = max(r.size for r in rows)
    labels = np.zeros((streams, width), dtype=bool)
    where = np.full((streams, width), VERDICTS, dtype=np.int64)
    for s, (r, pos) in enumerate(zip(rows, positions, strict=True)):
        labels[s, : r.size], where[s, : pos.size] = r, pos
    counts = np.array([r.size for r in rows])
    before = (None if change is None else
              np.array([np.searchsorted(pos, c) for pos, c in zip(positions, change, strict=True)]))
    return labels, counts, where, before


def single_sequence_alarms(labels: np.ndarray) -> np.ndarray:
    """One beta-mixture sequence since tuning (no restarts): the slow baseline."""
    cum = np.cumsum(labels, axis=1)
    t = np.arange(1, labels.shape[1] + 1)
    hit = log_evalue_below(cum, t[None, :], TARGET) >= math.log(1 / ALPHA)
    return np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, 0)


def ztest_alarms(labels: np.ndarray) -> np.ndarray:
    """Rolling window of the last Z_WINDOW labels, one-sided z-test at 0.05, after every label."""
    cum = np.concatenate([np.zeros((labels.shape[0], 1)), np.cumsum(labels, axis=1)], axis=1)
    t = np.arange(Z_WINDOW, labels.shape[1] + 1)
    mean = (cum[:, t] - cum[:, t - Z_WINDOW]) / Z_WINDOW
    z = (mean - TARGET) / math.sqrt(TARGET * (1 - TARGET) / Z_WINDOW)
    hit = z <= norm.ppf(0.05)
    return np.where(hit.any(axis=1), hit.argmax(axis=1) + Z_WINDOW, 0)


def methods(labels: np.ndarray) -> dict[str, np.ndarray]:
    return {"restarted CS": precision_alarm_times(labels, TARGET, alpha=ALPHA),
            "single CS": single_sequence_alarms(labels),
            "z-test w200": ztest_alarms(labels)}


def false_alarm_rows(streams: int, rate: float, p_flat: float, seed: int) -> list[str]:
    labels, counts, _, _ = simulate(streams, rate, None, p_flat, seed)
    out = []
    for name, alarms in methods(labels).items():
        k = int(np.sum((alarms > 0) & (alarms <= counts)))
        lo, hi = clopper_pearson(k, streams)
        out.append(f"  p={p_flat:.2f} r={rate:.2f} {name:<13} false alarms {k / streams:.3f} "
                   f"[{lo:.3f}, {hi:.3f}]  (alpha {ALPHA})")
    return out


def delay_rows(streams: int, rate: float, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    change = rng.integers(CHANGE_RANGE[0], CHANGE_RANGE[1] + 1, streams)
    labels, counts, where, before = simulate(streams, rate, change, 0.0, seed + 1)
    path = expected_detection_delay(rate, 1.0, target=TARGET, precision_before=BEFORE,
                                    drop=BEFORE - AFTER, alpha=ALPHA, method="path",
                                    change_after_labels=int(np.median(before)))
    out = []
    for name, alarms in methods(labels).items():
        fired = (alarms > 0) & (alarms <= counts)
        early = fired & (alarms <= before)
        hit = fired & ~early
        d_lab = (alarms - before)[hit]
        d_ver = where[np.flatnonzero(hit), alarms[hit] - 1] - change[hit]
        med = lambda v, q=50: float(np.percentile(v, q)) if v.size else math.nan  # noqa: E731
        out.append(
            f"  r={rate:.2f} {name:<13} delay labels median {med(d_lab):6.0f} p90 {med(d_lab, 90):6.0f}"
            f" | verdicts median {med(d_ver):6.0f} p90 {med(d_ver, 90):6.0f}"
            f" | detected {hit.mean():.3f} | alarmed before change {early.mean():.3f}"
            + (f" | path {path.labels:.0f} labels" if name == "restarted CS" else ""))
    return out


def main(streams: int = 500) -> None:
    t0 = time.perf_counter()
    print(f"{streams} streams x {VERDICTS:,} auto-accepted verdicts, target {TARGET}, "
          f"alpha {ALPHA}, read after every audit label")
    print("Drift-free streams: share with any alarm [Clopper-Pearson 95%]")
    for i, rate in enumerate(RATES):
        for p_flat in (BEFORE, 0.87, TARGET):
            for row in false_alarm_rows(streams, rate, p_flat, seed=100 + 10 * i + int(p_flat * 100)):
                print(row)
    print(f"Drop {BEFORE} -> {AFTER} at a verdict uniform in {CHANGE_RANGE}:")
    for i, rate in enumerate(RATES):
        for row in delay_rows(streams, rate, seed=200 + i):
            print(row)
    print(f"elapsed {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
