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
* ``strong``: one judge at 0.90 among four at 0.60-0.66, confidence uninformative;
* ``ties`` (not among the regimes ``run`` evaluates by default): 20% of the labels are ties; the
  ``uninformative`` judges say ``tie`` 5% of the time on A/B items and 40% of the time on tie
  items (else A or B at random there): the data of the tie-aware table.

Regimes other than ``informative`` keep confidence uninformative on purpose: it is the case
where a learner that sees a vote only through its confidence's log-odds loses to a vote count.

    python benchmarks/synthetic_panels.py write --regime uninformative --n 10000 OUT.jsonl
    python benchmarks/synthetic_panels.py run OUT_DIR [--sizes 100 1000 10000] [--regimes ...]
        [--methods ...] [--fold-seeds 0 1 2]
    python benchmarks/synthetic_panels.py table OUT_DIR [--before BEFORE_DIR]
    python benchmarks/synthetic_panels.py targets OUT_DIR
    python benchmarks/synthetic_panels.py heldout OUT_DIR [--sizes 1000 10000] [--seeds 0 1 2]
        [--test-n 50000] [--regimes ...]

``run`` writes each regime and size (data seed 0) and calls ``judgefuse eval`` on it once per
fold seed, one at a time (cross-fitted, 5 folds, 200 bootstrap resamples), keeping each JSON
report (``REGIME_N.json`` for fold seed 0, ``REGIME_N_sS.json`` for seed S); a report already
there is kept, so an interrupted run resumes. ``table`` prints accuracy and ECE per row, the mean
over the fold seeds found (with the range when there are several), beside an earlier run's
when ``--before`` is given. ``targets`` checks issue 43's: at 1,000 labels and more, ``auto``
within 0.5 point of the best row's accuracy with ECE <= 2%, per regime and size.

``heldout`` measures the same target without cross-fitting: per regime, size and data seed S, each
of :data:`METHODS` is fitted on a training panel of that many items (``panel(regime, n, S)``: at
1,000 and seed 0 the items ``run`` evaluates) and predicts an independent test panel of
``--test-n`` items of the same regime (``panel(regime, test_n, TEST_SEED + S)``: the same judges,
other draws). ``dawid_skene`` is fitted on the training items' votes, as ``auto`` fits it; ``auto``
is ``get_method("auto")``, as ``eval`` and the service make it. On 50,000 test items a row's 10-bin
ECE (``eval``'s definition) is about a quarter of a point above 0 when calibrated exactly (the
floor, :func:`ece_floor`), where on 1,000 items it is about 2. Each cell is written to
``heldout_REGIME_N_sS.json`` (kept if there: an interrupted run resumes); the table is printed at
the end, each cell the mean over the seeds.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from statistics import NormalDist

import numpy as np

from judgefuse.calibration.reliability import reliability_diagram
from judgefuse.calibration.scores import ece
from judgefuse.evaluation.scoring import score_columns, score_verdicts
from judgefuse.fusion import get_method
from judgefuse.fusion.auto import AutoFusion
from judgefuse.fusion.columnar import NONE, A, B, FusedColumns, VoteColumns, fuse_columns
from judgefuse.fusion.columnar_crossfit import recalibrate
from judgefuse.fusion.columnar_dawid_skene import dawid_skene_columns
from judgefuse.fusion.crossfit import predict_many
from judgefuse.fusion.dawid_skene import DawidSkeneFusion
from judgefuse.fusion.recalibrated import Recalibrated
from judgefuse.fusion.registry import FusionMethod, requires_fit
from judgefuse.fusion.stacking import StackedFusion
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem

ACCURACIES = (0.60, 0.6375, 0.675, 0.7125, 0.75)
"""The five judges' accuracies of the default panel (issue 43: "accuracies 0.60-0.75")."""
STRONG = (0.90, 0.60, 0.62, 0.64, 0.66)
FLIP = 0.30
METHODS = ("majority", "dawid_skene", "stacked", "offset_stacked", "auto")
SIZES = (100, 1000, 10000)
AUTO_GAP = 0.005
"""Issue 43's target: ``auto`` within half a point of the best row's accuracy (>= 1,000 labels)..."""
AUTO_ECE = 0.02
"""... with ECE at most 2%."""

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


