"""The live local panel's table on docs/results.md, from the committed votes files.

    python benchmarks/local_panel_table.py \
        --panel benchmarks/results/local_panel_llmbar_natural100.jsonl \
        --judges qwen-logprob-plain,qwen-sc-plain,smollm2-logprob-plain \
        --fuser benchmarks/results/local_fuser_llmbar_natural50.jsonl \
        [--extra benchmarks/results/local_qwen_delimited_llmbar_natural.jsonl]

Prints markdown: one row per judge (every judge in ``--panel`` and ``--extra``, on the items each
covered), then each fusion method over the panel of ``--judges`` (the prompt style that measured
best per model), then the fuser's row from ``--fuser`` with the same methods restricted to the
items the fuser saw, so the fuser is compared on its own items. Columns: items, invalid votes,
accuracy, ECE, Brier, TH-Score (eps 0.1) and, for judges asked in both orders, the share of
valid votes whose two orders disagreed (position inconsistency).

Every number comes from :func:`judgefuse.evaluation.runner.evaluate` (``judgefuse eval`` gives the
same rows for each file), so the table is reproducible anywhere from the committed files.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from judgefuse.evaluation.loaders.votes import read_votes
from judgefuse.evaluation.runner import EvaluationOptions, RowReport, evaluate
from judgefuse.judges.types import JudgedItem

BOOTSTRAP = 200
"""Resamples behind ``evaluate``'s intervals (not printed here; the table shows point values)."""

METHODS = ("majority", "mean_probability", "confidence_weighted", "dawid_skene", "majority+platt", "stacked")


def keep_judges(items: Sequence[JudgedItem], judges: set[str]) -> list[JudgedItem]:
    return [judged.model_copy(update={"votes": [v for v in judged.votes if v.judge in judges]}) for judged in items]


def position_inconsistency(items: Sequence[JudgedItem], judge: str) -> str:
    flags = [
        vote.signals["position_inconsistent"]
        for judged in items
        for vote in judged.votes
        if vote.judge == judge and vote.valid and "position_inconsistent" in vote.signals
    ]
    return f"{sum(flags) / len(flags):.0%}" if flags else "-"


def judge_rows(items: Sequence[JudgedItem]) -> list[RowReport]:
    """The judges' own rows (``evaluate`` needs one method; its row is dropped)."""
    evaluation = evaluate(items, options=EvaluationOptions(methods=("majority",), n_bootstrap=BOOTSTRAP))
    return [report for report in evaluation.rows if report.row.kind == "judge"]


def line(name: str, report: RowReport, inconsistency: str = "-") -> str:
    m = report.metrics
    n_inv = report.row.n_invalid
    return (
        f"| {name} | {int(m['n'])} | {n_inv} | {m['accuracy']:.1%} | {m['ece']:.1%} | {m['brier']:.3f} "
        f"| {m['th_score']:.2f} | {inconsistency} |"
    )


def table(panel: list[JudgedItem], judges: set[str], fuser: list[JudgedItem], extra: list[JudgedItem]) -> str:
    options = EvaluationOptions(methods=METHODS, n_bootstrap=BOOTSTRAP)
    out = [
        "| judge or method | n | inv | Acc | ECE | Brier | TH | pos. inconsistent |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for items in (panel, extra):
        if not items:
            continue
        for report in judge_rows(items):
            out.append(line(report.row.name, report, position_inconsistency(items, report.row.name)))
    chosen = keep_judges(panel, judges)
    for report in evaluate(chosen, options=options).rows:
        if report.row.kind != "judge":
            out.append(line(f"{report.row.name} ({len(judges)} judges)", report))
    if fuser:
        ids = {judged.item.id for judged in fuser}
        on_fuser_items = [judged for judged in chosen if judged.item.id in ids]
        fuser_names = {v.judge for judged in fuser for v in judged.votes} - judges
        for report in judge_rows(keep_judges(fuser, fuser_names)):
            out.append(line(f"{report.row.name} (LLM-as-a-Fuser, first {len(fuser)} items)", report))
        for report in evaluate(on_fuser_items, options=options).rows:
            if report.row.kind != "judge" and report.row.name in ("majority", "mean_probability", "dawid_skene"):
                out.append(line(f"{report.row.name} (same {len(fuser)} items)", report))
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--panel", type=Path, required=True)
    parser.add_argument("--judges", required=True, help="comma-separated judges of the fused panel")
    parser.add_argument("--fuser", type=Path)
    parser.add_argument("--extra", type=Path)
    args = parser.parse_args()
    panel = read_votes(args.panel)
    fuser = read_votes(args.fuser) if args.fuser else []
    extra = read_votes(args.extra) if args.extra else []
    print(table(panel, set(args.judges.split(",")), fuser, extra))


if __name__ == "__main__":
    main()
