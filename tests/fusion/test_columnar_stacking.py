"""``stacked`` and ``offset_stacked`` over arrays (:mod:`judgefuse.fusion.columnar_stacking`)
against the per-item classes, the reference, through ``cross_fit_predict`` item by item: the
answer, ``p_a`` and confidence to 1e-9 (``stacked``: to the bit, the same scikit-learn fit on the
same matrix), counts and ``tie_broken``. Synthetic panels with every feature's branch (invalid
votes, tie votes, abstentions carrying ``p_a``, a judge voting twice on an item, numeric signals
on some judges, a judge absent from some items), the shared data sets, the synthetic generator
(benchmarks/synthetic_panels.py), the tie-labelled items' fit-and-apply, and the offset fit's
penalty choice and optimum against ``choose_penalty`` and ``fit_offset_logistic``."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from judgefuse.evaluation.loaders import load
from judgefuse.fusion import NotEnoughLabels, cross_fit_predict, get_method
from judgefuse.fusion.columnar import NONE, A, B, FusedColumns, VoteColumns
from judgefuse.fusion.columnar_stacking import (
    StackingColumns,
    cross_fit_stacking,
    fit_and_apply_stacking,
    fit_method,
    fit_offset,
)
from judgefuse.fusion.offset_stacking import choose_penalty, fit_offset_logistic, rule_logodds
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import synthetic_panels  # noqa: E402

METHODS = ("stacked", "offset_stacked")
DATASETS = ("judgebench", "llmbar", "trust_or_escalate")


def panels(n: int, seed: int = 0) -> tuple[list[list[JudgeVote]], list[str]]:
    """Five judges of differing skill (one absent from a fifth of the items), with invalid votes,
    tie votes, abstentions carrying ``p_a``, a judge that votes twice (position swap) and two
    judges with a numeric signal (a reward margin, sometimes missing)."""
    rng = np.random.default_rng(seed)
    truth = rng.random(n) < 0.5
    skill = (0.62, 0.68, 0.72, 0.58, 0.8)
    batches: list[list[JudgeVote]] = []
    for i in range(n):
        votes: list[JudgeVote] = []
        for j, accuracy in enumerate(skill):
            judge = f"j{j}"
            if j == 3 and rng.random() < 0.2:
                continue  # absent
            kind = rng.random()
            signals = (
                {"margin": float(rng.normal(1.0 if truth[i] else -1.0))} if j in (1, 4) and rng.random() < 0.8 else {}
            )
            if kind < 0.05:
                votes.append(JudgeVote.invalid(judge, "sc", "unparseable", signals=signals))
            elif kind < 0.08:
                votes.append(JudgeVote(judge=judge, mode="recorded", error="inconsistent", p_a=float(rng.random())))
            elif kind < 0.12:
                votes.append(JudgeVote.tied(judge, "sc", signals=signals))
            else:
                right = rng.random() < accuracy
                says_a = bool(truth[i] == right)
                confidence = float(np.round(rng.uniform(0.5, 1.0), 2))
                votes.append(
                    JudgeVote(
                        judge=judge, mode="sc", choice="A" if says_a else "B", confidence=confidence, signals=signals
                    )
                )
                if j == 2 and rng.random() < 0.3:  # the swapped game
                    votes.append(
                        JudgeVote(judge=judge, mode="sc", choice="A" if rng.random() < 0.6 else "B", confidence=0.7)
                    )
        batches.append(votes)
    labels = ["A" if a else "B" for a in truth]
    return batches, labels


def assert_matches(fused: FusedColumns, verdicts: list[Verdict], atol: float) -> None:
    code = {"A": A, "B": B}
    want = np.asarray([code.get(v.choice or "", NONE) for v in verdicts])
    bad = np.flatnonzero(want != fused.answer)
    assert bad.size == 0, f"{fused.method}: answers differ at {bad[:5]}"
    np.testing.assert_allclose(fused.p_a, [v.p_a for v in verdicts], rtol=0, atol=atol)
    np.testing.assert_allclose(fused.confidence, [v.confidence for v in verdicts], rtol=0, atol=atol)
    np.testing.assert_array_equal(fused.n_valid, [v.n_valid for v in verdicts])
    np.testing.assert_array_equal(fused.n_invalid, [v.n_invalid for v in verdicts])
    np.testing.assert_array_equal(fused.tie_broken, [v.tie_broken for v in verdicts])


def tolerance(name: str) -> float:
    """``stacked``: the same fit on the same matrix, to the bit; ``offset_stacked``: the same
    optimum found by other steps (module docstring), well within 1e-9."""
    return 0.0 if name == "stacked" else 1e-9


@pytest.mark.parametrize("name", METHODS)
def test_synthetic_panels_match_cross_fit_predict(name: str) -> None:
    batches, labels = panels(1200)
    want = cross_fit_predict(name, batches, labels, n_folds=5, seed=2)
    got = cross_fit_columns_of(name, batches, labels, seed=2)
    assert got.method == name
    assert_matches(got, want, tolerance(name))


def cross_fit_columns_of(
    name: str, batches: list[list[JudgeVote]], labels: list[str], *, seed: int = 0
) -> FusedColumns:
    return cross_fit_stacking(name, VoteColumns.from_batches(batches), labels, n_folds=5, seed=seed)  # type: ignore[arg-type]


@pytest.mark.parametrize("dataset", DATASETS)
def test_shared_data_sets_match_cross_fit_predict(shared_data: Path, dataset: str) -> None:
    # LLMBar: its first 300 items (65 judges, 333 columns: the reference's fits take minutes on all 1,200)
    labelled = [judged for judged in load([shared_data / dataset]) if judged.item.label is not None]
    labelled = labelled[:300] if dataset == "llmbar" else labelled
    batches = [judged.votes for judged in labelled]
    labels = [str(judged.item.label) for judged in labelled]
    for name in METHODS:
        want = cross_fit_predict(name, batches, labels, n_folds=5, seed=0)  # type: ignore[arg-type]
        assert_matches(cross_fit_columns_of(name, batches, labels), want, tolerance(name))


@pytest.mark.parametrize("regime", ["informative", "correlated", "position_biased", "strong"])
def test_synthetic_generator_matches_cross_fit_predict(regime: str) -> None:
    labelled = synthetic_panels.panel(regime, 1500, seed=3)
    batches = [judged.votes for judged in labelled]
    labels = [str(judged.item.label) for judged in labelled]
    for name in METHODS:
        want = cross_fit_predict(name, batches, labels, n_folds=5, seed=1)  # type: ignore[arg-type]
        assert_matches(cross_fit_columns_of(name, batches, labels, seed=1), want, tolerance(name))


@pytest.mark.parametrize("name", METHODS)
def test_fit_and_apply_matches_fit_then_predict(name: str) -> None:
    batches, labels = panels(600, seed=4)
    tail, _ = panels(120, seed=5)
    tail[0] = [JudgeVote(judge="new", mode="sc", choice="A", confidence=0.9)]  # no judge seen at fit
    tail[1] = []
    tail[2] = [v.model_copy(update={"judge": "j0"}) for v in tail[2]]  # j0 twice, the others absent
    method = get_method(name)
    method.fit(batches, labels)  # type: ignore[attr-defined]
    want = method.predict(tail)  # type: ignore[attr-defined]
    got = fit_and_apply_stacking(name, VoteColumns.from_batches(batches), labels, VoteColumns.from_batches(tail))  # type: ignore[arg-type]
    assert_matches(got, want, tolerance(name))
    assert got.answer[0] == got.answer[1] == NONE


@pytest.mark.parametrize("name", METHODS)
def test_fit_method_is_the_per_item_fit(name: str) -> None:
    # a method fitted over the arrays saves, restores and predicts as one fitted item by item
    batches, labels = panels(800, seed=7)
    tail, _ = panels(150, seed=8)
    want = get_method(name).fit(batches, labels)  # type: ignore[attr-defined]
    got = fit_method(get_method(name), VoteColumns.from_batches(batches), labels)  # type: ignore[arg-type]
    want_params, got_params = want.to_params(), got.to_params()
    assert got.model_version == want.model_version
    for key in want_params:
        if key in ("coef", "intercept", "rule_scale"):
            np.testing.assert_allclose(got_params[key], want_params[key], rtol=0, atol=tolerance(name))
        else:
            assert got_params[key] == want_params[key], key
    assert_matches(FusedColumns(name, *columns_of(got.predict(tail))), want.predict(tail), tolerance(name))
    restored = get_method(name).from_params(got_params)  # type: ignore[attr-defined]
    assert restored.model_version == got.model_version
    np.testing.assert_array_equal(restored.predict_p_a(tail), got.predict_p_a(tail))


def columns_of(verdicts: list[Verdict]) -> tuple:
    """A verdict list's FusedColumns fields after the method name."""
    code = {"A": A, "B": B}
    return (
        np.asarray([code.get(v.choice or "", NONE) for v in verdicts], dtype=np.int8),
        np.asarray([v.confidence for v in verdicts]),
        np.asarray([v.p_a for v in verdicts]),
        np.asarray([v.n_valid for v in verdicts]),
        np.asarray([v.n_invalid for v in verdicts]),
        np.asarray([v.tie_broken for v in verdicts]),
    )


