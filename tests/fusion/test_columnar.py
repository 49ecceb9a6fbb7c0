"""The columnar voting rules (:mod:`judgefuse.fusion.columnar`) against the per-item rules of
:mod:`judgefuse.fusion.voting`, the reference, item by item: answer (letter, exact tie, undecided),
confidence, ``p_a``, counts and ``tie_broken`` (floats to the bit) on every shared data set and on
synthetic panels built to hit every branch (one valid vote, tie votes, no valid vote, tied scores
broken and unbroken, abstaining votes carrying ``p_a``, confidence 0 and 1)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from judgefuse.evaluation.loaders import load
from judgefuse.fusion.columnar import (
    COLUMNAR_METHODS,
    NONE,
    TIE,
    A,
    B,
    FusedColumns,
    VoteColumns,
    fsum_rows,
    fuse_columns,
)
from judgefuse.fusion.verdict import Verdict, is_tie
from judgefuse.fusion.voting import VOTING_FUNCTIONS
from judgefuse.judges.types import JudgeVote

DATASETS = ("judgebench", "llmbar", "trust_or_escalate")
ATOL = 0.0
"""The columnar rules equal the per-item ones to the bit (the brief asks 1e-9): an ulp can move a
confidence into the next ECE bin or past a histogram recalibrator's edge."""


def synthetic_batches(n: int, seed: int = 0) -> list[list[JudgeVote]]:
    """Panels of 0-6 votes with coarse confidences, so scores and top confidences often tie."""
    rng = np.random.default_rng(seed)
    levels = (0.0, 0.5, 0.6, 0.7, 0.75, 0.9, 1.0)
    batches = []
    for _ in range(n):
        votes = []
        for j in range(int(rng.integers(0, 7))):
            kind = rng.random()
            judge = f"j{j}"
            if kind < 0.12:
                votes.append(JudgeVote.invalid(judge, "sc", "unparseable"))
            elif kind < 0.17:  # an abstention that still carries a signal
                votes.append(JudgeVote(judge=judge, mode="recorded", error="inconsistent", p_a=float(rng.random())))
            elif kind < 0.27:
                votes.append(JudgeVote.tied(judge, "sc"))
            else:
                choice = "A" if rng.random() < 0.5 else "B"
                votes.append(JudgeVote(judge=judge, mode="sc", choice=choice, confidence=float(rng.choice(levels))))
        batches.append(votes)
    return batches


DS_ATOL = 0.0
"""dawid_skene over arrays: EM on the observations one by one up to EXACT_EM_ROWS (these panels),
so to the bit; past it on their count patterns (test_dawid_skene_em_on_patterns)."""


def assert_matches(fused: FusedColumns, verdicts: list[Verdict], atol: float = ATOL) -> None:
    code = {"A": A, "B": B}
    want = np.asarray([TIE if is_tie(v) else code.get(v.choice or "", NONE) for v in verdicts])
    bad = np.flatnonzero(want != fused.answer)
    assert bad.size == 0, f"{fused.method}: answers differ at {bad[:5]}: {[verdicts[i] for i in bad[:2]]}"
    np.testing.assert_allclose(fused.confidence, [v.confidence for v in verdicts], rtol=0, atol=atol)
    np.testing.assert_allclose(fused.p_a, [v.p_a for v in verdicts], rtol=0, atol=atol)
    np.testing.assert_array_equal(fused.n_valid, [v.n_valid for v in verdicts])
    np.testing.assert_array_equal(fused.n_invalid, [v.n_invalid for v in verdicts])
    np.testing.assert_array_equal(fused.tie_broken, [v.tie_broken for v in verdicts])


@pytest.mark.parametrize("method", COLUMNAR_METHODS)
def test_synthetic_panels_match_the_per_item_rules(method: str) -> None:
    batches = synthetic_batches(6000)
    assert_matches(fuse_columns(method, VoteColumns.from_batches(batches)), [VOTING_FUNCTIONS[method](b) for b in batches])