TIE_SHARE = 0.2
"""The share of tie labels in the ``ties`` panel."""


def _ties(rng: np.random.Generator, truth: str) -> Votes:
    """The ``ties`` panel's votes: the default judges on A/B items, each saying ``tie`` 5% of the
    time; on a tie item each says ``tie`` with probability 0.4, else A or B at random."""
    votes = []
    for k, accuracy in enumerate(ACCURACIES):
        judge = f"j{k + 1}"
        if rng.random() < (0.4 if truth == "tie" else 0.05):
            votes.append(JudgeVote(judge=judge, mode="sc", tie=True))
            continue
        if truth == "tie":
            choice = "A" if rng.random() < 0.5 else "B"
        else:
            choice = truth if rng.random() < accuracy else _other(truth)
        votes.append(_vote(judge, choice, float(rng.uniform(0.5, 1.0))))
    return votes


TIE_PANEL = "ties"
"""A panel with tie labels (:data:`TIE_SHARE`) and tie votes, apart from :data:`REGIMES` (whose
random streams are numbered by their sorted names, so a new regime among them would change every
other's data): for the tie-aware table."""


def panel(regime: str, n: int, seed: int = 0) -> list[JudgedItem]:
    """``n`` labelled items of ``regime`` or of :data:`TIE_PANEL` (deterministic in ``seed``)."""
    stream = len(REGIMES) if regime == TIE_PANEL else sorted(REGIMES).index(regime)
    rng = np.random.default_rng([seed, stream])
    votes_of = _ties if regime == TIE_PANEL else REGIMES[regime]
    items = []
    for i in range(n):
        truth = "A" if rng.random() < 0.5 else "B"
        if regime == TIE_PANEL and rng.random() < TIE_SHARE:
            truth = "tie"
        item = PairwiseItem(
            id=f"{regime}-{i}",
            question=f"synthetic item {i}",
            answer_a="first",
            answer_b="second",
            label=truth,  # type: ignore[arg-type]
            metadata={"regime": regime},
        )
        items.append(JudgedItem(item=item, votes=votes_of(rng, truth)))
    return items


def write(path: Path, items: list[JudgedItem]) -> None:
    with path.open("w") as out:
        for judged in items:
            out.write(judged.model_dump_json(exclude_defaults=True) + "\n")


def _report_name(regime: str, n: int, fold_seed: int) -> str:
    return f"{regime}_{n}.json" if fold_seed == 0 else f"{regime}_{n}_s{fold_seed}.json"


