"""False-alarm rate of the precision monitor through the service's fold, rebuild and reconcile path.

Why (docs/monitoring.md, "What it guarantees"): the monitor's blob is a cache of folding the
stored audit labels. Labels reach it in arrival order (their own compare-and-set writes, which
race between replicas), and a rebuild (after a lost write, a crash, a start-up reconcile) folds
them again from scratch in decided-time order. Each single order is a fixed permutation of the
labels, chosen without looking at their values, so each alone keeps ``P(alarm) <= alpha``; but
a stream that is rebuilt is checked along more than one order. This script measures what that
costs: drift-free streams of audit labels resampled from a real judge's auto-accepted items,
driven through the functions the service runs (``feed_label`` per arriving label, ``refold``
of ``in_fold_order``-ed stored labels per rebuild, the ``counted_labels`` check of a reconcile:
judgefuse/service/monitoring/monitor_state.py), with out-of-order arrival, lost writes, background
rebuilds and replica restarts injected. It prints the share of streams that alarmed next to
``monitor_alpha``, beside the same labels through one order only (arrival order and decided
order, :func:`judgefuse.calibration.sequential.precision_alarm_times`), and the detection rate
and delay under a real drop.

Data: trust_or_escalate's gpt-4-turbo judge (500 human-labelled pairs with real probabilities,
/work/shared/data/README.md). Auto-accepted = confidence >= 0.9: 361 items, precision 0.873.
Null streams resample those items (with replacement). ``boundary``: target = that precision
exactly (the hardest drift-free case); ``meets``: target 0.85. Drift: at a random label in
[200, 600] the stream switches to all 500 items (precision 0.784: the judge's confidence stops
separating right from wrong), target 0.85.

Not run here: the per-judge Brier drift (``judged`` is empty: it never decides the precision
alarm) and the dashboard's bound series (``series_points=0``: ~10 ms a point, never read by the
alarm). Each rebuild is instantaneous and sees every label decided before it (a label is stored
before the monitor hears of it).

    .venv/bin/python benchmarks/bench_monitor_false_alarm.py --streams 500 --jobs 2 \
        > benchmarks/results/bench_monitor_false_alarm.txt
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import beta as beta_dist

from judgefuse.calibration.sequential import precision_alarm_times
from judgefuse.service.monitoring.monitor_state import (
    FoldedLabel,
    MonitorState,
    counted_labels,
    feed_label,
    in_fold_order,
    refold,
    since_clear,
)
from judgefuse.service.settings import Settings

DATA = Path("/work/shared/data/trust_or_escalate/gpt-4-turbo.calibration.jsonl")
ACCEPT_AT = 0.9
JOBS = 1


def pools(path: Path = DATA) -> tuple[np.ndarray, np.ndarray]:
    """(correct of the auto-accepted items, correct of all items) of the judge."""
    confidence, correct = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        p1, p2 = row["probs"]
        p_first = p1 / (p1 + p2) if p1 + p2 > 0 else 0.5
        choice = 1 if p_first >= 0.5 else 2
        confidence.append(max(p_first, 1.0 - p_first))
        correct.append(choice == int(row["preferences"]["human"]))
    conf, right = np.asarray(confidence), np.asarray(correct, dtype=bool)
    return right[conf >= ACCEPT_AT], right


@dataclass(frozen=True)
class Faults:
    """What the service path suffers, in units of one decided label."""

    arrival_delay: float = 3.0
    """Mean (exponential) time from a label's commit to its own blob write: out-of-order arrival."""
    lost: float = 0.01
    """Share of labels whose own write never lands (gave up, storage error, crash)."""
    rebuild_delay: float = 20.0
    """Mean time from a lost write to the background rebuild that recounts it."""
    restart_every: float = 250.0
    """Mean time between replica restarts (each runs the start-up reconcile)."""


