"""Stacked fusion on synthetic panels, and cross-fitting without label leakage."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from judgefuse.fusion import (
    NotEnoughLabels,
    NotFitted,
    StackedFusion,
    Verdict,
    cross_fit_predict,
    fold_indices,
    get_method,
    majority,
)
from judgefuse.judges.types import JudgeVote


def sigmoid(x: np.ndarray | float) -> np.ndarray | float:
    return 1.0 / (1.0 + np.exp(-x))


def synthetic(n: int = 600, seed: int = 0) -> tuple[list[list[JudgeVote]], list[str]]:
    """One informative judge (about 85% right) and two noise judges (coin flips, confident)."""
    rng = np.random.default_rng(seed)
    labels = ["A" if rng.random() < 0.5 else "B" for _ in range(n)]
    batches = []
    for label in labels:
        sign = 1.0 if label == "A" else -1.0
        good = float(sigmoid(1.8 * sign + rng.normal(0, 1.0)))
        votes = [JudgeVote.from_p_a("good", "recorded", good)]
        for name in ("noise1", "noise2"):
            votes.append(JudgeVote.from_p_a(name, "recorded", float(rng.uniform(0.02, 0.98))))
        batches.append(votes)
    return batches, labels


def accuracy(verdicts: Sequence[Verdict], labels: Sequence[str]) -> float:
    return float(np.mean([v.choice == y for v, y in zip(verdicts, labels, strict=True)]))


def brier(verdicts: Sequence[Verdict], labels: Sequence[str]) -> float:
    return float(
        np.mean([(v.confidence - (v.choice == y)) ** 2 for v, y in zip(verdicts, labels, strict=True)])
    )


def test_learns_informative_judge_and_beats_majority() -> None:
    batches, labels = synthetic()
    model = StackedFusion().fit(batches, labels)
    w = model.coefficients
    assert w["good:logodds"] > 0.5
    assert w["good:logodds"] > 5 * max(abs(w["noise1:logodds"]), abs(w["noise2:logodds"]))

    stacked = cross_fit_predict(StackedFusion, batches, labels)
    voted = [majority(b) for b in batches]
    assert accuracy(stacked, labels) > accuracy(voted, labels) + 0.1
    assert brier(stacked, labels) < brier(voted, labels)


def test_verdict_fields_and_determinism() -> None:
    batches, labels = synthetic(200)
    a = StackedFusion().fit(batches, labels)
    b = StackedFusion().fit(batches, labels)
    assert a.model_version == b.model_version and len(a.model_version or "") == 12
    assert StackedFusion(C=0.01).fit(batches, labels).model_version != a.model_version
    v = a(batches[0])
    assert v.method == "stacked" and v.model_version == a.model_version
    assert v.confidence == pytest.approx(max(v.p_a, 1 - v.p_a))
    assert v.choice == ("A" if v.p_a > 0.5 else "B")
    assert (v.n_valid, v.n_invalid) == (3, 0)
    assert [x.p_a for x in a.predict(batches[:5])] == [a(x).p_a for x in batches[:5]]


def test_missing_unseen_and_abstaining_judges() -> None:
    # 600 labels: at 300 the two noise judges' direction weights (feature set 2) put this item
    # at 0.78 without the informative judge (0.68 with the log-odds alone); at 600 it is 0.51
    batches, labels = synthetic(600)
    model = StackedFusion().fit(batches, labels)
    only_noise = [v for v in batches[0] if v.judge != "good"]
    v = model(only_noise)
    assert any("absent judges" in n and "good" in n for n in v.notes)
    assert 0.3 < v.p_a < 0.7  # without the informative judge the model is unsure

    extra = [*batches[0], JudgeVote.from_p_a("stranger", "recorded", 0.99)]
    v2 = model(extra)
    assert any("unseen" in n and "stranger" in n for n in v2.notes)
    assert v2.p_a == pytest.approx(model(batches[0]).p_a)

    # an abstaining vote that still carries p_a is used
    abstain = JudgeVote.invalid("good", "recorded", "games disagree", p_a=0.95)
    v3 = model([abstain, *batches[0][1:]])
    assert v3.p_a > 0.6 and v3.n_invalid == 1
    empty = model([])
    assert empty.choice is None and empty.p_a == 0.5 and empty.n_valid == 0
    only_strangers = model([JudgeVote.from_p_a("stranger", "recorded", 0.99)])
    assert only_strangers.choice is None and any("undecided" in n for n in only_strangers.notes)


def test_signals_are_standardised_and_used() -> None:
    rng = np.random.default_rng(3)
    n = 400
    labels = ["A" if rng.random() < 0.5 else "B" for _ in range(n)]
    batches = []
    for label in labels:
        sign = 1.0 if label == "A" else -1.0
        # a coin-flip vote whose reward margin (in raw units of ~1000) carries the signal
        margin = 1000.0 * (sign + rng.normal(0, 0.7))
        batches.append(
            [
                JudgeVote.from_p_a("rm", "recorded", float(rng.uniform(0.1, 0.9)), signals={"margin": margin}),
                JudgeVote.from_p_a("other", "recorded", float(rng.uniform(0.1, 0.9))),
            ]
        )
    model = StackedFusion().fit(batches, labels)
    assert "rm:signal:margin" in model.feature_names
    assert model.coefficients["rm:signal:margin"] > 1.0
    out = cross_fit_predict(StackedFusion, batches, labels)
    assert accuracy(out, labels) > 0.85
    no_signals = cross_fit_predict(lambda: StackedFusion(use_signals=False), batches, labels)
    assert accuracy(no_signals, labels) < 0.65


def test_not_enough_labels() -> None:
    batches, labels = synthetic(40)
    with pytest.raises(NotEnoughLabels, match="at least 10"):
        StackedFusion().fit(batches[:5], labels[:5])
    with pytest.raises(NotEnoughLabels, match="single class"):
        StackedFusion().fit(batches, ["A"] * len(batches))
    with pytest.raises(ValueError, match="length mismatch"):
        StackedFusion().fit(batches, labels[:-1])
    with pytest.raises(ValueError, match="'A' or 'B'"):
        StackedFusion().fit(batches, ["C"] * len(batches))
    with pytest.raises(NotFitted):
        StackedFusion()(batches[0])
    with pytest.raises(NotEnoughLabels, match="5-fold"):
        cross_fit_predict(StackedFusion, batches[:12], ["A"] * 9 + ["B"] * 3)


class Memoriser:
    """A learned method that remembers each training item's label by its ``uid`` signal."""

    requires_fit = True
    name = "memoriser"

    def __init__(self) -> None:
        self.memory: dict[float, str] = {}

    def fit(self, batches, labels):
        self.memory = {b[0].signals["uid"]: y for b, y in zip(batches, labels, strict=True)}
        return self

    def __call__(self, votes):
        seen = self.memory.get(votes[0].signals["uid"])
        p = 0.5 if seen is None else (1.0 if seen == "A" else 0.0)
        return Verdict(choice="A" if p >= 0.5 else "B", confidence=max(p, 1 - p), p_a=p, method=self.name)