@pytest.mark.parametrize("dataset", DATASETS)
def test_shared_data_sets_match_the_per_item_rules(shared_data: Path, dataset: str) -> None:
    batches = [judged.votes for judged in load([shared_data / dataset])]
    columns = VoteColumns.from_batches(batches)
    for method in COLUMNAR_METHODS:
        assert_matches(fuse_columns(method, columns), [VOTING_FUNCTIONS[method](b) for b in batches])


def _fsum_cases(rng: np.random.Generator, n: int, k: int) -> dict[str, np.ndarray]:
    return {
        "confidences to 6 places": np.round(rng.random((n, k)), 6),
        "their square roots": np.sqrt(np.round(rng.random((n, k)), 6)),
        "signed": rng.normal(size=(n, k)),
        "20 decades apart": rng.random((n, k)) * 10.0 ** rng.integers(-20, 20, size=(n, k)),
        "near the largest float": rng.random((n, k)) * 1e300,
        "ties to even": np.ldexp(rng.integers(-(2**20), 2**20, size=(n, k)).astype(float),
                                 rng.integers(-60, 10, size=(n, k))),  # fmt: skip
        "signed zeros": np.where(rng.random((n, k)) < 0.5, 0.0, -0.0),
        "subnormal": rng.random((n, k)) * 1e-310,
        "zeros and three decades": np.where(rng.random((n, k)) < 0.5, 0.0,
                                            rng.random((n, k)) * 10.0 ** rng.integers(-3, 3, size=(n, k))),  # fmt: skip
    }


@pytest.mark.parametrize("k", [0, 1, 2, 5, 17])
def test_fsum_rows_is_math_fsum_to_the_bit(k: int) -> None:
    """Each of fsum_rows' ways (integers on a grid, an exact running sum, math.fsum) gives fsum's float."""
    rng = np.random.default_rng(k)
    for name, values in _fsum_cases(rng, 4000, k).items():
        got = fsum_rows(values)
        want = np.asarray([math.fsum(row) for row in values.tolist()]) if k else np.zeros(len(values))
        assert got.view(np.int64).tolist() == want.view(np.int64).tolist(), name


def test_one_row_and_no_votes() -> None:
    vote = JudgeVote(judge="j", mode="sc", choice="B", confidence=0.8)
    for method in COLUMNAR_METHODS:
        assert_matches(fuse_columns(method, VoteColumns.from_batches([[vote]])), [VOTING_FUNCTIONS[method]([vote])])
        assert_matches(fuse_columns(method, VoteColumns.from_batches([[]])), [VOTING_FUNCTIONS[method]([])])


def test_take_selects_items() -> None:
    batches = synthetic_batches(50, seed=2)
    columns = VoteColumns.from_batches(batches)
    rows = [3, 1, 40]
    part = fuse_columns("majority", columns.take(rows))
    assert_matches(part, [VOTING_FUNCTIONS["majority"](batches[i]) for i in rows])
    assert_matches(fuse_columns("majority", columns).take(rows), [VOTING_FUNCTIONS["majority"](batches[i]) for i in rows])


@pytest.mark.parametrize("name", ["majority+platt", "majority+isotonic", "mean_probability+histogram"])
def test_cross_fitting_on_index_arrays_matches_cross_fit_predict(name: str) -> None:
    from judgefuse.fusion import cross_fit_predict
    from judgefuse.fusion.columnar_crossfit import cross_fit_columns

    batches = synthetic_batches(1500, seed=5)
    rng = np.random.default_rng(1)
    labels = ["A" if a else "B" for a in (rng.random(len(batches)) < 0.5)]
    want = cross_fit_predict(name, batches, labels, n_folds=5, seed=3)
    got = cross_fit_columns(name, VoteColumns.from_batches(batches), labels, n_folds=5, seed=3)
    assert got.method == name
    assert_matches(got, want)


