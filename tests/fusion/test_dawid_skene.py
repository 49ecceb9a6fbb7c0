"""Dawid-Skene fusion: recovers known confusion matrices from unlabelled synthetic votes."""

from __future__ import annotations

import numpy as np
import pytest

from judgefuse.fusion import get_method
from judgefuse.fusion.dawid_skene import DawidSkeneFusion, fit_em, observations
from judgefuse.fusion.voting import majority
from judgefuse.judges.types import JudgeVote

# (P(says A | truth A), P(says B | truth B)) per judge: unequal, one asymmetric, one near chance.
TRUE_CONFUSION = {"strong": (0.92, 0.88), "biased_a": (0.95, 0.60), "weak": (0.62, 0.58), "mid": (0.80, 0.75)}
PRIOR_A = 0.55


def _synthetic(n_items: int, seed: int, *, swap_judges: tuple[str, ...] = ()) -> tuple[list[list[JudgeVote]], list[str]]:
    rng = np.random.default_rng(seed)
    truths = np.where(rng.random(n_items) < PRIOR_A, "A", "B")
    batches = []
    for truth in truths:
        batch = []
        for judge, (sens_a, spec_b) in TRUE_CONFUSION.items():
            def say(truth: str = str(truth), p_right: float = sens_a if truth == "A" else spec_b) -> str:
                return truth if rng.random() < p_right else ("B" if truth == "A" else "A")

            if judge in swap_judges:  # a replayed position-swapped vote keeps its two games
                games = [say(), say()]
                choice = games[0] if games[0] == games[1] else None
                batch.append(JudgeVote(judge=judge, mode="recorded", choice=choice,
                                       confidence=0.75 if choice else None, samples=games,
                                       error=None if choice else "games disagree"))
            else:
                batch.append(JudgeVote(judge=judge, mode="sc", choice=say(), confidence=0.9))
        batches.append(batch)
    return batches, [str(t) for t in truths]


def test_recovers_known_confusion_matrices() -> None:
    batches, _ = _synthetic(4000, seed=1)
    model = fit_em([observations(b) for b in batches])
    errors = []
    for judge, (sens_a, spec_b) in TRUE_CONFUSION.items():
        j = model.judges.index(judge)
        errors += [abs(model.confusion[j, 1, 1] - sens_a), abs(model.confusion[j, 0, 0] - spec_b)]
    print(f"max |confusion error| {max(errors):.4f} (target <= 0.03); prior {model.prior_a:.3f} vs {PRIOR_A}")
    assert max(errors) <= 0.03
    assert abs(model.prior_a - PRIOR_A) <= 0.03


def test_estimated_accuracy_matches_truth_and_beats_majority() -> None:
    batches, truths = _synthetic(3000, seed=2)
    method = DawidSkeneFusion().fit_unlabelled(batches)
    for judge, (sens_a, spec_b) in TRUE_CONFUSION.items():
        expected = PRIOR_A * sens_a + (1 - PRIOR_A) * spec_b
        assert method.estimated_accuracy[judge] == pytest.approx(expected, abs=0.03)
    ds_acc = np.mean([v.choice == t for v, t in zip(method.predict(batches), truths, strict=True)])
    maj_acc = np.mean([majority(b).choice == t for b, t in zip(batches, truths, strict=True)])
    print(f"accuracy dawid_skene {ds_acc:.3f} vs majority {maj_acc:.3f}")
    assert ds_acc > maj_acc + 0.01  # it learns to trust 'strong' over 'weak'; majority cannot


def test_position_swap_games_are_two_observations() -> None:
    batches, _ = _synthetic(3000, seed=3, swap_judges=("strong", "weak"))
    obs = observations(batches[0])
    assert [j for j, _ in obs].count("strong") == 2 and [j for j, _ in obs].count("mid") == 1
    model = fit_em([observations(b) for b in batches])
    j = model.judges.index("strong")
    assert model.confusion[j, 1, 1] == pytest.approx(0.92, abs=0.03)
    assert model.confusion[j, 0, 0] == pytest.approx(0.88, abs=0.03)


def test_live_swap_vote_reconstructed_from_signal() -> None:
    consistent = JudgeVote(judge="j", mode="sc", choice="B", confidence=0.8, signals={"position_inconsistent": 0.0})
    split = JudgeVote(judge="j", mode="sc", choice="A", confidence=0.55, signals={"position_inconsistent": 1.0})
    assert observations([consistent]) == [("j", "B"), ("j", "B")]
    assert sorted(observations([split])) == [("j", "A"), ("j", "B")]


def test_unfitted_single_item_is_the_capped_cold_start_rule() -> None:
    votes = [JudgeVote(judge=n, mode="sc", choice="A", confidence=c) for n, c in (("a", 0.6), ("b", 0.7), ("c", 0.8))]
    verdict = get_method("dawid_skene")(votes)
    assert verdict.choice == "A" and verdict.confidence == pytest.approx(0.7)
    assert any("not fitted" in note for note in verdict.notes)