def test_cross_fit_never_scores_an_item_with_a_model_that_saw_its_label() -> None:
    batches, labels = synthetic(100, seed=5)
    batches = [
        [v.model_copy(update={"signals": {"uid": float(i)}}) for v in b] for i, b in enumerate(batches)
    ]
    in_sample = Memoriser().fit(batches, labels)
    assert accuracy([in_sample(b) for b in batches], labels) == 1.0  # it does memorise
    out = cross_fit_predict(Memoriser, batches, labels, n_folds=5, seed=1)
    assert all(v.p_a == 0.5 for v in out)  # never seen at scoring time
    assert all(any("fold" in n for n in v.notes) for v in out)

    folds = fold_indices(labels, n_folds=5, seed=1)
    assert sorted(np.concatenate(folds).tolist()) == list(range(100))
    n_a = sum(1 for y in labels if y == "A")
    for test in folds:
        share = sum(1 for i in test if labels[i] == "A") / len(test)
        assert abs(share - n_a / 100) < 0.05  # stratified


def test_cross_fit_stacked_with_a_label_memorising_feature() -> None:
    """Each item gets its own judge that states the item's label: a pure memorisation feature."""
    rng = np.random.default_rng(11)
    labels = ["A" if rng.random() < 0.5 else "B" for _ in range(60)]
    batches = [
        [JudgeVote.from_p_a(f"item{i}", "recorded", 0.99 if y == "A" else 0.01)]
        for i, y in enumerate(labels)
    ]
    in_sample = StackedFusion(C=100.0).fit(batches, labels)
    assert accuracy(in_sample.predict(batches), labels) == 1.0  # the feature memorises

    out = cross_fit_predict(lambda: StackedFusion(C=100.0), batches, labels, n_folds=5, seed=0)
    for test in fold_indices(labels, n_folds=5, seed=0):
        # nothing about a held-out item was seen: its only judge is unknown to the fold's model
        assert all(out[i].choice is None and out[i].p_a == 0.5 for i in test)
        assert all(any("unseen" in n for n in out[i].notes) for i in test)
    assert accuracy(out, labels) == 0.0  # undecided everywhere, never a memorised answer


