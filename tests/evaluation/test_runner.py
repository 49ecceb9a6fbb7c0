"""The evaluation runner: JudgeBench figures, the stacked-vs-majority claim, honest cross-fitting."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from judgefuse.evaluation import runner
from judgefuse.evaluation.loaders import load
from judgefuse.evaluation.runner import Evaluation, EvaluationOptions, evaluate
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem

# data README: "Recorded accuracy by the JudgeBench rule"
README_ACCURACY = {
    "arena_hard:o1-mini": 0.657,
    "reward_model:Skywork-Reward-Gemma-2-27B": 0.643,
    "reward_model:internlm2-20b-reward": 0.634,
    "reward_model:Skywork-Reward-Llama-3.1-8B": 0.623,
    "reward_model:GRM-Gemma-2B-rewardmodel-ft": 0.594,
    "reward_model:internlm2-7b-reward": 0.594,
}
PAIRS_FILE = "dataset=judgebench,response_model=gpt-4o-2024-05-13.jsonl"


@pytest.fixture(scope="module")
def judgebench_items(shared_data: Path) -> list[JudgedItem]:
    return load(shared_data / "judgebench")


@pytest.fixture(scope="module")
def judgebench_eval(judgebench_items: list[JudgedItem]) -> Evaluation:
    return evaluate(judgebench_items, options=EvaluationOptions(n_bootstrap=20))


def test_judgebench_judge_accuracy_matches_readme(judgebench_eval: Evaluation) -> None:
    assert judgebench_eval.n_items == judgebench_eval.n_labelled == 350
    judges = [report for report in judgebench_eval.rows if report.row.kind == "judge"]
    assert len(judges) == 10
    for name, expected in README_ACCURACY.items():
        report = judgebench_eval.row(name)
        assert report.row.correct.size == 350
        assert report.metrics["accuracy"] == pytest.approx(expected, abs=0.001), name
    rubric = [r for r in judges if r.row.name.startswith(("rubric", "no_rubric"))]
    assert len(rubric) == 4
    for report in rubric:  # README: "the rubric runs 0.43-0.45"
        assert 0.425 <= report.metrics["accuracy"] <= 0.455, report.row.name


def test_judgebench_categories(judgebench_eval: Evaluation, shared_data: Path) -> None:
    sources = [
        json.loads(text)["source"]
        for text in (shared_data / "judgebench" / PAIRS_FILE).read_text(encoding="utf-8").splitlines()
        if text.strip()
    ]
    expected = Counter(source.split("-")[0] for source in sources)
    assert expected == {"mmlu": 154, "livebench": 154, "livecodebench": 42}
    assert judgebench_eval.categories == sorted(expected)
    for report in judgebench_eval.rows:
        counts = {category: int(m["n"]) for category, m in report.per_category.items()}
        assert counts == dict(expected), report.row.name
        assert sum(counts.values()) == 350
        # the per-category accuracies must recombine to the overall accuracy
        overall = sum(m["accuracy"] * m["n"] for m in report.per_category.values()) / 350
        assert overall == pytest.approx(report.metrics["accuracy"], abs=1e-12)


def test_judgebench_stacked_beats_majority(judgebench_eval: Evaluation) -> None:
    stacked, majority = judgebench_eval.row("stacked"), judgebench_eval.row("majority")
    acc_s, acc_m = stacked.metrics["accuracy"], majority.metrics["accuracy"]
    brier_s, brier_m = stacked.metrics["brier"], majority.metrics["brier"]
    print(
        f"\nJudgeBench stacked (cross-fitted) acc {acc_s:.4f} brier {brier_s:.4f} ece {stacked.metrics['ece']:.4f}"
        f" | majority acc {acc_m:.4f} brier {brier_m:.4f} ece {majority.metrics['ece']:.4f}"
        f" | helped/harmed {stacked.helped_harmed}"
    )
    assert stacked.row.correct.size == majority.row.correct.size == 350
    assert acc_s >= acc_m + 0.03
    assert brier_s < brier_m
    counts = stacked.helped_harmed
    assert counts is not None
    assert counts.n == 350
    assert counts.helped - counts.harmed == round((acc_s - acc_m) * 350)
    assert judgebench_eval.skipped_methods == {}


def test_judgebench_stacked_with_shuffled_labels_is_chance(judgebench_items: list[JudgedItem]) -> None:
    """With labels permuted the votes carry no information about them: no learned row may look good."""
    rng = random.Random(7)
    labels = [judged.item.label for judged in judgebench_items]
    rng.shuffle(labels)
    shuffled = [
        judged.model_copy(update={"item": judged.item.model_copy(update={"label": label})})
        for judged, label in zip(judgebench_items, labels, strict=True)
    ]
    evaluation = evaluate(shuffled, options=EvaluationOptions(methods=("stacked", "majority+isotonic"), n_bootstrap=10))
    base_rate = max(Counter(labels).values()) / len(labels)
    for name in ("stacked", "majority+isotonic"):
        accuracy = evaluation.row(name).metrics["accuracy"]
        print(f"shuffled labels: {name} acc {accuracy:.3f} (majority class {base_rate:.3f})")
        assert 0.35 <= accuracy <= base_rate + 0.07, name


# ------------------------------------------------------------------ synthetic: no information at all
def _noise_items(n: int, seed: int) -> list[JudgedItem]:
    rng = random.Random(seed)
    items = []
    for i in range(n):
        votes = [
            JudgeVote.from_p_a(judge, "recorded", rng.uniform(0.02, 0.98), signals={"s": rng.gauss(0, 1)})
            for judge in ("j1", "j2", "j3")
        ]
        label = "A" if rng.random() < 0.5 else "B"
        items.append(JudgedItem(item=PairwiseItem(id=f"x{i}", label=label), votes=votes))
    return items


def test_cross_fitted_stacking_on_noise_is_chance() -> None:
    items = _noise_items(400, seed=3)
    methods = ("majority", "stacked", "majority+platt", "mean_probability")
    evaluation = evaluate(items, options=EvaluationOptions(methods=methods, n_bootstrap=10))
    stacked = evaluation.row("stacked")
    assert stacked.row.correct.size == 400 == evaluation.n_labelled
    assert abs(stacked.metrics["accuracy"] - 0.5) < 0.1, stacked.metrics["accuracy"]
    majority_acc = evaluation.row("majority").metrics["accuracy"]
    for report in evaluation.rows:
        if report.row.kind == "judge":
            assert report.helped_harmed is None
            continue
        if report.row.name == "majority":
            assert report.helped_harmed is None
            continue
        counts = report.helped_harmed
        assert counts is not None
        assert counts.helped + counts.harmed + counts.both_right + counts.both_wrong == 400
        # net = the accuracy difference in items
        assert counts.helped - counts.harmed == round((report.metrics["accuracy"] - majority_acc) * 400)


class _Memorizer:
    """A 'learned' method that memorises each item's label: perfect in-sample, useless held out."""

    requires_fit = True
    name = "memorize"

    def __init__(self, log: list[_Memorizer]) -> None:
        self.memory: dict[str, str] = {}
        self.predicted: set[str] = set()
        log.append(self)

    def fit(self, batches: Sequence[Sequence[JudgeVote]], labels: Sequence[str]) -> _Memorizer:
        self.memory = {batch[0].raw: label for batch, label in zip(batches, labels, strict=True)}
        return self

    def __call__(self, votes: Sequence[JudgeVote]) -> Verdict:
        key = votes[0].raw
        self.predicted.add(key)
        label = self.memory.get(key)
        if label is None:
            return Verdict(choice=None, confidence=0.5, p_a=0.5, method=self.name, votes=list(votes))
        return Verdict(choice=label, confidence=1.0, p_a=1.0 if label == "A" else 0.0, method=self.name, votes=list(votes))


