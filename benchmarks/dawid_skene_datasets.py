"""Dawid-Skene as a cold start on every recorded data set: does fusion without labels help?

For each data set in ``../shared/data`` (JudgeBench GPT-4o split with 10 recorded judges,
Trust-or-Escalate with 3, LLMBar with 6 base LLMs x up to 15 strategies, as a whole and per
subset) prints one markdown row: items, judges, the accuracy of ``majority``,
``mean_probability`` and ``dawid_skene`` (fitted on the votes alone, labels unused, every item:
the service's cold start), the mean and largest absolute error of Dawid-Skene's per-judge
accuracy estimate against the labelled one, and the effective number of independent judges
(labelled; label-free), from :mod:`judgefuse.fusion.panel_structure` (the code
``GET /v1/calibration`` runs). An undecided verdict counts as wrong; an exact tie (the votes
prefer neither answer, docs/design.md, 'Fusion') counts as half right, the expectation of the
seeded coin ``judgefuse eval`` scores it with.

Usage: python benchmarks/dawid_skene_datasets.py [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from judgefuse.evaluation.loaders import load
from judgefuse.fusion import get_method
from judgefuse.fusion.dawid_skene import DawidSkeneFusion
from judgefuse.fusion.panel_structure import panel_structure
from judgefuse.fusion.verdict import Verdict, is_tie
from judgefuse.judges.types import JudgedItem

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
HEADER = ("| data set | items | judges | majority | mean_probability | dawid_skene (no labels) | "
          "DS - majority | judge acc MAE (max) | k_eff labelled | k_eff label-free |")


def accuracy(verdicts: Sequence[Verdict], labels: Sequence[str | None]) -> float:
    return float(
        np.mean([0.5 if is_tie(v) else float(v.choice == y) for v, y in zip(verdicts, labels, strict=True)])
    )


def row(name: str, items: list[JudgedItem]) -> str:
    items = [judged for judged in items if judged.item.label is not None]
    batches = [judged.votes for judged in items]
    labels = [judged.item.label for judged in items]
    majority = get_method("majority")
    mean_p = get_method("mean_probability")
    maj = accuracy([majority(b) for b in batches], labels)
    mp = accuracy([mean_p(b) for b in batches], labels)
    ds = accuracy(DawidSkeneFusion().fit_unlabelled(batches).predict(batches), labels)
    structure = panel_structure(batches, labels)
    assert structure is not None
    gaps = [abs(e.estimated_accuracy - e.labelled_accuracy) for e in structure.judges
            if e.estimated_accuracy is not None and e.labelled_accuracy is not None]

    def fmt(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    return (f"| {name} | {len(items)} | {len(structure.judges)} | {maj:.3f} | {mp:.3f} | {ds:.3f} | "
            f"{ds - maj:+.3f} | {np.mean(gaps):.3f} ({max(gaps):.3f}) | "
            f"{fmt(structure.effective_judges_labelled)} | {fmt(structure.effective_judges_unlabelled)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    started = time.perf_counter()
    print(HEADER)
    print("|" + "---|" * HEADER.count(" | ") + "---|")
    print(row("JudgeBench (GPT-4o pairs)", load([args.data / "judgebench"])))
    print(row("Trust-or-Escalate", load([args.data / "trust_or_escalate"])))
    llmbar = load([args.data / "llmbar"])
    print(row("LLMBar (all subsets)", llmbar))
    by_subset: dict[str, list[JudgedItem]] = {}
    for judged in llmbar:
        by_subset.setdefault(judged.item.category or "?", []).append(judged)
    for subset, items in sorted(by_subset.items(), key=lambda kv: -len(kv[1])):
        if len(items) >= 40:
            print(row(f"LLMBar {subset}", items))
    print(f"\n(wall {time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