def test_cross_fit_order_seed_and_non_learned() -> None:
    batches, labels = synthetic(150)
    a = cross_fit_predict("stacked", batches, labels, seed=0)
    b = cross_fit_predict(StackedFusion, batches, labels, seed=0)
    c = cross_fit_predict(StackedFusion, batches, labels, seed=1)
    assert [v.p_a for v in a] == [v.p_a for v in b]
    assert [v.p_a for v in a] != [v.p_a for v in c]
    assert [v.votes for v in a] == batches
    voted = cross_fit_predict("majority", batches, labels)
    assert [v.p_a for v in voted] == [majority(x).p_a for x in batches]
    assert get_method("stacked").requires_fit


# ------------------------------------------------------------------ tie votes
def _tie_panel(n: int, seed: int = 0) -> tuple[list[list[JudgeVote]], list[str]]:
    """j1 is right 75% of the time; j2 says "tie" on 60% of the B items and on 10% of the A
    items, fails (a transport error) on 20% of all items, and otherwise flips a coin."""
    rng = np.random.default_rng(seed)
    batches, labels = [], []
    for _ in range(n):
        truth = "A" if rng.random() < 0.5 else "B"
        right = rng.random() < 0.75
        j1 = JudgeVote(judge="j1", mode="sc", choice=truth if right else ("B" if truth == "A" else "A"),
                       confidence=0.75)
        u = rng.random()
        if u < (0.6 if truth == "B" else 0.1):
            j2 = JudgeVote.tied("j2", "sc")
        elif rng.random() < 0.2:
            j2 = JudgeVote.invalid("j2", "sc", "timeout")
        else:
            j2 = JudgeVote(judge="j2", mode="sc", choice="A" if rng.random() < 0.5 else "B", confidence=0.6)
        batches.append([j1, j2])
        labels.append(truth)
    return batches, labels


def test_a_tie_vote_is_a_signed_zero_with_its_own_flag_not_a_failure() -> None:
    batches, labels = _tie_panel(40)
    model = StackedFusion().fit(batches, labels)
    assert model.feature_names[:4] == ["j1:logodds", "j1:missing", "j1:invalid", "j1:tie"]
    j1 = JudgeVote(judge="j1", mode="sc", choice="A", confidence=0.75)
    rows = {name: model._matrix([[j1, vote]])[0][0, 5:9] for name, vote in (
        ("tie", JudgeVote.tied("j2", "sc")),
        ("failed", JudgeVote.invalid("j2", "sc", "timeout")),
        ("abstained with p_a", JudgeVote.invalid("j2", "sc", "games disagree", p_a=0.5)),
    )}
    # logodds, missing, invalid, tie
    assert rows["tie"].tolist() == [0.0, 0.0, 0.0, 1.0]
    assert rows["failed"].tolist() == [0.0, 1.0, 1.0, 0.0]
    assert rows["abstained with p_a"].tolist() == [0.0, 0.0, 1.0, 0.0]
    # a position-swapped pair (one tie, one vote for A): half a tie, not a failure
    half = model._matrix([[j1, JudgeVote.tied("j2", "sc"), JudgeVote.from_p_a("j2", "sc", 0.8)]])[0][0, 5:9]
    assert half[2:].tolist() == [0.0, 0.5]