def service_path(correct: np.ndarray, target: float, alpha: float, faults: Faults,
                 rng: np.random.Generator) -> tuple[int, int, int]:
    """One stream through the service's fold: (decided label index at which the blob first
    alarmed, or -1; rebuilds that rewrote the blob; labels whose arrival order differs from
    their decided order). Label ``i`` is decided (and stored) at time ``i``."""
    n = correct.size
    labels = [FoldedLabel(f"v{i}", bool(correct[i]), float(i)) for i in range(n)]
    events: list[tuple[float, int, int]] = []  # (time, kind 0 feed / 1 rebuild / 2 reconcile, label)
    arrive = np.arange(n) + rng.exponential(faults.arrival_delay, n)
    lost = rng.random(n) < faults.lost
    for i in range(n):
        if lost[i]:
            events.append((i + rng.exponential(faults.rebuild_delay), 1, i))
        else:
            events.append((float(arrive[i]), 0, i))
    at = rng.exponential(faults.restart_every)
    while at < n:
        events.append((at, 2, -1))
        at += rng.exponential(faults.restart_every)
    heapq.heapify(events)
    body = MonitorState.new(target, alpha, 1)
    rebuilds = 0
    fed = [e[2] for e in sorted(events) if e[1] == 0]
    out_of_order = int(np.sum(np.diff(fed) < 0)) if len(fed) > 1 else 0
    while events:
        when, kind, i = heapq.heappop(events)
        if kind == 0:
            feed_label(body, labels[i], series_points=0)
        else:
            stored = in_fold_order(labels[: min(n, math.floor(when) + 1)])
            counted = since_clear(body, stored)
            if kind == 2 and counted_labels(body) == len(counted):
                continue  # a reconcile leaves a blob that counts every stored label alone
            body, _ = refold(body, counted, target=target, version=1, alpha=alpha, series_points=0)
            rebuilds += 1
        if body.alarm is not None:
            return min(n - 1, math.floor(when)), rebuilds, out_of_order
    return -1, rebuilds, out_of_order


def _stream(job: tuple[np.ndarray, float, float, Faults, int, int]) -> tuple[int, int, int]:
    correct, target, alpha, faults, seed, s = job
    return service_path(correct, target, alpha, faults, np.random.default_rng([seed, s]))


def run_streams(data: np.ndarray, target: float, alpha: float, faults: Faults,
                seed: int) -> list[tuple[int, int, int]]:
    """:func:`service_path` of every row of ``data`` (stream ``s`` draws its faults from seed
    ``[seed, s]``), over ``JOBS`` processes."""
    jobs = [(row > 0.5, target, alpha, faults, seed, s) for s, row in enumerate(data)]
    if JOBS == 1:
        return [_stream(job) for job in jobs]
    with ProcessPoolExecutor(JOBS) as pool:
        return list(pool.map(_stream, jobs, chunksize=8))


def one_order(streams: np.ndarray, order: np.ndarray, target: float, alpha: float) -> np.ndarray:
    """Alarm times (label count, 0 = none) of the plain monitor fed each stream in ``order``."""
    return precision_alarm_times(np.take_along_axis(streams, order, axis=1), target, alpha=alpha)


