"""False-promotion rate of the refit's Brier rule when the candidate is no better than what serves.

Why (docs/design.md, 'Learning keeps routing'): a refit candidate is promoted only when the
one-sided 95% paired-bootstrap upper bound of its per-item Brier gain is below 0
(judgefuse/service/learning/promotion.py over calibration/paired_difference.py). If the
candidate is no better, that should happen in at most 5% of label sets. This script draws label
sets of 50, 100, 200 and 400 items with replacement from a real pool (the population), scores
both models on them, and decides with the service's own functions (``brier_evidence`` then
``brier_problem``). It prints the share promoted next to the 5% target, and the share promoted
when the candidate really is better.

Data: trust_or_escalate (500 human-labelled pairs judged by gpt-4-turbo, gpt-3.5-turbo and
mistral-7b-instruct with real probabilities, /work/shared/data/README.md). A model's
``p_first = p(o1) / (p(o1) + p(o2))``; its verdict is the likelier output, its confidence
``max(p, 1 - p)``, ``correct`` whether the human agreed (so the Brier loss is
``(p_first - [human chose o1])^2``).

Cases (the pool is the population: "better" means a lower Brier over the 500 items):
- ``equal``: candidate = gpt-4-turbo's probabilities at a temperature chosen so that its pool
  Brier equals the untempered judge's (incumbent): exactly no better, different on every item.
  The boundary of the null: the rule's rate there is its real size.
- ``sharp``: candidate = the stack of the three judges (fit on all items) sharpened
  (temperature < 1), incumbent = the same stack softened (temperature 2), the sharpening chosen
  so both have the same pool Brier: exactly no better, with skewed per-item differences
  (a little better on most items, much worse on the few it gets wrong; skewness 1.9).
- ``refit``: two fits of one logistic stack of the three judges, each on its own bootstrap
  resample of the pool (candidate and incumbent swap roles at random). Over the pool one of
  the two is a little better: the replicates whose candidate is no better give the false rate,
  the others a (small-gap) power row.
- ``noise``: candidate = the incumbent stack with N(0, 0.3) noise on its logit (worse).
- ``better``: candidate = the stack (fit on a bootstrap resample), incumbent = gpt-3.5-turbo
  alone; the true-promotion rate (power).

    .venv/bin/python benchmarks/bench_promotion_false_rate.py --sets 1000 \
        > benchmarks/results/bench_promotion_false_rate.txt
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy.stats import beta as beta_dist

from judgefuse.service.learning.promotion import ALPHA, brier_evidence, brier_problem

DATA = Path("/work/shared/data/trust_or_escalate")
JUDGES = ("gpt-4-turbo", "gpt-3.5-turbo", "mistral-7b-instruct")
SIZES = (50, 100, 200, 400)
EPS = 1e-4


def load() -> tuple[np.ndarray, np.ndarray]:
    """(p_first per judge, shape (judges, items); 1.0 where the human chose output 1)."""
    probs, human = [], None
    for judge in JUDGES:
        rows = [json.loads(line) for line in (DATA / f"{judge}.calibration.jsonl").read_text(
            encoding="utf-8").splitlines()]
        p = np.asarray([r["probs"][0] / (r["probs"][0] + r["probs"][1])
                        if r["probs"][0] + r["probs"][1] > 0 else 0.5 for r in rows])
        probs.append(p)
        y = np.asarray([r["preferences"]["human"] == 1 for r in rows], dtype=float)
        assert human is None or np.array_equal(human, y), "the three files hold the same pairs"
        human = y
    assert human is not None
    return np.asarray(probs), human


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, EPS, 1 - EPS)
    return np.log(p / (1 - p))


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def fit_stack(x: np.ndarray, y: np.ndarray, ridge: float = 1e-2) -> np.ndarray:
    """Logistic regression (intercept + features) by Newton's method, a small ridge."""
    design = np.column_stack([np.ones(len(y)), x])
    w = np.zeros(design.shape[1])
    for _ in range(50):
        p = sigmoid(design @ w)
        grad = design.T @ (p - y) + ridge * w
        hess = (design * (p * (1 - p))[:, None]).T @ design + ridge * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def stack_predict(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return sigmoid(np.column_stack([np.ones(len(x)), x]) @ w)


def scored(p_first: np.ndarray, y: np.ndarray) -> tuple[list[float], list[bool]]:
    """A model's (confidence, correct) on items, as the refit scores a verdict."""
    choice_first = p_first >= 0.5
    confidence = np.where(choice_first, p_first, 1 - p_first)
    return confidence.tolist(), (choice_first == (y > 0.5)).tolist()


def brier(p_first: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((p_first - y) ** 2))


def tempered(p: np.ndarray, temperature: float) -> np.ndarray:
    return sigmoid(logit(p) / temperature)


def sharpening_to(p: np.ndarray, y: np.ndarray, goal: float) -> float:
    """The temperature < 1 at which the sharpened ``p`` has pool Brier ``goal`` (above its own)."""
    lo, hi = 0.05, 1.0
    if not brier(tempered(p, lo), y) > goal > brier(p, y):
        raise SystemExit("no sharpening of the stack reaches the softened stack's Brier")
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if brier(tempered(p, mid), y) < goal else (mid, hi)
    return (lo + hi) / 2


def matching_temperature(p: np.ndarray, y: np.ndarray) -> float:
    """A temperature > 1 at which the tempered judge's pool Brier equals the judge's own (the
    judge is overconfident, so the Brier first falls then rises again with the temperature)."""
    goal = brier(p, y)
    grid = np.linspace(1.0, 30.0, 2901)
    values = np.asarray([brier(tempered(p, t), y) for t in grid])
    best = int(np.argmin(values))
    if not values[best] < goal:
        raise SystemExit("no tempering of the judge changes its Brier: pick another case")
    lo, hi = grid[best], grid[-1]
    if brier(tempered(p, hi), y) < goal:
        raise SystemExit("tempering never comes back to the judge's Brier within 30")
    for _ in range(80):  # bisection on the rising side
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if brier(tempered(p, mid), y) < goal else (lo, mid)
    return (lo + hi) / 2


Case = Callable[[np.random.Generator], tuple[np.ndarray, np.ndarray]]
"""Draws (candidate p_first, incumbent p_first) over the pool for one replicate."""


def cp(k: int, n: int) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(beta_dist.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(beta_dist.ppf(0.975, k + 1, n - k))
    return lo, hi


def promoted(candidate: np.ndarray, incumbent: np.ndarray, y: np.ndarray) -> bool:
    """The service's Brier rule on one label set (no target: the Brier rule alone decides)."""
    metrics = {"stacked_brier": brier(candidate, y), "baseline_brier": brier(incumbent, y),
               **brier_evidence(scored(candidate, y), scored(incumbent, y))}
    return brier_problem(metrics, voting="incumbent") is None


def run(name: str, case: Case, y: np.ndarray, sets: int, seed: int) -> None:
    """One case: a row for the replicates whose candidate is no better over the pool (the false
    promotions, target <= ALPHA) and one for those whose candidate is better (power)."""
    rng = np.random.default_rng(seed)
    groups: dict[str, list[float]] = {"no better": [], "better": []}
    counts = {group: dict.fromkeys(SIZES, 0) for group in groups}
    start = time.perf_counter()
    for _ in range(sets):
        candidate, incumbent = case(rng)
        gap = brier(candidate, y) - brier(incumbent, y)
        group = "better" if gap < -1e-12 else "no better"
        groups[group].append(gap)
        for n in SIZES:
            idx = rng.integers(0, y.size, size=n)
            counts[group][n] += promoted(candidate[idx], incumbent[idx], y[idx])
    seconds = time.perf_counter() - start
    for group, gaps in groups.items():
        if not gaps:
            continue
        k = len(gaps)
        cells = []
        for n in SIZES:
            lo, hi = cp(counts[group][n], k)
            cells.append(f"{counts[group][n] / k:6.3f} [{lo:.3f},{hi:.3f}]")
        target = f"<={ALPHA:.2f}" if group == "no better" else "power"
        print(f"{name:<7} {group:<9} {np.mean(gaps):+9.5f} {k:5d} {target:>6}  " + "  ".join(cells)
              + f" {seconds:6.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", type=int, default=1000, help="label sets per case and size")
    parser.add_argument("--seed", type=int, default=2812)
    args = parser.parse_args()
    probs, y = load()
    x = logit(probs).T
    gpt4, gpt35 = probs[0], probs[1]
    temperature = matching_temperature(gpt4, y)
    warm = tempered(gpt4, temperature)
    full = stack_predict(fit_stack(x, y), x)
    soft = tempered(full, 2.0)
    sharpening = sharpening_to(full, y, brier(soft, y))
    sharp_stack = tempered(full, sharpening)

    def bootstrap_stack(rng: np.random.Generator) -> np.ndarray:
        idx = rng.integers(0, y.size, size=y.size)
        return stack_predict(fit_stack(x[idx], y[idx]), x)

    def equal(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return warm, gpt4

    def sharp(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return sharp_stack, soft

    def refit(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        one, two = bootstrap_stack(rng), bootstrap_stack(rng)
        return (one, two) if rng.random() < 0.5 else (two, one)

    def noise(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return sigmoid(logit(full) + rng.normal(0.0, 0.3, size=y.size)), full

    def better(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return bootstrap_stack(rng), gpt35

    print(f"# promotion rule: promote iff the one-sided {100 * (1 - ALPHA):.0f}% paired-bootstrap "
          "upper bound of the Brier gain (candidate - incumbent) < 0; brier_evidence + brier_problem")
    print(f"# pool: trust_or_escalate, {y.size} human-labelled pairs; pool Brier: gpt-4-turbo "
          f"{brier(gpt4, y):.4f}, tempered at T={temperature:.3f} {brier(warm, y):.4f}, gpt-3.5-turbo "
          f"{brier(gpt35, y):.4f}, mistral-7b {brier(probs[2], y):.4f}, stack of three (all items) "
          f"{brier(full, y):.4f}, at T=2 {brier(soft, y):.4f}, at T={sharpening:.3f} "
          f"{brier(sharp_stack, y):.4f}")
    print("# rate = share of label sets (drawn with replacement from the pool) promoted, CP 95% "
          "interval; gap = mean pool Brier of candidate minus incumbent (> 0: candidate worse); "
          "candidate = whether its pool Brier is lower than the incumbent's")
    head = "  ".join(f"{f'n={n}':>21}" for n in SIZES)
    print(f"{'case':<7} {'candidate':<9} {'gap':>9} {'sets':>5} {'target':>6}  {head} {'seconds':>6}")
    run("equal", equal, y, args.sets, args.seed)
    run("sharp", sharp, y, args.sets, args.seed + 4)
    run("refit", refit, y, args.sets, args.seed + 1)
    run("noise", noise, y, args.sets, args.seed + 2)
    run("better", better, y, args.sets, args.seed + 3)


if __name__ == "__main__":
    main()