def test_cross_fitting_never_sees_the_items_own_label(monkeypatch: pytest.MonkeyPatch) -> None:
    items = _noise_items(200, seed=11)
    items = [
        judged.model_copy(update={"votes": [v.model_copy(update={"raw": judged.item.id}) for v in judged.votes]})
        for judged in items
    ]
    instances: list[_Memorizer] = []
    real_get_method = runner.get_method

    def fake_get_method(name: str, **options: object) -> object:
        return _Memorizer(instances) if name == "memorize" else real_get_method(name, **options)

    monkeypatch.setattr(runner, "get_method", fake_get_method)
    evaluation = evaluate(items, options=EvaluationOptions(methods=("memorize",), n_folds=5, n_bootstrap=10))
    row = evaluation.row("memorize")
    # every item scored, by a model that had not memorised it: all undecided
    assert row.row.correct.size == 200
    assert row.row.n_invalid == 200
    assert row.metrics["accuracy"] == 0.0
    fitted = [m for m in instances if m.memory]
    assert len(fitted) == 5
    seen_predicted: set[str] = set()
    for model in fitted:
        assert model.predicted, "every fold predicts its held-out items"
        assert not (model.predicted & set(model.memory)), "a fold predicted an item it was fitted on"
        assert len(model.memory) + len(model.predicted) == 200
        seen_predicted |= model.predicted
    assert seen_predicted == {judged.item.id for judged in items}


def test_no_labels_or_no_votes_is_an_error() -> None:
    unlabelled = [JudgedItem(item=PairwiseItem(id="u"), votes=[JudgeVote.from_p_a("j", "recorded", 0.7)])]
    with pytest.raises(runner.EvaluationError, match="no labelled items"):
        evaluate(unlabelled)
    voteless = [JudgedItem(item=PairwiseItem(id="v", label="A"))]
    with pytest.raises(runner.EvaluationError, match="no votes"):
        evaluate(voteless)


def test_too_few_labels_skips_learned_methods() -> None:
    items = _noise_items(6, seed=5)
    evaluation = evaluate(items, options=EvaluationOptions(methods=("majority", "stacked"), n_bootstrap=10))
    assert "stacked" in evaluation.skipped_methods
    assert [r.row.name for r in evaluation.rows if r.row.kind == "fusion"] == ["majority"]
