"""Agreement numerics against the reference implementations, on the shared JudgeBench data:
Cohen's kappa = scikit-learn's ``cohen_kappa_score``, Krippendorff's alpha = the ``krippendorff``
package's nominal alpha; and the report's agreement block (kappa, confusion incl. ties, the most
confident disagreements) on hand-made items."""

from __future__ import annotations

from pathlib import Path

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from judgefuse.calibration.agreement import cohen_kappa, confusion_matrix, krippendorff_alpha_nominal
from judgefuse.evaluation.agreement import panel_alpha
from judgefuse.evaluation.loaders import load
from judgefuse.evaluation.runner import EvaluationOptions, evaluate
from judgefuse.evaluation.scoring import judge_names
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem


@pytest.fixture(scope="module")
def judgebench(shared_data: Path) -> list[JudgedItem]:
    return [j for j in load([shared_data / "judgebench"]) if j.item.label is not None]


def answers(items: list[JudgedItem], judge: str) -> tuple[list[str], list[str]]:
    labels, given = [], []
    for judged in items:
        vote = next((v for v in judged.votes if v.judge == judge), None)
        if vote is not None:
            labels.append(str(judged.item.label))
            given.append(vote.choice or "none")
    return labels, given


def test_kappa_matches_sklearn_for_every_judgebench_judge(judgebench) -> None:
    judges = judge_names(judgebench)
    assert len(judges) == 10
    for judge in judges:
        labels, given = answers(judgebench, judge)
        assert cohen_kappa(labels, given) == pytest.approx(cohen_kappa_score(labels, given), abs=1e-12), judge


def test_kappa_between_judges_and_with_ties_matches_sklearn(judgebench) -> None:
    rng = np.random.default_rng(3)
    a = list(rng.choice(["A", "B", "tie"], size=200, p=[0.45, 0.4, 0.15]))
    b = [x if rng.random() < 0.6 else str(rng.choice(["A", "B", "tie"])) for x in a]
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    assert cohen_kappa(["A"] * 5, ["A"] * 5) is None  # chance agreement 1: undefined, not 1 or nan


def test_alpha_matches_the_krippendorff_package_on_judgebench(judgebench) -> None:
    judges = judge_names(judgebench)
    ours = panel_alpha(judgebench, judges)
    code = {"A": 0.0, "B": 1.0}
    matrix = np.full((len(judges), len(judgebench)), np.nan)
    for col, judged in enumerate(judgebench):
        for vote in judged.votes:
            row = judges.index(vote.judge)
            if np.isnan(matrix[row, col]) and vote.choice is not None:
                matrix[row, col] = code[vote.choice]
    reference = krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")
    assert ours == pytest.approx(reference, abs=1e-9)
    assert krippendorff_alpha_nominal([["A", "B", None, "tie"], ["tie", "tie", "B", None]]) == pytest.approx(
        krippendorff.alpha(reliability_data=np.array([[0, 2], [1, 2], [np.nan, 1], [2, np.nan]]),
                           level_of_measurement="nominal"), abs=1e-9)  # fmt: skip


def test_confusion_counts_every_answer_kind() -> None:
    assert confusion_matrix(["A", "A", "B", "B"], ["A", "tie", "none", "A"], ["A", "B", "tie", "none"]) == [
        [1, 0, 1, 0],
        [1, 0, 0, 1],
        [0, 0, 0, 0],
        [0, 0, 0, 0],
    ]
    with pytest.raises(ValueError, match="not one of the classes"):
        confusion_matrix(["A"], ["X"], ["A", "B"])


def test_report_agreement_block_counts_ties_and_lists_confident_disagreements() -> None:
    def vote(judge: str, choice: str, conf: float) -> JudgeVote:
        return JudgeVote(
            judge=judge, mode="sc", choice=choice, confidence=conf, p_a=conf if choice == "A" else 1 - conf
        )

    items = []
    for i in range(12):
        label = "A" if i % 2 == 0 else "B"
        # j1 always A at 0.9 (wrong on B items); j2 always B at 0.9: majority ties on every item
        items.append(
            JudgedItem(
                item=PairwiseItem(id=f"x{i}", question="q", answer_a="a", answer_b="b", label=label),
                votes=[vote("j1", "A", 0.9 - i / 100), vote("j2", "B", 0.9 - i / 100)],
            )
        )
    evaluation = evaluate(items, options=EvaluationOptions(methods=("majority",), n_bootstrap=10))
    by_name = {row.name: row for row in evaluation.agreement}
    assert by_name["majority"].confusion == [[0, 0, 6, 0], [0, 0, 6, 0]]  # every answer a tie
    assert evaluation.row("majority").row.n_ties == 12
    assert by_name["j1"].confusion == [[6, 0, 0, 0], [6, 0, 0, 0]] and by_name["j1"].kappa == pytest.approx(0.0)
    worst = by_name["j1"].disagreements
    assert [d.item_id for d in worst] == ["x1", "x3", "x5", "x7", "x9"]  # most confident first
    assert (worst[0].answer, worst[0].label, worst[0].confidence) == ("A", "B", pytest.approx(0.89))
    assert evaluation.judges_alpha == pytest.approx(krippendorff_alpha_nominal([["A", "B"]] * 12))
