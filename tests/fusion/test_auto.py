"""``auto``: a fusion method chosen on the labels by cross-validated log-loss
(judgefuse/fusion/auto.py, issue 43)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from judgefuse.fusion import get_method
from judgefuse.fusion.auto import BASES, CANDIDATES, FALLBACK, AutoFusion, _as_columns, choose, complexity, log_losses
from judgefuse.fusion.capabilities import capabilities, method_params, restore_method
from judgefuse.fusion.crossfit import cross_fit_predict, fold_indices
from judgefuse.judges.types import JudgeVote

Panel = tuple[list[list[JudgeVote]], list[str]]


def _other(letter: str) -> str:
    return "B" if letter == "A" else "A"


def _vote(judge: str, choice: str, confidence: float) -> JudgeVote:
    return JudgeVote(judge=judge, mode="sc", choice=choice, confidence=round(confidence, 6))  # type: ignore[arg-type]


def _panel(n: int, seed: int, judge_votes, prior_a: float = 0.5) -> Panel:  # type: ignore[no-untyped-def]
    """``n`` items, each labelled A with probability ``prior_a``, with ``judge_votes(rng, truth)``."""
    rng = np.random.default_rng(seed)
    batches, labels = [], []
    for _ in range(n):
        truth = "A" if rng.random() < prior_a else "B"
        batches.append(judge_votes(rng, truth))
        labels.append(truth)
    return batches, labels


def _independent(accuracies: tuple[float, ...], *, informative: bool = False):  # type: ignore[no-untyped-def]
    """Judges right with their accuracies; confidence uniform in [0.5, 1] whatever they answer,
    or (``informative``) ``sigmoid(|z|)`` of a latent ``z`` whose sign is the answer."""

    def votes(rng: np.random.Generator, truth: str) -> list[JudgeVote]:
        out = []
        for k, accuracy in enumerate(accuracies):
            if informative:
                z = rng.normal((1.0 if truth == "A" else -1.0) * _probit(accuracy), 1.0)
                out.append(_vote(f"j{k}", "A" if z > 0 else "B", 1.0 / (1.0 + math.exp(-abs(z)))))
            else:
                choice = truth if rng.random() < accuracy else _other(truth)
                out.append(_vote(f"j{k}", choice, float(rng.uniform(0.5, 1.0))))
        return out

    return votes


def _probit(p: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


def _copies(rng: np.random.Generator, truth: str) -> list[JudgeVote]:
    """Five judges that nearly always repeat one shared answer (right 75% of the time), each
    sure of it (confidence 0.9-1): a vote share of 1.0, or a mean confidence of 0.95, is right
    only ~75% of the time."""
    shared = truth if rng.random() < 0.75 else _other(truth)
    out = []
    for k in range(5):
        choice = shared if rng.random() < 0.95 else _other(shared)
        out.append(_vote(f"j{k}", choice, float(rng.uniform(0.9, 1.0))))
    return out


def _shared_calibrated(n_judges: int):  # type: ignore[no-untyped-def]
    """Judges that repeat one shared answer with one shared, calibrated confidence: ``c`` uniform
    in [0.5, 1] per item, the shared answer right with probability ``c``, each judge stating
    ``c`` +- 0.03. The mean of the votes' P(A) is then the calibrated posterior itself; a vote
    share is 1.0 on every item, and counting the judges as independent evidence (Dawid-Skene, or
    stacking's sum of log-odds before it learns the copies) is overconfident."""

    def votes(rng: np.random.Generator, truth: str) -> list[JudgeVote]:
        c = float(rng.uniform(0.5, 1.0))
        shared = truth if rng.random() < c else _other(truth)
        return [_vote(f"j{k}", shared, min(max(c + rng.uniform(-0.03, 0.03), 0.5), 0.999)) for k in range(n_judges)]

    return votes


def _base(name: str | None) -> str:
    assert name is not None
    return name.partition("+")[0]


def test_it_is_a_registered_refittable_method() -> None:
    caps = capabilities("auto")
    assert caps.requires_fit and caps.saves_params and caps.refittable
    assert isinstance(get_method("auto"), AutoFusion)
    assert set(CANDIDATES) == {
        f"{b}{r}"
        for b in ("majority", "confidence_weighted", "mean_probability", "dawid_skene", "offset_stacked", "stacked")
        for r in ("", "+platt")
    }


def test_simplest_within_one_standard_error_of_the_best() -> None:
    rng = np.random.default_rng(0)
    base = rng.exponential(0.5, size=400)
    noise = rng.normal(0.0, 0.05, size=400)
    # stacked better than majority by far less than one standard error of the difference
    near = {"majority": base + 0.002 + noise, "stacked": base.copy()}
    chosen, scores = choose(near)
    assert chosen.name == "majority"
    assert scores[0].difference < scores[0].standard_error
    # and by many standard errors: the evidence is beyond noise, the complex one is taken
    far = {"majority": base + 0.05 + noise, "stacked": base.copy()}
    assert choose(far)[0].name == "stacked"
    # equally complex candidates within noise: the lower mean wins
    assert choose({"majority": base + 0.001, "confidence_weighted": base.copy()})[0].name == "confidence_weighted"
    # a base is taken recalibrated unless its raw confidence does better out of fold, however
    # close the raw one is: calibration out of sample is the default
    assert choose({"majority": base + 0.002 + noise, "majority+platt": base.copy()})[0].name == "majority+platt"
    assert choose({"majority": base.copy(), "majority+platt": base + 0.001})[0].name == "majority"
    # a gain of rounding size is no evidence, however small its own standard error: offset
    # stacking whose fit is its rule alone repeats the rule's losses up to the last bits
    rounded = base * (1 + 2.0**-52 * rng.integers(0, 2, size=400))
    assert rounded.mean() < base.mean() + 1e-15 and not np.array_equal(rounded, base)
    assert choose({"offset_stacked": base.copy(), "mean_probability": rounded})[0].name == "mean_probability"
    assert complexity("majority") == complexity("majority+platt") < complexity("dawid_skene")
    assert (
        complexity("dawid_skene") < complexity("offset_stacked") < complexity("stacked") == complexity("stacked+platt")
    )


def test_log_loss_clips_certainty() -> None:
    losses = log_losses(np.array([1.0, 0.0, 0.5]), np.array([0.0, 0.0, 1.0]))
    assert losses[0] == pytest.approx(-math.log(1e-6))
    assert losses[1] == pytest.approx(-math.log(1 - 1e-6))
    assert losses[2] == pytest.approx(math.log(2))


def test_uninformative_confidence_and_equal_judges_choose_a_vote() -> None:
    batches, labels = _panel(200, 1, _independent((0.7, 0.7, 0.7, 0.7, 0.7)))
    method = AutoFusion().fit(batches, labels)
    assert _base(method.chosen) in ("majority", "confidence_weighted", "mean_probability", "dawid_skene"), (
        method.describe()
    )
    assert complexity(method.chosen or "") <= complexity("dawid_skene")


def test_informative_confidence_chooses_stacking() -> None:
    batches, labels = _panel(1000, 2, _independent((0.60, 0.64, 0.68, 0.71, 0.75), informative=True))
    method = AutoFusion().fit(batches, labels)
    assert _base(method.chosen) in ("stacked", "offset_stacked"), method.describe()
    by_name = {score.name: score for score in method.scores}
    assert by_name["majority"].log_loss > by_name[method.chosen or ""].log_loss + 0.05


def test_one_strong_judge_among_weak_ones_chooses_dawid_skene() -> None:
    """Dawid-Skene learns from agreement alone that one judge is strong; with 300 labels the
    learners are not better by more than the noise."""
    batches, labels = _panel(300, 3, _independent((0.90, 0.60, 0.62, 0.64, 0.66)))
    method = AutoFusion().fit(batches, labels)
    assert _base(method.chosen) == "dawid_skene", method.describe()


def test_calibrated_confidence_shared_by_copies_chooses_mean_probability() -> None:
    """Five copies of one calibrated confidence, 200 labels: mean_probability's P(A) is the
    posterior; the vote rules (a share of 1.0 everywhere) and dawid_skene carry no confidence
    that a recalibrator could rank by, and the learners can at best reproduce the rule (offset
    stacking's rule *is* it), so the simplest candidate at the best log-loss is the rule.
    Seeds 10-19: mean_probability (raw or +platt) chosen on 10 of 10; 9 of 10 before choose() took a gain
    of rounding size as no evidence (seed 18: offset_stacked, whose rule-only fit tied
    mean_probability's per-item losses up to 3.2e-17)."""
    batches, labels = _panel(200, 11, _shared_calibrated(5))
    method = AutoFusion().fit(batches, labels)
    assert _base(method.chosen) == "mean_probability", method.describe()
    by_name = {score.name: score for score in method.scores}
    for rule in ("majority+platt", "confidence_weighted+platt", "dawid_skene+platt"):
        assert by_name[rule].log_loss > by_name["mean_probability"].log_loss + 0.05, (rule, method.describe())


def _labelled_by_the_weighted_vote(n: int, seed: int) -> Panel:
    """Four judges answering A or B at random, each sure (confidence 0.9-1) or unsure (0.5-0.6)
    half the time; the label is A with probability ``confidence_weighted``'s P(A) (the stated
    confidence of A's voters over everyone's). That rule is then the posterior itself: no
    candidate can beat its log-loss but by chance, and the other rules weigh the votes wrongly
    (``majority`` equally; ``mean_probability`` by ``confidence - 0.5``, so an unsure vote counts
    for almost nothing) and leave a 2-2 split at 0.5 or near it."""
    rng = np.random.default_rng(seed)
    batches, labels = [], []
    for _ in range(n):
        votes = []
        for k in range(4):
            choice = "A" if rng.random() < 0.5 else "B"
            sure = rng.random() >= 0.5
            votes.append(_vote(f"j{k}", choice, float(rng.uniform(0.9, 1.0) if sure else rng.uniform(0.5, 0.6))))
        weight_a = sum(v.confidence or 0.0 for v in votes if v.choice == "A")
        p_a = weight_a / sum(v.confidence or 0.0 for v in votes)
        batches.append(votes)
        labels.append("A" if rng.random() < p_a else "B")
    return batches, labels


def test_labels_that_follow_the_confidence_weighted_vote_choose_it() -> None:
    """500 labels: confidence_weighted (raw or +platt) chosen with seeds 10-19 on 10 of 10 (at
    300 labels on 9 of 10: seed 14 chose majority, whose mean log-loss was lower by chance;
    rules of equal complexity are ranked by their means alone)."""
    batches, labels = _labelled_by_the_weighted_vote(500, 12)
    method = AutoFusion().fit(batches, labels)
    assert _base(method.chosen) == "confidence_weighted", method.describe()


def test_a_label_prior_the_rule_ignores_chooses_stacked_over_offset_stacked() -> None:
    """Eight copies of one calibrated confidence, 80% of the labels A, 250 labels. The rule's
    log-odds (mean_probability's) are right up to the base rate, which no label-free candidate
    and no recalibrator of a confidence (the same map for either letter) can learn; stacking fits
    its intercept freely, offset stacking shrinks its intercept toward the rule's 0 (penalty at
    least INTERCEPT_FLOOR), so stacked is better by more than the noise. Seeds 10-19: stacked on
    9 of 10 (seed 18: offset_stacked, 0.010 +- 0.013 behind); at 400 labels with 75% A, seeds
    10-14: 5 of 5."""
    batches, labels = _panel(250, 12, _shared_calibrated(8), prior_a=0.8)
    method = AutoFusion().fit(batches, labels)
    assert method.chosen == "stacked", method.describe()
    by_name = {score.name: score for score in method.scores}
    offset = min(by_name["offset_stacked"], by_name["offset_stacked+platt"], key=lambda score: score.log_loss)
    assert offset.difference > offset.standard_error, method.describe()


def _sparse_calibrated(n_pool: int, per_item: int):  # type: ignore[no-untyped-def]
    """``per_item`` judges of a pool of ``n_pool`` vote on each item, each with its own calibrated
    confidence (``c`` uniform in [0.5, 1], right with probability ``c``)."""

    def votes(rng: np.random.Generator, truth: str) -> list[JudgeVote]:
        out = []
        for k in sorted(rng.choice(n_pool, size=per_item, replace=False)):
            c = float(rng.uniform(0.5, 1.0))
            out.append(_vote(f"j{k:02d}", truth if rng.random() < c else _other(truth), c))
        return out

    return votes


def test_a_large_sparse_pool_chooses_offset_stacked_over_stacked() -> None:
    """3 of 20 calibrated judges on each item, 80% of the labels A, 400 labels. The rule
    (the mean of whichever votes an item has) is nearly right: what it lacks is the base rate
    and a scale (a mean of calibrated P(A)s is underconfident), a few numbers that offset
    stacking learns on top of it and no rule or recalibrator can (the base rate). Stacking learns
    every judge's weights from scratch, ~60 items per judge for 100 per-judge features, and is
    worse. Seeds 10-19: offset_stacked (raw or +platt) chosen on 10 of 10; stacked behind it by
    more than one standard error on 8 of them (seeds 15 and 16 within it: offset_stacked is
    then taken as the simpler)."""
    batches, labels = _panel(400, 10, _sparse_calibrated(20, 3), prior_a=0.8)
    method = AutoFusion().fit(batches, labels)
    assert _base(method.chosen) == "offset_stacked", method.describe()
    by_name = {score.name: score for score in method.scores}
    stacked = min(by_name["stacked"], by_name["stacked+platt"], key=lambda score: score.log_loss)
    assert stacked.difference > stacked.standard_error, method.describe()


def test_agreeing_copies_are_recalibrated() -> None:
    """Five copies of one sure answer: every raw rule is near certain on most items, right 75% of
    the time; the choice is recalibrated, and its confidence on unanimous items is near 0.75."""
    batches, labels = _panel(400, 4, _copies)
    method = AutoFusion().fit(batches, labels)
    assert method.chosen is not None and method.chosen.endswith("+platt"), method.describe()
    unanimous = [b for b in batches if len({v.choice for v in b}) == 1]
    confidences = [v.confidence for v in method.predict(unanimous)]
    assert 0.65 < float(np.mean(confidences)) < 0.85
    assert all(v.method == "auto" and v.model_version == method.model_version for v in method.predict(batches[:5]))


@pytest.mark.parametrize(
    ("seed", "judge_votes", "n"),
    [(3, _independent((0.90, 0.60, 0.62, 0.64, 0.66)), 300), (2, _independent((0.6, 0.7, 0.75), informative=True), 400)],
)
def test_the_comparison_over_arrays_is_the_per_item_one(seed: int, judge_votes, n: int) -> None:  # type: ignore[no-untyped-def]
    """Every candidate's out-of-fold log-loss is what cross_fit_predict's per-item verdicts give;
    predict_p_a is each item's own verdict's P(A)."""
    batches, labels = _panel(n, seed, judge_votes)
    method = AutoFusion().fit(batches, labels)
    by_name = {score.name: score for score in method.scores}
    y = np.asarray([label == "A" for label in labels], dtype=float)
    folds = fold_indices(labels, n_folds=5, seed=0)  # type: ignore[arg-type]
    for base in BASES:
        verdicts = cross_fit_predict(base, batches, labels, n_folds=5, seed=0)  # type: ignore[arg-type]
        p_a = np.asarray([v.p_a if v.choice is not None else 0.5 for v in verdicts])
        assert by_name[base].log_loss == pytest.approx(float(log_losses(p_a, y).mean()), rel=0, abs=1e-12), base
        recalibrated = method._recalibrated_out_of_fold(_as_columns(base, verdicts), y, folds)
        assert by_name[f"{base}+platt"].log_loss == pytest.approx(
            float(log_losses(recalibrated, y).mean()), rel=0, abs=1e-12
        ), base
    np.testing.assert_array_equal(method.predict_p_a(batches), [method(votes).p_a for votes in batches])


def test_too_few_labels_to_fold_fall_back_to_the_cold_start_rule() -> None:
    batches, labels = _panel(12, 5, _independent((0.7, 0.7, 0.7)))
    labels = ["A"] * 11 + ["B"]
    method = AutoFusion().fit(batches, labels)
    assert method.chosen == FALLBACK and method.scores == []
    assert "too few to compare" in method.reason


@pytest.mark.parametrize(
    ("seed", "judge_votes", "n"),
    [
        (1, _independent((0.7, 0.7, 0.7, 0.7, 0.7)), 200),
        (3, _independent((0.90, 0.60, 0.62, 0.64, 0.66)), 300),
        (4, _copies, 400),
        (2, _independent((0.60, 0.64, 0.68, 0.71, 0.75), informative=True), 600),
    ],
)
def test_save_and_restore_gives_the_same_verdicts(seed: int, judge_votes, n: int) -> None:  # type: ignore[no-untyped-def]
    batches, labels = _panel(n, seed, judge_votes)
    method = AutoFusion().fit(batches, labels)
    params = json.loads(json.dumps(method_params(method)))  # what a model record stores
    restored = restore_method("auto", params)
    assert isinstance(restored, AutoFusion)
    assert restored.chosen == method.chosen and restored.model_version == method.model_version
    assert [s.name for s in restored.scores] == [s.name for s in method.scores]
    before, after = method.predict(batches), restored.predict(batches)
    assert [v.choice for v in before] == [v.choice for v in after]
    assert np.allclose([v.p_a for v in before], [v.p_a for v in after], atol=1e-12)
    assert restored.describe() == method.describe()


def test_a_recalibrated_confidence_below_one_half_answers_the_other_letter() -> None:
    method = AutoFusion()
    method.fit(*_panel(100, 6, _independent((0.7, 0.7, 0.7))))
    low = get_method("majority")([_vote("j0", "A", 0.9), _vote("j1", "A", 0.8), _vote("j2", "B", 0.7)])
    low = low.model_copy(update={"confidence": 0.3, "p_a": 0.3})
    flipped = method._stamp(low, "auto: test")
    assert (flipped.choice, flipped.confidence, flipped.p_a) == ("B", pytest.approx(0.7), 0.3)


def test_refuses_unknown_params_and_unfitted_use() -> None:
    with pytest.raises(ValueError, match="unknown auto model format"):
        AutoFusion.from_params({"format": "other"})
    with pytest.raises(Exception, match="must be fitted"):
        AutoFusion().predict([[_vote("j0", "A", 0.9)]])


def _with_ties(n: int, seed: int) -> tuple[list[list[JudgeVote]], list[str]]:
    """Five judges (0.6-0.75); 20% of the labels are ties, on which each judge says tie with
    probability 0.4 (5% on A/B items), else A or B at random."""
    rng = np.random.default_rng(seed)
    batches, labels = [], []
    for _ in range(n):
        truth = "tie" if rng.random() < 0.2 else ("A" if rng.random() < 0.5 else "B")
        votes = []
        for k, accuracy in enumerate((0.60, 0.64, 0.68, 0.71, 0.75)):
            if rng.random() < (0.4 if truth == "tie" else 0.05):
                votes.append(JudgeVote(judge=f"j{k}", mode="sc", tie=True))
                continue
            if truth == "tie":
                choice = "A" if rng.random() < 0.5 else "B"
            else:
                choice = truth if rng.random() < accuracy else _other(truth)
            votes.append(_vote(f"j{k}", choice, float(rng.uniform(0.5, 1.0))))
        batches.append(votes)
        labels.append(truth)
    return batches, labels


def test_tie_labels_teach_it_to_answer_tie() -> None:
    from judgefuse.fusion.verdict import is_tie

    batches, labels = _with_ties(600, 7)
    method = AutoFusion().fit(batches, labels)
    assert method.tie_model is not None and method.tie_model["n_tie_labels"] == labels.count("tie")
    assert method.n_labels == len(labels) - labels.count("tie")  # the A/B choice is fitted on A/B labels
    test_batches, test_labels = _with_ties(600, 8)
    verdicts = method.predict(test_batches)
    answers = ["tie" if is_tie(v) else v.choice for v in verdicts]
    tie_answers = [label for answer, label in zip(answers, test_labels, strict=True) if answer == "tie"]
    assert len(tie_answers) > 40 and tie_answers.count("tie") / len(tie_answers) > 0.7
    three_way = np.mean([a == label for a, label in zip(answers, test_labels, strict=True)])
    without = np.mean([v.choice == label for v, label in zip(AutoFusion().fit(
        [b for b, label in zip(batches, labels, strict=True) if label != "tie"],
        [label for label in labels if label != "tie"]).predict(test_batches), test_labels, strict=True)])  # fmt: skip
    assert three_way > without + 0.05
    restored = restore_method("auto", json.loads(json.dumps(method_params(method))))
    assert isinstance(restored, AutoFusion) and restored.tie_model == method.tie_model
    assert [is_tie(v) for v in restored.predict(test_batches)] == [is_tie(v) for v in verdicts]
    assert restored.model_version == method.model_version


def test_cross_fitting_over_tie_labels_holds_every_item_out_once() -> None:
    from judgefuse.fusion.crossfit import outcome_folds

    outcomes = ["A"] * 20 + ["B"] * 15 + ["tie"] * 7 + ["both_bad"] * 2
    folds = outcome_folds(outcomes, n_folds=5, seed=3)
    held = np.sort(np.concatenate(folds))
    assert held.tolist() == list(range(len(outcomes)))
    for fold in folds:
        chosen = [outcomes[i] for i in fold]
        assert chosen.count("A") == 4 and chosen.count("B") == 3
    with pytest.raises(Exception, match="3 B labels"):
        outcome_folds(["A"] * 10 + ["B"] * 3, n_folds=5)