def test_the_model_learns_what_a_judges_tie_means() -> None:
    """j2's tie is evidence for B; before ties had their own column they shared the
    ``invalid`` flag with j2's failures, which carry nothing, and the model could not tell."""
    batches, labels = _tie_panel(600, seed=1)
    model = StackedFusion().fit(batches, labels)
    assert model.coefficients["j2:tie"] < -1.0
    assert abs(model.coefficients["j2:invalid"]) < 0.5
    j1 = JudgeVote(judge="j1", mode="sc", choice="A", confidence=0.75)
    tie = model([j1, JudgeVote.tied("j2", "sc")]).p_a
    failed = model([j1, JudgeVote.invalid("j2", "sc", "timeout")]).p_a
    assert failed - tie > 0.2
    # against the same panel with every tie recorded as a failure (the old reading)
    def as_failures(panel: list[list[JudgeVote]]) -> list[list[JudgeVote]]:
        return [[JudgeVote.invalid(v.judge, "sc", "tie") if v.tie else v for v in b] for b in panel]

    old = StackedFusion().fit(as_failures(batches), labels)
    test, test_labels = _tie_panel(2000, seed=2)
    assert brier(model.predict(test), test_labels) < brier(old.predict(as_failures(test)), test_labels) - 0.01


def test_a_model_saved_before_the_tie_column_restores_with_its_old_reading() -> None:
    """Stored three-column parameters (log-odds, missing, invalid) still serve: a tie there
    counts as ``invalid``, as it did when the model was fitted."""
    j1 = JudgeVote(judge="j1", mode="sc", choice="A", confidence=0.75)
    params = {
        "format": "judgefuse.stacked/1", "C": 1.0, "use_signals": True, "min_labels": 10,
        "judges": ["j1", "j2"], "signal_keys": [],
        "feature_names": ["j1:logodds", "j1:missing", "j1:invalid", "j2:logodds", "j2:missing", "j2:invalid"],
        "coef": [1.0, 0.0, 0.0, 1.0, 0.0, -2.0], "intercept": 0.0,
        "signal_mean": [], "signal_std": [], "model_version": "legacy000000",
    }
    model = StackedFusion.from_params(params)
    z = float(np.log(0.75 / 0.25))
    assert model([j1, JudgeVote.tied("j2", "sc")]).p_a == pytest.approx(sigmoid(z - 2.0))
    assert model([j1, JudgeVote.invalid("j2", "sc", "timeout")]).p_a == pytest.approx(sigmoid(z - 2.0))
    assert model([j1, JudgeVote.from_p_a("j2", "sc", 0.75)]).p_a == pytest.approx(sigmoid(2 * z))


def _saved_models() -> dict:
    """Stacked and offset_stacked fitted at 7b83de4 (feature set 1, no ``feature_set`` key in their
    parameters): the saved parameters, a probe panel (ties, failures, absent and unseen judges,
    a judge voting twice, signals) and what each model answered on it then."""
    import json
    from pathlib import Path

    return json.loads((Path(__file__).parent / "fixtures" / "stacked_feature_set_1.json").read_text())


@pytest.mark.parametrize("name", ["stacked", "offset_stacked"])
def test_a_model_saved_with_feature_set_1_predicts_exactly_as_it_did(name: str) -> None:
    """An upgrade must not change a served model's answers: a model saved before the direction
    and confidence columns restores with its four columns per judge and the same P(A)."""
    from judgefuse.fusion.capabilities import method_params, restore_method

    saved = _saved_models()
    probe = [[JudgeVote.model_validate(v) for v in batch] for batch in saved["probe"]]
    params = saved["models"][name]["params"]
    assert "feature_set" not in params
    model = restore_method(name, params)
    assert model.feature_set == 1
    assert model.predict_p_a(probe).tolist() == saved["models"][name]["p_a"]
    assert [v.choice for v in model.predict(probe)] == saved["models"][name]["choices"]
    again = restore_method(name, method_params(model))  # saved again: now with its feature set named
    assert method_params(model)["feature_set"] == 1
    assert again.predict_p_a(probe).tolist() == saved["models"][name]["p_a"]
    assert again.model_version == params["model_version"]


