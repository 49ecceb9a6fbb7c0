"""Print the tie-aware numbers of ``judgefuse eval --json`` reports, optionally beside a report made
before a change (``--before``): accuracy, ECE, Brier, TH-Score on decided (A/B) labels, then each
row's ``ties`` block (JudgeBench's pair rule, decided accuracy, three-way accuracy, tie answers, tie
rate; docs/offline-evaluation.md, 'Ties').

    python benchmarks/ties_table.py AFTER.json [--before BEFORE.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("after", type=Path)
    parser.add_argument("--before", type=Path)
    args = parser.parse_args()
    after = json.loads(args.after.read_text())
    before = {row["name"]: row for row in json.loads(args.before.read_text())["rows"]} if args.before else {}
    first = after["rows"][0]["ties"]
    print(f"items {after['n_items']}, A/B labels {after['n_labelled']}, tie labels {first['n_tie_labels']}, "
          f"both_bad labels {first['n_both_bad_labels']}")
    moved = " (before -> after)" if before else ""
    print(f"| row | Acc %{moved} | ECE %{moved} | Brier{moved} | TH{moved} | JB % | decided % | 3-way % | tie answers | tie % |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in after["rows"]:
        old = before.get(row["name"])

        def cell(key: str, scale: float, digits: int, row: dict = row, old: dict | None = old) -> str:
            now = f"{scale * row[key]:.{digits}f}"
            return f"{scale * old[key]:.{digits}f} -> {now}" if old else now

        ties = row["ties"]
        print(
            f"| {row['name']} | {cell('accuracy', 100, 1)} | {cell('ece', 100, 1)} | {cell('brier', 1, 3)} | "
            f"{cell('th_score', 1, 2)} | {_pct(ties['judgebench_accuracy'])} | {_pct(ties['decided_accuracy'])} | "
            f"{_pct(ties['three_way_accuracy'])} | {ties['n_tie_answers']} | {_pct(ties['tie_rate'])} |"
        )


if __name__ == "__main__":
    main()