@pytest.mark.parametrize("name", METHODS)
def test_refusals_match_cross_fit_predict(name: str) -> None:
    batches, _ = panels(40, seed=6)
    for labels in (["A"] * 37 + ["B"] * 3, ["A", "B"] * 20):
        few = [votes[:0] for votes in batches] if labels[1] == "B" else batches
        with pytest.raises((NotEnoughLabels, ValueError)) as reference:
            cross_fit_predict(name, few, labels)  # type: ignore[arg-type]
        with pytest.raises(type(reference.value)) as columnar:
            cross_fit_columns_of(name, few, labels)
        assert str(columnar.value) == str(reference.value)


def test_features_equal_the_per_item_matrix() -> None:
    """Every column of ``StackedFusion._matrix`` (feature set 2, signals standardised), to the bit."""
    batches, labels = panels(400, seed=7)
    method = get_method("stacked")
    method.fit(batches, labels)  # type: ignore[attr-defined]
    from judgefuse.fusion.columnar_stacking import StackingModel

    table = StackingColumns.from_columns(VoteColumns.from_batches(batches))
    params = method.to_params()  # type: ignore[attr-defined]
    model = StackingModel(
        tuple(params["judges"]),
        tuple(tuple(k) for k in params["signal_keys"]),  # type: ignore[arg-type]
        np.asarray(params["signal_mean"]),
        np.asarray(params["signal_std"]),
        np.zeros(0),
        0.0,
    )
    want = method._matrix(batches)[0]  # noqa: SLF001 - the reference matrix
    np.testing.assert_array_equal(table.matrix(np.arange(len(batches)), model), want)
    np.testing.assert_array_equal(table.rule, rule_logodds(batches))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_offset_fit_equals_choose_penalty_and_newton(seed: int) -> None:
    """The penalty ``choose_penalty`` picks and ``fit_offset_logistic``'s optimum at it, on
    designs with an all-zero and a duplicated column and an offset column."""
    rng = np.random.default_rng(seed)
    n = 300 + 400 * seed
    x = rng.normal(size=(n, 6))
    x[:, 3] = 0.0
    x[:, 4] = x[:, 2]
    offset = rng.normal(size=n) * (0.5 + seed)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(0.8 * offset + x[:, 0] * (seed - 1) + 0.3 * x[:, 2])))).astype(float)
    design = np.hstack([offset[:, None], x])
    lam, beta = fit_offset(design, y)
    assert lam == choose_penalty(design, y, offset)
    b, w = fit_offset_logistic(design, y, offset, lam)
    np.testing.assert_allclose(beta, np.concatenate(([b], w)), rtol=0, atol=1e-9)