def test_feature_sets_are_checked_on_restore() -> None:
    params = _saved_models()["models"]["stacked"]["params"]
    with pytest.raises(ValueError, match="unknown feature set"):
        StackedFusion.from_params({**params, "feature_set": 99})
    with pytest.raises(ValueError, match="do not match feature set 2"):
        StackedFusion.from_params({**params, "feature_set": 2})  # four columns per judge are set 1's
    fitted = StackedFusion().fit(*synthetic(60))
    assert StackedFusion.from_params(fitted.to_params()).predict_p_a(synthetic(5, seed=1)[0]).tolist() == (
        fitted.predict_p_a(synthetic(5, seed=1)[0]).tolist())


def _uninformative_panel(n: int, seed: int) -> tuple[list[list[JudgeVote]], list[str]]:
    """Five independent judges right 60-75% of the time whose confidence is uniform in [0.5, 1]
    whatever they answer (issue 43)."""
    rng = np.random.default_rng(seed)
    batches, labels = [], []
    for _ in range(n):
        truth = "A" if rng.random() < 0.5 else "B"
        votes = []
        for k, skill in enumerate((0.60, 0.6375, 0.675, 0.7125, 0.75)):
            choice = truth if rng.random() < skill else ("B" if truth == "A" else "A")
            votes.append(JudgeVote(judge=f"j{k}", mode="sc", choice=choice, confidence=float(rng.uniform(0.5, 1.0))))
        batches.append(votes)
        labels.append(truth)
    return batches, labels


def test_direction_features_recover_the_vote_when_confidence_is_noise() -> None:
    """With confidence that says nothing, the model must lean on the votes' directions: it is
    then a weighted vote, at least as accurate as majority. Before the direction column it saw
    each vote only as direction x noisy log-odds and lost ~5 points to majority here."""
    batches, labels = _uninformative_panel(4000, seed=5)
    test, test_labels = _uninformative_panel(4000, seed=6)
    model = StackedFusion().fit(batches, labels)
    w = model.coefficients
    for k in range(5):
        assert w[f"j{k}:direction"] > 0.3
        assert abs(w[f"j{k}:logodds"]) < 0.1  # confidence's weight: it carries nothing here
    assert w["j4:direction"] > w["j0:direction"]  # the better judge weighs more
    assert accuracy(model.predict(test), test_labels) >= accuracy([majority(b) for b in test], test_labels)


def test_the_direction_column() -> None:
    model = StackedFusion().fit(*synthetic(60))
    cols = {kind: i for i, kind in enumerate(("logodds", "missing", "invalid", "tie", "direction"))}
    assert model.feature_names[:5] == [f"good:{kind}" for kind in cols]
    assert model.feature_set == 2 and model.to_params()["feature_set"] == 2

    def row(votes: list[JudgeVote]) -> list[float]:
        return model._matrix([votes])[0][0, :5].tolist()

    b = row([JudgeVote(judge="good", mode="sc", choice="B", confidence=0.8)])
    assert b[cols["direction"]] == -1.0 and b[cols["logodds"]] == pytest.approx(-np.log(4.0))
    tie = row([JudgeVote.tied("good", "sc")])
    assert tie[cols["direction"]] == 0.0 and tie[cols["tie"]] == 1.0
    failed = row([JudgeVote.invalid("good", "sc", "timeout")])
    assert failed[cols["direction"]] == 0.0 and failed[cols["invalid"]] == 1.0 and failed[cols["missing"]] == 1.0
    assert row([])[cols["direction"]] == 0.0 and row([])[cols["missing"]] == 1.0
    both = row([JudgeVote(judge="good", mode="sc", choice="A", confidence=0.8), JudgeVote.tied("good", "sc")])
    assert both[cols["direction"]] == 0.5 and both[cols["tie"]] == 0.5