def test_cross_fitting_on_index_arrays_refuses_as_cross_fit_predict() -> None:
    from judgefuse.fusion import NotEnoughLabels, cross_fit_predict
    from judgefuse.fusion.columnar_crossfit import cross_fit_columns

    batches = synthetic_batches(30, seed=6)
    labels = ["A"] * 27 + ["B"] * 3
    with pytest.raises(NotEnoughLabels) as reference:
        cross_fit_predict("majority+platt", batches, labels)
    with pytest.raises(NotEnoughLabels) as columnar:
        cross_fit_columns("majority+platt", VoteColumns.from_batches(batches), labels)
    assert str(columnar.value) == str(reference.value)


def _dawid_skene_batches(n: int) -> list[list[JudgeVote]]:
    """Synthetic panels plus position-swapped votes (two games in ``samples``, or the
    ``position_inconsistent`` signal) and a judge seen only in the scored items."""
    batches = synthetic_batches(n, seed=8)
    rng = np.random.default_rng(9)
    for votes in batches[::7]:
        votes.append(JudgeVote(judge="swap", mode="sc", choice="A", confidence=0.8, samples=["A", "B"]))
    for votes in batches[3::11]:
        votes.append(JudgeVote(judge="sig", mode="sc", choice="B", confidence=0.7,
                               signals={"position_inconsistent": float(rng.random() < 0.5)}))
    return batches


def test_dawid_skene_matches_predict_item_by_item() -> None:
    from judgefuse.fusion.columnar_dawid_skene import dawid_skene_columns
    from judgefuse.fusion.dawid_skene import DawidSkeneFusion

    batches = _dawid_skene_batches(3000)
    want = DawidSkeneFusion().predict(batches)
    assert_matches(dawid_skene_columns(DawidSkeneFusion(), VoteColumns.from_batches(batches)), want, DS_ATOL)
    # fitted on other items (eval's tie-labelled items: a fit on everything), new judges unseen
    tail = [[*votes, JudgeVote(judge="new", mode="sc", choice="A", confidence=0.9)] for votes in batches[:200]]
    reference = DawidSkeneFusion()
    want_tail = reference.predict([*batches, *tail])[len(batches):]
    method = DawidSkeneFusion()
    got = dawid_skene_columns(method, VoteColumns.from_batches(tail),
                              fit_parts=[VoteColumns.from_batches(batches), VoteColumns.from_batches(tail)])
    assert_matches(got, want_tail, DS_ATOL)
    assert method.model_version == reference.model_version
    # too few items: the cold-start rule
    one = batches[5:6]
    assert_matches(dawid_skene_columns(DawidSkeneFusion(), VoteColumns.from_batches(one)),
                   DawidSkeneFusion().predict(one))


def test_dawid_skene_shared_data(shared_data: Path) -> None:
    from judgefuse.fusion.columnar_dawid_skene import dawid_skene_columns
    from judgefuse.fusion.dawid_skene import DawidSkeneFusion

    for dataset in DATASETS:
        batches = [judged.votes for judged in load([shared_data / dataset])]
        got = dawid_skene_columns(DawidSkeneFusion(), VoteColumns.from_batches(batches))
        assert_matches(got, DawidSkeneFusion().predict(batches), DS_ATOL)


def test_dawid_skene_em_on_patterns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past EXACT_EM_ROWS observations EM and the posteriors go by the items' count patterns: the same
    fit and verdicts to ~1e-15."""
    from judgefuse.fusion import columnar_dawid_skene
    from judgefuse.fusion.columnar_dawid_skene import dawid_skene_columns
    from judgefuse.fusion.dawid_skene import DawidSkeneFusion

    monkeypatch.setattr(columnar_dawid_skene, "EXACT_EM_ROWS", 10)
    batches = _dawid_skene_batches(3000)
    reference = DawidSkeneFusion()
    want = reference.predict(batches)
    method = DawidSkeneFusion()
    assert_matches(dawid_skene_columns(method, VoteColumns.from_batches(batches)), want, 1e-12)
    assert method.model is not None and reference.model is not None
    assert method.model.n_iter == reference.model.n_iter
    np.testing.assert_allclose(method.model.confusion, reference.model.confusion, rtol=1e-12)