@pytest.mark.parametrize("cap", [250, 400])
def test_past_the_search_cap_the_penalty_is_chosen_on_the_same_rows_and_fitted_on_all(
    cap: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``PENALTY_SEARCH_ROWS`` labels both fits choose the penalty on the rows
    ``penalty_search_rows`` picks and fit on every row: the same penalty and optimum. A smaller
    cap stands in for 10,000 (the rule is the same at any size). At cap 250 column 3 is zero on
    every searched row and not on the others, so the final fit meets a column the search dropped."""
    from judgefuse.fusion import offset_stacking

    monkeypatch.setattr(offset_stacking, "PENALTY_SEARCH_ROWS", cap)
    rng = np.random.default_rng(7)
    n = 1000
    x = rng.normal(size=(n, 5))
    x[:, 3] = 0.0
    x[1::4, 3] = 1.0  # zero on every row the every-4th search (cap 250) takes, not on the others
    offset = rng.normal(size=n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(0.9 * offset + 0.7 * x[:, 0] - 0.4 * x[:, 1])))).astype(float)
    design = np.hstack([offset[:, None], x])
    rows = offset_stacking.penalty_search_rows(n)
    assert rows is not None and rows.size <= cap and rows[0] == 0
    lam, beta = fit_offset(design, y)
    assert (
        lam
        == choose_penalty(design, y, offset)
        == offset_stacking.penalty_from_losses(offset_stacking.held_out_losses(design[rows], y[rows], offset[rows]))
    )
    # on these data the cap decides at 250 (100 against 30 on every row): a fit that ignored it would differ
    full_choice = offset_stacking.penalty_from_losses(offset_stacking.held_out_losses(design, y, offset))
    assert (lam != full_choice) == (cap == 250)
    b, w = fit_offset_logistic(design, y, offset, lam)
    np.testing.assert_allclose(beta, np.concatenate(([b], w)), rtol=0, atol=1e-9)


def test_offset_newton_converges_where_full_steps_diverged(shared_data: Path) -> None:
    """Trust-or-Escalate at penalty 1: full Newton steps from zero grew to 10^3 (the rule's
    log-odds reach +-9) and the fit diverged; halved steps reach the optimum (gradient ~0), which
    both the per-item fit and the columnar one find."""
    from judgefuse.fusion.offset_stacking import INTERCEPT_FLOOR, sigmoid

    labelled = [judged for judged in load([shared_data / "trust_or_escalate"]) if judged.item.label is not None]
    batches = [judged.votes for judged in labelled][:320]
    y = np.asarray([judged.item.label == "A" for judged in labelled][:320], dtype=float)
    method = get_method("offset_stacked")
    method._freeze_features(batches)  # noqa: SLF001 - the reference's own matrix
    offset = rule_logodds(batches)
    design = np.hstack([offset[:, None], method._matrix(batches)[0]])  # noqa: SLF001
    b, w = fit_offset_logistic(design, y, offset, 1.0)
    p = sigmoid(offset + b + design @ w)
    gradient = np.concatenate(([(p - y).sum() + INTERCEPT_FLOOR * b], design.T @ (p - y) + w))
    assert np.abs(gradient).max() < 1e-6
    assert np.abs(offset + b + design @ w).max() < 50.0
