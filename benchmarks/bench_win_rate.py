"""Win-rate intervals with a judge biased toward one system: coverage of the truth (issue 28, item 4).

Why (docs/design.md, 'Win rates'): a win rate from judge verdicts alone inherits the judges'
bias, so its interval is narrow around the wrong value; a small uniform random labelled slice
corrects it (prediction-powered inference, judgefuse/calibration/win_rate.py).

Each simulated comparison of systems X and Y: ``--verdicts`` items whose true outcome is X wins
(p 0.45), tie (0.1, counted half) or Y wins (0.45): true win rate 0.5. The judge says X with
probability 0.85 when X wins, 0.7 on a tie and 0.35 when Y wins (biased toward X; its win rate
is ~0.60). ``--labels`` items, a uniform random subset, carry the true outcome. Printed per
estimate: how often its 95% interval covered 0.5 (target: the nominal 0.95 within simulation
error, i.e. within two Monte Carlo standard errors ``2 sqrt(0.95 * 0.05 / comparisons)``) and its
mean width. The corrected interval is ``win_rates``'s PPI++ with the small-sample t correction
(judgefuse/calibration/win_rate.py); ``--plain`` prints ppi_py's normal interval instead.

``--service``: the service's estimator instead (``GET /v1/panels/{panel}/winrate``,
judgefuse/service/estimates/win_rates.py): the labels are not a uniform subset but the review
loop's strata. A verdict the judge got wrong goes to review with probability 0.6, a right one
0.2 (routing follows confidence, which follows correctness); half the review stratum is
labelled and 10% of the auto-accepted ones are audited. The stratified difference estimator
(judgefuse/calibration/model_assisted.py) must cover the window's own win rate; the
unstratified PPI on the same labels, treating them as a uniform subset, is printed beside it.

Run from the repository root (seconds)::

    PYTHONPATH=. python benchmarks/bench_win_rate.py --comparisons 2000
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np

from judgefuse.calibration.win_rate import ppi_mean, win_rates

TRUE_RATE = 0.5


def service_run(args: argparse.Namespace, rng: np.random.Generator, band: float) -> None:
    """``--service`` (module docstring)."""
    from judgefuse.calibration.model_assisted import AssistedStratum, difference_mean

    covered = {"stratified (service)": 0, "unstratified PPI": 0, "judge_only": 0}
    width = dict.fromkeys(covered, 0.0)
    labels = 0
    for _ in range(args.comparisons):
        truth = rng.choice([1.0, 0.5, 0.0], size=args.verdicts, p=[0.45, 0.1, 0.45])
        says_x = np.where(truth == 1.0, 0.85, np.where(truth == 0.5, 0.7, 0.35))
        judged = (rng.random(args.verdicts) < says_x).astype(float)
        wrong = np.abs(judged - truth) >= 0.5
        review = rng.random(args.verdicts) < np.where(wrong, 0.6, 0.2)
        labelled = np.where(review, rng.random(args.verdicts) < 0.5, rng.random(args.verdicts) < 0.1)
        labels += int(labelled.sum())
        target = float(truth.mean())
        strata = [AssistedStratum(name, int(m.sum()), float(judged[m].sum()), truth[m & labelled],
                                  judged[m & labelled], np.ones(int((m & labelled).sum())))
                  for name, m in (("review", review), ("auto", ~review))]
        index = np.flatnonzero(labelled)
        rates = win_rates(judged, index, truth[index])
        estimates = {"stratified (service)": difference_mean(strata), "unstratified PPI": rates.corrected,
                     "judge_only": rates.judge_only}
        for name, interval in estimates.items():
            covered[name] += interval.lower <= target <= interval.upper
            width[name] += (interval.upper - interval.lower) / args.comparisons
    print(f"service strata: review (judge wrong 0.6, right 0.2), half labelled; auto, 10% audited; "
          f"mean labels {labels / args.comparisons:.0f}; truth: each window's own win rate")
    for name in covered:
        print(f"{name:<22} coverage {covered[name] / args.comparisons:.3f} (target 0.95 +- {band:.3f})  "
              f"mean width {width[name]:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--comparisons", type=int, default=1000)
    parser.add_argument("--verdicts", type=int, default=1000)
    parser.add_argument("--labels", type=int, nargs="*", default=[50, 100, 200])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plain", action="store_true", help="the corrected estimate without the t correction")
    parser.add_argument("--service", action="store_true", help="the service's stratified estimator (docstring)")
    args = parser.parse_args()
    band = 2 * (0.95 * 0.05 / args.comparisons) ** 0.5
    if args.service:
        service_run(args, np.random.default_rng(args.seed), band)
        return
    rng = np.random.default_rng(args.seed)
    print(f"{args.comparisons} simulated comparisons, {args.verdicts} verdicts each, true win rate {TRUE_RATE}, "
          "judge biased toward X (says X: 0.85 | X wins, 0.7 | tie, 0.35 | Y wins)")
    target = f"coverage (target 0.95 +- {band:.3f})"
    print(f"{'labels':>6}  {'estimate':<14} {target:>30} {'mean width':>11} {'mean estimate':>14}")
    for n_labels in args.labels:
        covered = {"corrected": 0, "labels_only": 0, "judge_only": 0}
        width = dict.fromkeys(covered, 0.0)
        mean = dict.fromkeys(covered, 0.0)
        for _ in range(args.comparisons):
            truth = rng.choice([1.0, 0.5, 0.0], size=args.verdicts, p=[0.45, 0.1, 0.45])
            says_x = np.where(truth == 1.0, 0.85, np.where(truth == 0.5, 0.7, 0.35))
            judged = (rng.random(args.verdicts) < says_x).astype(float)
            labelled = rng.choice(args.verdicts, size=n_labels, replace=False)
            rates = win_rates(judged, labelled, truth[labelled])
            if args.plain:
                rest = np.setdiff1d(np.arange(args.verdicts), labelled)
                rates = replace(rates, corrected=ppi_mean(truth[labelled], judged[labelled], judged[rest]))
            for name in covered:
                interval = getattr(rates, name)
                covered[name] += interval.lower <= TRUE_RATE <= interval.upper
                width[name] += (interval.upper - interval.lower) / args.comparisons
                mean[name] += interval.estimate / args.comparisons
        for name in covered:
            print(f"{n_labels:>6}  {name:<14} {covered[name] / args.comparisons:>30.3f} {width[name]:>11.3f} "
                  f"{mean[name]:>14.3f}")
        print(f"{'':>6}  corrected width vs labels-only: {100 * (1 - width['corrected'] / width['labels_only']):.0f}% narrower")


if __name__ == "__main__":
    main()
