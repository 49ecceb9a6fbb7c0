"""Synthetic judge panels with known structure, as votes files ``judgefuse eval`` reads (issue 43).

Why: the shared data sets are small and their judges' quirks are unknown, so they cannot say
whether a fusion method recovers what a panel's structure allows. Here the structure is chosen:
each regime is a question learned fusion should answer at least as well as a vote count.

Every panel has balanced A/B labels and judges that each answer A or B (no ties, no failures),
in ``sc`` mode with a stated confidence. Regimes (five judges unless said):

* ``uninformative``: accuracies 0.60-0.75, confidence uniform in [0.5, 1] whatever the judge
  answers (LLM verbal confidence often carries little information);
* ``informative``: the same accuracies, each judge answering the sign of a latent
  ``z ~ N(+-d, 1)`` (``d`` set by its accuracy) with confidence ``sigmoid(|z|)``: a surer judge is
  more often right;
* ``correlated``: ``uninformative`` with the best judge's votes copied under a second name (the
  vote count sees it twice; six judges);
* ``corrupted``: ``uninformative`` with 30% of one judge's answers flipped (its 0.75 becomes 0.60);
* ``position_biased``: ``uninformative`` where one judge answers A on every item shown to it in
  one order (half the items, hidden), and as its accuracy says on the rest;
* ``strong``: one judge at 0.90 among four at 0.60-0.66, confidence uninformative.

Regimes other than ``informative`` keep confidence uninformative on purpose: it is the case
where a learner that sees a vote only through its confidence's log-odds loses to a vote count.

    python benchmarks/synthetic_panels.py write --regime uninformative --n 10000 OUT.jsonl
    python benchmarks/synthetic_panels.py run OUT_DIR [--sizes 1000 10000] [--regimes ...]
    python benchmarks/synthetic_panels.py table OUT_DIR [--before BEFORE_DIR]

``run`` writes each regime and size (seed 0) and calls ``judgefuse eval`` on it, one at a time
(cross-fitted, 5 folds, fold seed 0, 200 bootstrap resamples), keeping each JSON report;
``table`` prints accuracy and ECE per row, beside an earlier run's when ``--before`` is given.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from statistics import NormalDist

import numpy as np

from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem

ACCURACIES = (0.60, 0.6375, 0.675, 0.7125, 0.75)
"""The five judges' accuracies of the default panel (issue 43: "accuracies 0.60-0.75")."""
STRONG = (0.90, 0.60, 0.62, 0.64, 0.66)
FLIP = 0.30
METHODS = ("majority", "dawid_skene", "stacked", "offset_stacked")
SIZES = (1000, 10000)

Votes = list[JudgeVote]


def _vote(judge: str, choice: str, confidence: float) -> JudgeVote:
    return JudgeVote(judge=judge, mode="sc", choice=choice, confidence=round(confidence, 6))  # type: ignore[arg-type]


def _other(letter: str) -> str:
    return "B" if letter == "A" else "A"


def _uninformative(rng: np.random.Generator, truth: str, accuracies: tuple[float, ...]) -> Votes:
    """Each judge right with its accuracy; confidence U[0.5, 1] independent of being right."""
    votes = []
    for k, accuracy in enumerate(accuracies):
        choice = truth if rng.random() < accuracy else _other(truth)
        votes.append(_vote(f"j{k + 1}", choice, float(rng.uniform(0.5, 1.0))))
    return votes


def _informative(rng: np.random.Generator, truth: str, accuracies: tuple[float, ...]) -> Votes:
    """Each judge answers the sign of ``z ~ N(+-d, 1)``; accuracy ``Phi(d)``, confidence ``sigmoid(|z|)``."""
    sign = 1.0 if truth == "A" else -1.0
    votes = []
    for k, accuracy in enumerate(accuracies):
        z = rng.normal(sign * NormalDist().inv_cdf(accuracy), 1.0)
        confidence = 1.0 / (1.0 + math.exp(-abs(z)))
        votes.append(_vote(f"j{k + 1}", "A" if z > 0 else "B", confidence))
    return votes


def _correlated(rng: np.random.Generator, truth: str) -> Votes:
    votes = _uninformative(rng, truth, ACCURACIES)
    best = votes[-1]
    return [*votes, best.model_copy(update={"judge": f"{best.judge}_copy"})]


def _corrupted(rng: np.random.Generator, truth: str) -> Votes:
    votes = _uninformative(rng, truth, ACCURACIES)
    last = votes[-1]
    if rng.random() < FLIP:
        votes[-1] = _vote(last.judge, _other(str(last.choice)), float(last.confidence or 0.5))
    return votes