def cp(k: int, n: int) -> tuple[float, float]:
    """Clopper-Pearson 95% interval of a rate k / n."""
    lo = 0.0 if k == 0 else float(beta_dist.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(beta_dist.ppf(0.975, k + 1, n - k))
    return lo, hi


def null_rows(name: str, pool: np.ndarray, target: float, alpha: float, faults: Faults,
              streams: int, labels: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    data = rng.choice(pool, size=(streams, labels)).astype(float)
    start = time.perf_counter()
    results = run_streams(data, target, alpha, faults, seed)
    seconds = time.perf_counter() - start
    print(f"# {name}: {streams} streams in {seconds:.0f} s", file=sys.stderr, flush=True)
    alarmed = np.asarray([at >= 0 for at, _, _ in results])
    alarms = int(alarmed.sum())
    rebuilds = [r for _, r, _ in results]
    swaps = [w for _, _, w in results]
    # the same arrival times again (same seeds: the first draw of each stream's generator)
    arrival_orders = [np.argsort(np.arange(labels) + np.random.default_rng([seed, s]).exponential(
        faults.arrival_delay, labels), kind="stable") for s in range(streams)]
    by_arrival = one_order(data, np.asarray(arrival_orders), target, alpha) > 0
    by_decided = precision_alarm_times(data, target, alpha=alpha) > 0
    lo, hi = cp(alarms, streams)
    only_service = int(np.sum(alarmed & ~by_decided))
    print(f"{name:<9} {target:6.4f} {pool.mean():5.3f} {streams:7d} {labels:6d} "
          f"{alarms / streams:8.4f} [{lo:.4f}, {hi:.4f}] {alpha:5.2f} "
          f"{by_arrival.mean():8.4f} {by_decided.mean():8.4f} {only_service:5d} "
          f"{np.mean(rebuilds):8.1f} {np.mean(swaps):7.1f} {seconds:7.0f}")


def drift_rows(before: np.ndarray, after: np.ndarray, target: float, alpha: float, faults: Faults,
               streams: int, labels: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    change = rng.integers(200, 601, size=streams)
    data = np.where(np.arange(labels)[None, :] < change[:, None],
                    rng.choice(before, size=(streams, labels)),
                    rng.choice(after, size=(streams, labels))).astype(float)
    delays, early = [], 0
    for s, (at, _, _) in enumerate(run_streams(data, target, alpha, faults, seed)):
        if 0 <= at < change[s]:
            early += 1
        elif at >= change[s]:
            delays.append(at - change[s] + 1)
    plain = precision_alarm_times(data, target, alpha=alpha)
    plain_delays = [int(t) - int(c) for t, c in zip(plain, change, strict=True) if t > c]
    for name, d in (("service", delays), ("decided", plain_delays)):
        arr = np.asarray(d)
        print(f"{name:<9} {before.mean():5.3f} -> {after.mean():5.3f} {target:5.2f} {streams:7d} {labels:6d} "
              f"{arr.size / streams:8.3f} {np.median(arr) if arr.size else math.nan:8.0f} "
              f"{np.percentile(arr, 90) if arr.size else math.nan:8.0f}"
              + (f" {early:6d}" if name == "service" else f" {int(np.sum((plain > 0) & (plain <= change))):6d}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--meets-streams", type=int, default=300,
                        help="drift-free streams with the precision above the target")
    parser.add_argument("--labels", type=int, default=1000, help="audit labels per drift-free stream")
    parser.add_argument("--drift-streams", type=int, default=200)
    parser.add_argument("--drift-labels", type=int, default=1500)
    parser.add_argument("--stress-streams", type=int, default=200,
                        help="drift-free streams under heavy faults (0: skip)")
    parser.add_argument("--seed", type=int, default=2811)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    args = parser.parse_args()
    global JOBS
    JOBS = max(1, args.jobs)
    alpha = Settings().monitoring.monitor_alpha
    accepted, everything = pools()
    usual = Faults()
    stress = Faults(arrival_delay=30.0, lost=0.05, rebuild_delay=10.0, restart_every=50.0)
    print(f"# precision monitor false alarms through feed_label / refold / reconcile; "
          f"monitor_alpha = {alpha} (settings default)")
    print(f"# pool: {DATA.name}, auto-accepted at confidence >= {ACCEPT_AT}: {accepted.size} items, "
          f"precision {accepted.mean():.4f}; all items {everything.size}, precision {everything.mean():.4f}")
    print(f"# faults (units of one decided label): usual {usual}; stress {stress}")
    print("# rate = share of drift-free streams whose blob ever alarmed (CP 95% interval); arrival /"
          " decided = the plain monitor fed the same labels in one order; only = streams the"
          " service path alarmed on and the decided-order monitor did not")
    print(f"{'case':<9} {'target':>6} {'prec':>5} {'streams':>7} {'labels':>6} {'rate':>8} "
          f"{'CP 95%':>16} {'alpha':>5} {'arrival':>8} {'decided':>8} {'only':>5} {'rebuilds':>8} "
          f"{'swaps':>7} {'seconds':>7}")
    target_boundary = float(accepted.mean())
    null_rows("boundary", accepted, target_boundary, alpha, usual, args.streams, args.labels, args.seed)
    null_rows("meets", accepted, 0.85, alpha, usual, args.meets_streams, args.labels, args.seed + 1)
    if args.stress_streams:
        null_rows("stress", accepted, target_boundary, alpha, stress, args.stress_streams, args.labels,
                  args.seed + 2)
    print()
    print("# drift: precision drops at a random label in [200, 600]; detected = alarmed after the"
          " drop within the stream; delay = labels decided after the drop (median, p90); early ="
          " alarms before the drop")
    print(f"{'path':<9} {'precision':>14} {'target':>5} {'streams':>7} {'labels':>6} {'detected':>8} "
          f"{'median':>8} {'p90':>8} {'early':>6}")
    drift_rows(accepted, everything, 0.85, alpha, usual, args.drift_streams, args.drift_labels,
               args.seed + 3)


if __name__ == "__main__":
    main()