def test_one_valid_vote_keeps_its_confidence_even_when_fitted() -> None:
    batches, _ = _synthetic(500, seed=4)
    method = DawidSkeneFusion().fit_unlabelled(batches)
    votes = [JudgeVote(judge="strong", mode="sc", choice="B", confidence=0.66),
             JudgeVote.invalid("weak", "sc", "timeout")]
    verdict = method(votes)
    assert (verdict.choice, verdict.confidence) == ("B", pytest.approx(0.66))


def test_registered_with_recalibration_and_unknown_judges() -> None:
    batches, truths = _synthetic(400, seed=5)
    recal = get_method("dawid_skene+isotonic").fit(batches, truths)
    verdict = recal(batches[0])
    assert verdict.method == "dawid_skene+isotonic" and 0.0 <= verdict.confidence <= 1.0
    method = DawidSkeneFusion().fit_unlabelled(batches)
    stranger = [JudgeVote(judge="x", mode="sc", choice="A", confidence=0.9),
                JudgeVote(judge="y", mode="sc", choice="B", confidence=0.9)]
    assert method(stranger).choice is None


def test_no_observation_at_all_is_refused_clearly() -> None:
    with pytest.raises(ValueError, match="no valid observation"):
        fit_em([[], []])


def test_params_round_trip_reproduces_posteriors_and_version() -> None:
    import json

    from judgefuse.fusion.capabilities import method_params, restore_method

    batches, _ = _synthetic(300, seed=5)
    fitted = DawidSkeneFusion().fit_unlabelled(batches)
    params = json.loads(json.dumps(method_params(fitted)))  # through JSON, as storage keeps it
    restored = restore_method("dawid_skene", params)
    assert restored.model_version == fitted.model_version and len(fitted.model_version) == 12
    for batch in batches[:50]:
        a, b = fitted(batch), restored(batch)
        assert (a.choice, a.model_version) == (b.choice, b.model_version)
        assert a.p_a == pytest.approx(b.p_a, abs=1e-12)
    assert params["estimated_accuracy"] == pytest.approx(fitted.estimated_accuracy)
    with pytest.raises(ValueError, match="format"):
        DawidSkeneFusion.from_params({**params, "format": "other"})
    with pytest.raises(ValueError, match="shape"):
        DawidSkeneFusion.from_params({**params, "confusion": params["confusion"][:1]})


@pytest.mark.parametrize("recal", ["platt", "temperature", "isotonic", "histogram"])
def test_dawid_skene_plus_recalibrator_round_trips(recal: str) -> None:
    import json

    from judgefuse.fusion.capabilities import method_params, restore_method

    batches, truths = _synthetic(400, seed=6)
    name = f"dawid_skene+{recal}"
    fitted = get_method(name).fit(batches, truths)
    restored = restore_method(name, json.loads(json.dumps(method_params(fitted))))
    assert restored.model_version == fitted.model_version is not None
    for batch in batches[:60]:
        a, b = fitted(batch), restored(batch)
        assert (a.method, a.choice, a.model_version) == (name, b.choice, b.model_version)
        assert a.confidence == pytest.approx(b.confidence, abs=1e-12)


def test_a_fitted_model_gives_a_single_valid_vote_its_own_confidence() -> None:
    """The honest-confidence property holds after the fit too: one valid vote (the others failed)
    keeps its own confidence, whatever the posterior of that judge's word would be."""
    batches, _ = _synthetic(500, seed=7)
    method = DawidSkeneFusion().fit_unlabelled(batches)
    rng = np.random.default_rng(8)
    for _ in range(200):
        judge = str(rng.choice(list(TRUE_CONFUSION)))
        conf = float(rng.uniform(0.5, 1.0))
        choice = "A" if rng.random() < 0.5 else "B"
        votes = [JudgeVote(judge=judge, mode="sc", choice=choice, confidence=conf),
                 JudgeVote.invalid("weak" if judge != "weak" else "mid", "sc", "timeout")]
        verdict = method(votes)
        assert (verdict.choice, verdict.confidence) == (choice, pytest.approx(conf))
        assert verdict.model_version == method.model_version


def test_choices_are_the_verdicts_choices() -> None:
    batches, _ = _synthetic(300, seed=9, swap_judges=("mid",))
    batches += [[JudgeVote(judge="weak", mode="sc", choice="B", confidence=0.6)],
                [JudgeVote.invalid("strong", "sc", "timeout")]]
    method = DawidSkeneFusion().fit_unlabelled(batches)
    assert method.choices(batches) == [v.choice for v in method.predict(batches)]