def run(out_dir: Path, regimes: list[str], sizes: list[int], methods: list[str], fold_seeds: list[int]) -> None:
    """Write and evaluate each regime and size, one ``judgefuse eval`` at a time per fold seed.

    ``eval`` runs in ``out_dir``, so ``PYTHONPATH`` decides which judgefuse it is (a checkout's
    folder as the working directory would come first on ``sys.path``): a before/after pair can
    run the old code from ``git archive REV judgefuse | tar -x -C OLD`` with ``PYTHONPATH=OLD``."""
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    for n in sizes:
        for regime in regimes:
            data = out_dir / f"{regime}_{n}.jsonl"
            if not data.exists():
                write(data, panel(regime, n))
            for fold_seed in fold_seeds:
                report = out_dir / _report_name(regime, n, fold_seed)
                if report.exists():
                    continue
                partial = report.with_suffix(".partial.json")
                command = [
                    sys.executable,
                    "-m",
                    "judgefuse.cli",
                    "eval",
                    str(data),
                    "--format",
                    "votes",
                    "--methods",
                    *methods,
                    "--folds",
                    "5",
                    "--seed",
                    str(fold_seed),
                    "--bootstrap",
                    "200",
                    "--quiet",
                    "--json",
                    str(partial),
                ]
                started = time.perf_counter()
                subprocess.run(command, check=True, cwd=out_dir)
                partial.rename(report)
                print(
                    f"{regime} {n} fold seed {fold_seed}: {report} ({time.perf_counter() - started:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )


def _rows(path: Path) -> dict[str, dict]:
    return {row["name"]: row for row in json.loads(path.read_text())["rows"]}


def _reports(out_dir: Path, regime: str) -> dict[int, list[Path]]:
    """Size -> the reports of every fold seed run for ``regime`` (sorted by size)."""
    found: dict[int, list[Path]] = {}
    for path in out_dir.glob(f"{regime}_*.json"):
        parts = path.stem[len(regime) + 1 :].split("_")
        if parts[0].isdigit() and (len(parts) == 1 or (len(parts) == 2 and parts[1][1:].isdigit())):
            found.setdefault(int(parts[0]), []).append(path)
    return dict(sorted(found.items()))


def _mean(reports: list[Path], name: str, key: str) -> tuple[float, float, float] | None:
    values = [rows[name][key] for rows in (_rows(path) for path in reports) if name in rows]
    return (float(np.mean(values)), min(values), max(values)) if values else None


def _cell(value: tuple[float, float, float], n_seeds: int) -> str:
    mean, low, high = (100 * v for v in value)
    return f"{mean:.2f}" + (f" [{low:.1f}-{high:.1f}]" if n_seeds > 1 else "")


def table(out_dir: Path, before: Path | None) -> str:
    """Accuracy and ECE (%) per regime, size and method, the mean over the fold seeds found
    ([min-max] when several); ``before -> after`` with ``before``."""
    arrow = " (before -> after)" if before else ""
    lines = [
        f"| regime | labels | method | accuracy %{arrow} | ECE %{arrow} | fold seeds |",
        "|---|---|---|---|---|---|",
    ]
    for regime in REGIMES:
        old_reports = _reports(before, regime) if before else {}
        for n, reports in _reports(out_dir, regime).items():
            chosen = [json.loads(path.read_text()).get("chosen", {}).get("auto") for path in reports]
            for name in METHODS:
                cells = []
                for key in ("accuracy", "ece"):
                    now = _mean(reports, name, key)
                    if now is None:
                        break
                    old = _mean(old_reports.get(n, []), name, key)
                    cells.append((f"{_cell(old, len(old_reports[n]))} -> " if old else "") + _cell(now, len(reports)))
                if len(cells) == 2:
                    lines.append(f"| {regime} | {n:,} | {name} | {cells[0]} | {cells[1]} | {len(reports)} |")
            if any(chosen):
                lines.append(f"| {regime} | {n:,} | (auto chose) | {'; '.join(c for c in chosen if c)} | | |")
    return "\n".join(lines)


def ece_floor(row: dict) -> float:
    """The ECE a perfectly calibrated row with ``row``'s confidences would show on average: per
    reliability bin of ``count`` items at mean confidence ``c``, ``E|X / count - c|`` for
    ``X ~ Binomial(count, c)``, weighted by the bin's share (10 bins over 1,000 items: about 1.5
    points above 0 for a row calibrated exactly)."""
    from scipy.stats import binom

    n = sum(b["count"] for b in row["reliability"])
    total = 0.0
    for b in row["reliability"]:
        if b["count"]:
            k = np.arange(b["count"] + 1)
            c = b["mean_confidence"]
            total += b["count"] / n * float(np.sum(binom.pmf(k, b["count"], c) * np.abs(k / b["count"] - c)))
    return total


def targets(out_dir: Path) -> str:
    """Per regime and size (>= 1,000 labels): the best row's accuracy, auto's, the gap and auto's
    ECE, each the mean over the fold seeds, whether issue 43's target is met, and the ECE a
    perfectly calibrated row with auto's confidences would show (:func:`ece_floor`)."""
    lines = [
        "| regime | labels | best row | best acc % | auto acc % | gap (points) | auto ECE % | met "
        "| ECE if calibrated exactly % |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for regime in REGIMES:
        for n, reports in _reports(out_dir, regime).items():
            if n < 1000:
                continue
            means = {name: m[0] for name in METHODS if name != "auto" and (m := _mean(reports, name, "accuracy"))}
            auto = _mean(reports, "auto", "accuracy")
            ece = _mean(reports, "auto", "ece")
            if not means or auto is None or ece is None:
                continue
            best = max(means, key=lambda name: means[name])
            gap = means[best] - auto[0]
            met = gap <= AUTO_GAP and ece[0] <= AUTO_ECE
            floor = float(np.mean([ece_floor(_rows(path)["auto"]) for path in reports]))
            lines.append(
                f"| {regime} | {n:,} | {best} | {100 * means[best]:.2f} | {100 * auto[0]:.2f} | "
                f"{100 * gap:+.2f} | {100 * ece[0]:.2f} | {'yes' if met else 'no'} | {100 * floor:.2f} |"
            )
    return "\n".join(lines)


TEST_N = 50_000
"""Items of ``heldout``'s test panel."""
TEST_SEED = 1000
"""``heldout``'s test panel of data seed S is drawn with seed ``TEST_SEED + S`` (its training panel with S)."""
CHECK_ITEMS = 300
"""Test items whose arrays' verdicts ``heldout`` checks against the fitted method's own ``predict``."""


def predict_columns(method: FusionMethod, batches: list[Votes], columns: VoteColumns) -> FusedColumns:
    """A fitted (or label-free) method's verdicts on the items of ``columns`` as arrays, as its
    ``predict`` gives them: a voting rule over the arrays, a fitted ``dawid_skene`` by its
    posteriors, ``stacked`` / ``offset_stacked`` by ``predict_p_a``, a recalibrated method as its
    base's verdicts mapped, ``auto`` as its chosen method's (a recalibrated confidence below one
    half answering the other letter, as ``auto`` does)."""
    if isinstance(method, AutoFusion):
        assert method.model is not None and method.tie_model is None
        fused = predict_columns(method.model, batches, columns)
        flip = fused.decided & (fused.confidence < 0.5)
        answer = np.where(flip, np.where(fused.answer == A, B, A), fused.answer).astype(np.int8)
        confidence = np.where(flip, 1.0 - fused.confidence, fused.confidence)
        return FusedColumns(
            method.name, answer, confidence, fused.p_a, fused.n_valid, fused.n_invalid, fused.tie_broken
        )
    if isinstance(method, Recalibrated):
        return recalibrate(method, predict_columns(method.base, batches, columns))
    if isinstance(method, DawidSkeneFusion):
        assert method.model is not None, "fit dawid_skene on the training votes first"
        return dawid_skene_columns(method, columns)
    if isinstance(method, StackedFusion):
        p_a = method.predict_p_a(batches)
        known = [columns.judges.index(name) for name in method.judges if name in columns.judges]
        decided = (columns.present & np.isin(columns.judge, known)).any(axis=1)
        counts = fuse_columns("majority", columns)
        p_a = np.where(decided, p_a, 0.5)
        answer = np.where(decided, np.where(p_a >= 0.5, A, B), NONE).astype(np.int8)
        tie_broken = decided & (p_a == 0.5)
        return FusedColumns(
            method.name, answer, np.maximum(p_a, 1.0 - p_a), p_a, counts.n_valid, counts.n_invalid, tie_broken
        )
    if requires_fit(method):
        raise ValueError(f"{method.name}: no array form here")
    return fuse_columns(method.name, columns)


def fit_on(name: str, train: list[JudgedItem], train_columns: VoteColumns) -> FusionMethod:
    """``name`` fitted on the labelled ``train`` items (``dawid_skene`` on their votes)."""
    method = get_method(name)
    if isinstance(method, DawidSkeneFusion):
        dawid_skene_columns(method, train_columns)
    elif requires_fit(method):
        method.fit([j.votes for j in train], [j.item.label for j in train])  # type: ignore[attr-defined]
    return method


def _check(name: str, method: FusionMethod, test: list[JudgedItem], fused: FusedColumns) -> None:
    """The arrays' row on the first :data:`CHECK_ITEMS` test items is the per-item ``predict``'s."""
    head = test[:CHECK_ITEMS]
    reference = score_verdicts(name, head, predict_many(method, [j.votes for j in head]))
    votes = VoteColumns.from_batches([j.votes for j in head])
    mine = score_columns(name, head, fused.take(np.arange(len(head))), votes)
    if not (
        np.array_equal(mine.correct, reference.correct)
        and np.allclose(mine.confidence, reference.confidence, atol=1e-9)
    ):
        raise AssertionError(f"{name}: the arrays' verdicts differ from predict's on the first {len(head)} test items")


def heldout_cell(regime: str, n: int, seed: int, test_n: int = TEST_N, methods: tuple[str, ...] = METHODS) -> dict:
    """Accuracy, 10-bin ECE, the reliability bins and the exactly-calibrated floor of each method
    fitted on ``panel(regime, n, seed)`` and scored on ``panel(regime, test_n, TEST_SEED + seed)``."""
    started = time.process_time()
    train = panel(regime, n, seed)
    test = panel(regime, test_n, TEST_SEED + seed)
    train_columns = VoteColumns.from_batches([j.votes for j in train])
    batches = [j.votes for j in test]
    columns = VoteColumns.from_batches(batches)
    rows: dict[str, dict] = {}
    chosen = None
    for name in methods:
        method = fit_on(name, train, train_columns)
        fused = predict_columns(method, batches, columns)
        _check(name, method, test, fused)
        row = score_columns(name, test, fused, columns)
        bins = [b.as_dict() for b in reliability_diagram(row.confidence, row.correct)]
        rows[name] = {
            "accuracy": float(row.correct.mean()),
            "ece": ece(row.confidence, row.correct),
            "floor": ece_floor({"reliability": bins}),
            "n_ties": row.n_ties,
            "reliability": bins,
        }
        if isinstance(method, AutoFusion):
            chosen = method.chosen
    return {
        "regime": regime, "n_train": n, "seed": seed, "n_test": test_n, "test_seed": TEST_SEED + seed,
        "rows": rows, "auto_chose": chosen, "cpu_s": time.process_time() - started,
    }  # fmt: skip


def heldout(out_dir: Path, regimes: list[str], sizes: list[int], seeds: list[int], test_n: int) -> str:
    """Every :func:`heldout_cell`, one at a time, each kept as JSON in ``out_dir``; the table."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for n in sizes:
        for regime in regimes:
            for seed in seeds:
                path = out_dir / f"heldout_{regime}_{n}_s{seed}.json"
                if path.exists():
                    continue
                cell = heldout_cell(regime, n, seed, test_n)
                path.write_text(json.dumps(cell, indent=1) + "\n")
                print(
                    f"{regime} {n} seed {seed}: auto chose {cell['auto_chose']} ({cell['cpu_s']:.0f} s of CPU)",
                    file=sys.stderr,
                    flush=True,
                )
    return heldout_table(out_dir)


def heldout_table(out_dir: Path) -> str:
    """Per regime and training size: each row's held-out accuracy / ECE (%), the mean over the
    seeds found (auto's ECE with its [min-max] over them); auto's gap to the best other row, whether
    issue 43's target is met held out, the floor of an exactly calibrated row with auto's
    confidences, and what auto chose per seed. Then every row's ECE per seed."""
    cells: dict[tuple[str, int], list[dict]] = {}
    for path in sorted(out_dir.glob("heldout_*.json")):
        cell = json.loads(path.read_text())
        cells.setdefault((cell["regime"], cell["n_train"]), []).append(cell)
    others = [name for name in METHODS if name != "auto"]
    lines = [
        "| regime | labels | " + " | ".join(METHODS) + " | auto's gap | met | floor | seeds | auto chose |",
        "|---|---|" + "---|" * len(METHODS) + "---|---|---|---|---|",
    ]
    for regime in REGIMES:
        for n in sorted(n for r, n in cells if r == regime):
            found = sorted(cells[(regime, n)], key=lambda c: c["seed"])

            def mean(name: str, key: str, found: list[dict] = found) -> float:
                return float(np.mean([c["rows"][name][key] for c in found]))

            best = max(others, key=lambda name: mean(name, "accuracy"))
            gap = mean(best, "accuracy") - mean("auto", "accuracy")
            met = gap <= AUTO_GAP and mean("auto", "ece") <= AUTO_ECE
            row = " | ".join(f"{100 * mean(name, 'accuracy'):.2f} / {100 * mean(name, 'ece'):.2f}" for name in METHODS)
            eces = [100 * c["rows"]["auto"]["ece"] for c in found]
            spread = f" [{min(eces):.2f}-{max(eces):.2f}]" if len(found) > 1 else ""
            lines.append(
                f"| {regime} | {n:,} | {row}{spread} | {100 * gap:+.2f} ({best}) | {'yes' if met else 'no'} | "
                f"{100 * mean('auto', 'floor'):.2f} | {len(found)} | {'; '.join(str(c['auto_chose']) for c in found)} |"
            )
    lines += [
        "",
        "Per seed: ECE % of each row on the test panel (auto's choice; CPU s of the cell)",
        "| regime | labels | seed | " + " | ".join(METHODS) + " | auto chose | CPU s |",
        "|---|---|---|" + "---|" * len(METHODS) + "---|---|",
    ]
    for (regime, n), found in sorted(cells.items(), key=lambda kv: (list(REGIMES).index(kv[0][0]), kv[0][1])):
        for c in sorted(found, key=lambda c: c["seed"]):
            cells_ece = " | ".join(f"{100 * c['rows'][name]['ece']:.2f}" for name in METHODS)
            lines.append(f"| {regime} | {n:,} | {c['seed']} | {cells_ece} | {c['auto_chose']} | {c['cpu_s']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write one regime's votes file")
    w.add_argument("--regime", choices=[*sorted(REGIMES), TIE_PANEL], required=True)
    w.add_argument("--n", type=int, default=1000)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("out", type=Path)
    r = sub.add_parser("run", help="write and evaluate every regime and size")
    r.add_argument("out_dir", type=Path)
    r.add_argument("--regimes", nargs="+", choices=sorted(REGIMES), default=list(REGIMES))
    r.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    r.add_argument("--methods", nargs="+", default=list(METHODS))
    r.add_argument("--fold-seeds", nargs="+", type=int, default=[0])
    t = sub.add_parser("table", help="print the table of a run's reports")
    t.add_argument("out_dir", type=Path)
    t.add_argument("--before", type=Path)
    g = sub.add_parser("targets", help="auto against the best row, per regime and size")
    g.add_argument("out_dir", type=Path)
    h = sub.add_parser("heldout", help="fit on a training panel, score on a large independent test panel")
    h.add_argument("out_dir", type=Path)
    h.add_argument("--regimes", nargs="+", choices=sorted(REGIMES), default=list(REGIMES))
    h.add_argument("--sizes", nargs="+", type=int, default=[1000])
    h.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    h.add_argument("--test-n", type=int, default=TEST_N)
    args = parser.parse_args()
    if args.command == "write":
        write(args.out, panel(args.regime, args.n, args.seed))
    elif args.command == "run":
        run(args.out_dir, args.regimes, args.sizes, args.methods, args.fold_seeds)
    elif args.command == "targets":
        print(targets(args.out_dir))
    elif args.command == "heldout":
        print(heldout(args.out_dir, args.regimes, args.sizes, args.seeds, args.test_n))
    else:
        print(table(args.out_dir, args.before))


if __name__ == "__main__":
    main()
