"""The LLM-as-a-Fuser row on docs/results.md, beside majority and stacking on the same items.

    python benchmarks/fuser_judgebench_table.py --data ../shared/data \
        --fuser-votes benchmarks/results/fuser_smollm2_judgebench50.jsonl

Reads the fuser's recorded answers (``benchmarks/results/fuser_judgebench.sh`` records them with
``judgefuse eval --fuser``; nothing is called here) and the three JudgeBench judges it read, and
prints one markdown row per judge and method over the items the fuser answered: n, invalid,
accuracy, ECE, Brier, TH-Score (eps 0.1), then the fuser's wall time and tokens. ``stacked`` is
cross-fitted (5 folds) on all 350 labelled pairs and scored on the fuser's items, since a handful
of items cannot fit it; the other rows are computed on the fuser's items alone.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from judgefuse.evaluation.fuser_eval import FUSER_ROW, fuser_verdicts, read_fuser_answers
from judgefuse.evaluation.loaders import load
from judgefuse.evaluation.runner import EvaluationOptions, evaluate
from judgefuse.evaluation.scoring import score_verdicts
from judgefuse.fusion import cross_fit_predict, get_method
from judgefuse.judges.types import JudgedItem

OUTPUTS = "dataset=judgebench,response_model=gpt-4o-2024-05-13"
JUDGE_FILES = (
    "judge_name=arena_hard,judge_model=o1-mini-2024-09-12",
    "judge_name=reward_model,judge_model=Skywork_Skywork-Reward-Gemma-2-27B",
    "judge_name=reward_model,judge_model=internlm_internlm2-20b-reward",
)


def load_judgebench(data: Path) -> list[JudgedItem]:
    folder = data / "judgebench"
    paths = [folder / f"{OUTPUTS}.jsonl", *(folder / "outputs" / f"{OUTPUTS},{name}.jsonl" for name in JUDGE_FILES)]
    return [judged for judged in load(paths) if judged.item.label is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--fuser-votes", type=Path, required=True)
    args = parser.parse_args()
    items = load_judgebench(args.data)
    recorded = read_fuser_answers(args.fuser_votes)
    mine = [judged for judged in items if judged.item.id in recorded]
    positions = [i for i, judged in enumerate(items) if judged.item.id in recorded]
    labels = [judged.item.label for judged in items]
    stacked_all = cross_fit_predict(
        lambda: get_method("stacked"),
        [j.votes for j in items],
        labels,
        n_folds=5,
        seed=0,  # type: ignore[arg-type]
    )
    fused = {
        FUSER_ROW: fuser_verdicts(mine, recorded),
        "stacked (all 350, cross-fitted)": [stacked_all[i] for i in positions],
    }
    options = EvaluationOptions(methods=("majority", "mean_probability"), n_bootstrap=200)
    evaluation = evaluate(mine, options=options, fused=fused)
    assert all(score_verdicts(n, mine, v).correct.size == len(mine) for n, v in fused.items())
    print("| judge or method | n | inv | Acc | ECE | Brier | TH |")
    print("|---|---|---|---|---|---|---|")
    for report in evaluation.rows:
        m = report.metrics
        print(
            f"| {report.row.name} | {int(m['n'])} | {report.row.n_invalid} | {m['accuracy']:.1%} | {m['ece']:.1%} "
            f"| {m['brier']:.3f} | {m['th_score']:.2f} |"
        )
    votes = [recorded[j.item.id] for j in mine]
    wall = sum(v.latency_s for v in votes)
    prompt, completion = sum(v.prompt_tokens for v in votes), sum(v.completion_tokens for v in votes)
    unusable = sum(not v.valid for v in votes)
    print(
        f"\nfuser: {len(votes)} items, {wall:.0f} s of fuser calls ({wall / max(len(votes), 1):.0f} s per item), "
        f"{prompt} prompt + {completion} completion tokens, unusable replies (fell back to majority): {unusable}"
    )


if __name__ == "__main__":
    main()