def _position_biased(rng: np.random.Generator, truth: str) -> Votes:
    votes = _uninformative(rng, truth, ACCURACIES)
    last = votes[-1]
    if rng.random() < 0.5:  # shown in the order it always prefers the first of
        votes[-1] = _vote(last.judge, "A", float(last.confidence or 0.5))
    return votes


REGIMES: dict[str, Callable[[np.random.Generator, str], Votes]] = {
    "uninformative": lambda rng, truth: _uninformative(rng, truth, ACCURACIES),
    "informative": lambda rng, truth: _informative(rng, truth, ACCURACIES),
    "correlated": _correlated,
    "corrupted": _corrupted,
    "position_biased": _position_biased,
    "strong": lambda rng, truth: _uninformative(rng, truth, STRONG),
}


def panel(regime: str, n: int, seed: int = 0) -> list[JudgedItem]:
    """``n`` labelled items of ``regime`` (deterministic in ``seed``)."""
    rng = np.random.default_rng([seed, sorted(REGIMES).index(regime)])
    items = []
    for i in range(n):
        truth = "A" if rng.random() < 0.5 else "B"
        item = PairwiseItem(id=f"{regime}-{i}", question=f"synthetic item {i}", answer_a="first", answer_b="second",
                            label=truth, metadata={"regime": regime})  # type: ignore[arg-type]
        items.append(JudgedItem(item=item, votes=REGIMES[regime](rng, truth)))
    return items


def write(path: Path, items: list[JudgedItem]) -> None:
    with path.open("w") as out:
        for judged in items:
            out.write(judged.model_dump_json(exclude_defaults=True) + "\n")


def run(out_dir: Path, regimes: list[str], sizes: list[int], methods: list[str]) -> None:
    """Write and evaluate each regime and size, one ``judgefuse eval`` at a time.

    ``eval`` runs in ``out_dir``, so ``PYTHONPATH`` decides which judgefuse it is (a checkout's
    folder as the working directory would come first on ``sys.path``): a before/after pair can
    run the old code from ``git archive REV judgefuse | tar -x -C OLD`` with ``PYTHONPATH=OLD``."""
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    for regime in regimes:
        for n in sizes:
            data = out_dir / f"{regime}_{n}.jsonl"
            if not data.exists():
                write(data, panel(regime, n))
            report = out_dir / f"{regime}_{n}.json"
            command = [sys.executable, "-m", "judgefuse.cli", "eval", str(data), "--format", "votes", "--methods",
                       *methods, "--folds", "5", "--seed", "0", "--bootstrap", "200", "--quiet",
                       "--json", str(report)]
            subprocess.run(command, check=True, cwd=out_dir)
            print(f"{regime} {n}: {report}", file=sys.stderr, flush=True)


def _rows(path: Path) -> dict[str, dict]:
    return {row["name"]: row for row in json.loads(path.read_text())["rows"]}


def table(out_dir: Path, before: Path | None) -> str:
    """Accuracy and ECE (%) per regime, size and method; ``before -> after`` with ``before``."""
    arrow = " (before -> after)" if before else ""
    lines = [f"| regime | labels | method | accuracy %{arrow} | ECE %{arrow} |", "|---|---|---|---|---|"]
    for regime in REGIMES:
        for report in sorted(out_dir.glob(f"{regime}_*.json"), key=lambda p: int(p.stem.rsplit("_", 1)[1])):
            n = report.stem.rsplit("_", 1)[1]
            rows = _rows(report)
            old = _rows(before / report.name) if before and (before / report.name).exists() else {}
            for name in METHODS:
                if name not in rows:
                    continue
                cells = []
                for key in ("accuracy", "ece"):
                    now = f"{100 * rows[name][key]:.2f}"
                    cells.append(f"{100 * old[name][key]:.2f} -> {now}" if name in old else now)
                lines.append(f"| {regime} | {int(n):,} | {name} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write one regime's votes file")
    w.add_argument("--regime", choices=sorted(REGIMES), required=True)
    w.add_argument("--n", type=int, default=1000)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("out", type=Path)
    r = sub.add_parser("run", help="write and evaluate every regime and size")
    r.add_argument("out_dir", type=Path)
    r.add_argument("--regimes", nargs="+", choices=sorted(REGIMES), default=list(REGIMES))
    r.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    r.add_argument("--methods", nargs="+", default=list(METHODS))
    t = sub.add_parser("table", help="print the table of a run's reports")
    t.add_argument("out_dir", type=Path)
    t.add_argument("--before", type=Path)
    args = parser.parse_args()
    if args.command == "write":
        write(args.out, panel(args.regime, args.n, args.seed))
    elif args.command == "run":
        run(args.out_dir, args.regimes, args.sizes, args.methods)
    else:
        print(table(args.out_dir, args.before))


if __name__ == "__main__":
    main()
