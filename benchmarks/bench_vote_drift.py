"""False alarms of the per-judge vote-drift detector (``VoteDrift``: two ``MeanShiftDetector``
at alpha / 2 each), and whether skipping the scans that cannot alarm changes any alarm.

Drift-free streams of votes: each stream draws its own share of "A" (uniform in [0.3, 0.7]) and
its own confidence distribution (a Beta with mean uniform in [0.6, 0.9]), then ``--votes``
votes from it, read after every vote. Printed: the share of streams that ever alarmed, with its
Clopper-Pearson 95% interval, next to alpha; and the same streams through a copy of the
detector that scans its windows after every vote (no skipping): the streams whose alarm (the
vote it came at, its direction) differs between the two must be 0. Then streams whose share of
"A" moves by ``--shift`` at a random vote after the reference: the share detected and the
median delay, for both (equal by construction, shown so a regression shows).

    python benchmarks/bench_vote_drift.py --streams 400 --votes 3000 --seed 7
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from scipy.stats import beta as beta_dist

from judgefuse.calibration.drift import MeanShiftDetector, VoteDrift


class _ScanEveryVote(MeanShiftDetector):
    """The detector without its skip: the windows are scanned after every observation."""

    def update(self, x: float) -> None:
        self._quiet = 0
        super().update(x)


def _scan_every(drift: VoteDrift) -> VoteDrift:
    """``drift`` with both detectors replaced by scan-every-vote copies (same settings)."""
    for name in ("share_a", "confidence"):
        old = getattr(drift, name)
        setattr(drift, name, _ScanEveryVote(old.reference_size, alpha=old.alpha))
    return drift


def _stream(rng: np.random.Generator, votes: int, shift_at: int | None,
            shift: float) -> tuple[np.ndarray, np.ndarray]:
    share = rng.uniform(0.3, 0.7)
    mean = rng.uniform(0.6, 0.9)
    shares = np.full(votes, share)
    if shift_at is not None:
        shares[shift_at:] = min(1.0, share + shift)
    a = rng.uniform(size=votes) < shares
    confidence = rng.beta(mean * 20, (1 - mean) * 20, size=votes)
    return a, confidence


def _alarm(drift: VoteDrift) -> tuple[int | None, str | None]:
    for det in (drift.share_a, drift.confidence):
        if det.alarmed_at is not None:
            return det.alarmed_at, f"{'share_a' if det is drift.share_a else 'confidence'} {det.direction}"
    return None, None


def _run(a: np.ndarray, confidence: np.ndarray, reference: int, alpha: float,
         scan_every: bool) -> tuple[int | None, str | None]:
    drift = VoteDrift(reference, alpha=alpha)
    if scan_every:
        _scan_every(drift)
    for choice, conf in zip(a.tolist(), confidence.tolist(), strict=True):
        drift.update("A" if choice else "B", conf)
    return _alarm(drift)


def cp_interval(k: int, n: int) -> tuple[float, float]:
    low = 0.0 if k == 0 else float(beta_dist.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(beta_dist.ppf(0.975, k + 1, n - k))
    return low, high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=400)
    parser.add_argument("--votes", type=int, default=3000)
    parser.add_argument("--reference", type=int, default=500, help="reference votes (the service's default)")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--shift", type=float, default=0.15)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    alarms = differ = 0
    for _ in range(args.streams):
        a, conf = _stream(rng, args.votes, None, 0.0)
        fast = _run(a, conf, args.reference, args.alpha, scan_every=False)
        slow = _run(a, conf, args.reference, args.alpha, scan_every=True)
        alarms += fast[0] is not None
        differ += fast != slow
    low, high = cp_interval(alarms, args.streams)
    print(f"# command: python benchmarks/bench_vote_drift.py --streams {args.streams} --votes {args.votes} "
          f"--seed {args.seed} (reference {args.reference} votes, alpha {args.alpha})")
    print(f"drift-free: {args.streams} streams x {args.votes} votes: false alarms {alarms / args.streams:.4f} "
          f"[{low:.4f}, {high:.4f}] (alpha {args.alpha}); streams whose alarm differs from scanning "
          f"every vote: {differ}")
    detected, delays, differ = 0, [], 0
    for _ in range(args.streams):
        shift_at = int(rng.integers(args.reference + 200, args.votes - 1000))
        a, conf = _stream(rng, args.votes, shift_at, args.shift)
        fast = _run(a, conf, args.reference, args.alpha, scan_every=False)
        slow = _run(a, conf, args.reference, args.alpha, scan_every=True)
        differ += fast != slow
        if fast[0] is not None and fast[0] + args.reference > shift_at:
            detected += 1
            delays.append(fast[0] + args.reference - shift_at)
    print(f"share of A up by {args.shift} at a random vote: detected {detected / args.streams:.3f}, "
          f"median delay {statistics.median(delays) if delays else float('nan'):.0f} votes; "
          f"streams whose alarm differs from scanning every vote: {differ}")
    print(f"# {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
