"""The candidate-aligned view, the common pool and the self-preference report of ``compare``,
on hand-computed cases, and end to end through the command (terminal, JSON, HTML)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from judgefuse.cli import main
from judgefuse.evaluation.candidate_aligned import (
    CA_VIEW,
    candidate_scores,
    common_pool,
    model_family,
    self_preference,
)
from judgefuse.evaluation.comparison import compare_report
from judgefuse.evaluation.loaders import VotesWriter
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem


def item(i: int, label: str | None, **metadata: str) -> PairwiseItem:
    return PairwiseItem(id=f"i{i}", question=f"q{i}", answer_a="a", answer_b="b", label=label, metadata=metadata)


def vote(judge: str, p_a: float | None) -> JudgeVote:
    if p_a is None:
        return JudgeVote.invalid(judge, "logprob", "unreadable")
    return JudgeVote.from_p_a(judge, "logprob", p_a)


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("openai/gpt-4o-mini", "openai"),
        ("arena_hard:o1-mini", "openai"),
        ("anthropic/claude-3-5-haiku", "anthropic"),
        ("reward_model:Skywork-Reward-Llama-3.1-8B", "meta"),
        ("reward_model:GRM-Gemma-2B", "google"),
        ("no_rubric:Qwen3-1.7B", "qwen"),
        ("reward_model:internlm2-20b-reward", "internlm"),
        ("ChatGPT-0301/Rules+Metrics", "openai"),
        ("judge-1", None),
        ("photo1-judge", None),  # 'o1' only counts at the start of a word
    ],
)
def test_model_family(name, family):
    assert model_family(name) == family


def test_candidate_scores_by_hand():
    """Labels A, A, B, B; p_a 0.9, 0.6, 0.3 and no answer (0.5 for both candidates).

    CA-Brier = mean of (p_a - [label is A])^2 = (0.01 + 0.16 + 0.09 + 0.25) / 4 = 0.1275.
    CA-ECE: the 8 candidates 0.9/1, 0.6/1, 0.3/0, 0.5/0, 0.1/0, 0.4/0, 0.7/1, 0.5/1 fall in seven
    bins; gaps 0.1, 0.4, 0.3, 0 (the two 0.5s together), 0.1, 0.4, 0.3 weighted 1/8 each but
    the 0.5 bin 2/8: 1.6 / 8 = 0.2. The raw ECE of the chosen answers is 1.3 / 4 = 0.325 (the
    no-answer item is 0.5 and wrong), so the views differ exactly where a judge gave no answer.
    """
    items = [
        JudgedItem(item=item(0, "A"), votes=[vote("j", 0.9)]),
        JudgedItem(item=item(1, "A"), votes=[vote("j", 0.6)]),
        JudgedItem(item=item(2, "B"), votes=[vote("j", 0.3)]),
        JudgedItem(item=item(3, "B"), votes=[vote("j", None)]),
        JudgedItem(item=item(4, None), votes=[vote("j", 0.9)]),  # unlabelled: not scored
        JudgedItem(item=item(5, "tie"), votes=[vote("j", 0.9)]),  # a tie label: not A/B, not scored
    ]
    scores = candidate_scores("j", items)
    assert scores.item_index.tolist() == [0, 1, 2, 3]
    assert scores.brier() == pytest.approx(0.1275)
    assert scores.ece(10) == pytest.approx(0.2)


def _pair_items(p_1, p_2, labels):
    return [
        JudgedItem(item=item(i, label), votes=[vote("one", a), vote("two", b)])
        for i, (a, b, label) in enumerate(zip(p_1, p_2, labels, strict=True))
    ]


def test_compare_adds_the_candidate_view_which_equals_raw_when_every_item_is_answered():
    rng = np.random.default_rng(3)
    labels = ["A" if x else "B" for x in rng.random(60) < 0.5]
    p_1 = [float(np.clip((0.8 if lab == "A" else 0.3) + rng.normal(0, 0.15), 0.01, 0.99)) for lab in labels]
    p_2 = [float(np.clip((0.6 if lab == "A" else 0.45) + rng.normal(0, 0.05), 0.01, 0.99)) for lab in labels]
    report = compare_report(_pair_items(p_1, p_2, labels), "one", "two", n_resamples=200)
    differences = report.evidence.differences
    for metric in ("ece", "brier"):
        raw, ca = differences[(metric, "raw")], differences[(metric, CA_VIEW)]
        # a pairwise judge scores both answers with p_a and 1 - p_a: the symmetric bins give raw's numbers
        assert ca.score_1 == pytest.approx(raw.score_1) and ca.score_2 == pytest.approx(raw.score_2)
        assert ca.interval.low <= ca.difference <= ca.interval.high
    brier_1 = np.mean((np.asarray(p_1) - (np.asarray(labels) == "A")) ** 2)
    assert differences[("brier", CA_VIEW)].score_1 == pytest.approx(brier_1)


def test_the_candidate_view_differs_where_a_judge_gave_no_answer():
    """Judge one's 10 no-answer items are 0.5 and wrong in the raw view, but a pair of 0.5
    candidates, one right, in the candidate-aligned view."""
    labels = ["A"] * 40 + ["B"] * 40
    p_1 = [0.95] * 30 + [0.6] * 10 + [0.05] * 30 + [None] * 10
    p_2 = [0.7] * 40 + [0.3] * 40
    report = compare_report(_pair_items(p_1, p_2, labels), "one", "two", n_resamples=100)
    raw, ca = report.evidence.differences[("ece", "raw")], report.evidence.differences[("ece", CA_VIEW)]
    # raw, by hand: 60 chosen at 0.95 (right, gap 0.05), 10 at 0.6 (right, 0.4), 10 at 0.5 (wrong,
    # 0.5): (3 + 4 + 5) / 80 = 0.15
    assert raw.score_1 == pytest.approx(0.15)
    # candidates: 120 at 0.95 or 0.05 (gap 0.05), 20 at 0.6 or 0.4 (gap 0.4), 20 at 0.5 with half
    # right (gap 0): (6 + 8) / 160 = 0.0875
    assert ca.score_1 == pytest.approx(0.0875)
    assert ca.score_2 == pytest.approx(0.3)  # 0.7 / 0.3 and always right: gap 0.3 on every candidate


def test_common_pool_is_the_items_every_judge_voted_on():
    items = [
        JudgedItem(item=item(0, "A"), votes=[vote("x", 0.8), vote("y", 0.7), vote("z", 0.2)]),
        JudgedItem(item=item(1, "B"), votes=[vote("x", 0.3), vote("y", 0.6), vote("z", 0.1)]),
        JudgedItem(item=item(2, "A"), votes=[vote("x", 0.9), vote("y", None), vote("z", 0.6)]),
        JudgedItem(item=item(3, "A"), votes=[vote("x", 0.9), vote("y", 0.9)]),  # z never saw it
        JudgedItem(item=item(4, None), votes=[vote("x", 0.9), vote("y", 0.9), vote("z", 0.9)]),
    ]
    rows, size = common_pool(items)
    assert size == 3
    by_judge = {row.judge: row for row in rows}
    # choices on items 0-2: x A,B,A (all right); y A,A,- (1 right); z B,B,A (2 right)
    assert by_judge["x"].accuracy == pytest.approx(1.0)
    assert by_judge["y"].accuracy == pytest.approx(1 / 3)
    assert by_judge["z"].accuracy == pytest.approx(2 / 3)
    # agreement: x-y agree on item 0 only (1/3), x-z on items 1 and 2 (2/3), y-z on none
    assert by_judge["x"].agreement == pytest.approx((1 / 3 + 2 / 3) / 2)
    assert by_judge["y"].agreement == pytest.approx((1 / 3 + 0) / 2)
    assert by_judge["z"].agreement == pytest.approx((2 / 3 + 0) / 2)
    assert by_judge["y"].ca_brier == pytest.approx(((0.7 - 1) ** 2 + 0.6**2 + 0.5**2) / 3)


def preference_items() -> list[JudgedItem]:
    """20 items: A by gpt-4o, B by claude; the label says A on 5 and B on 15. The GPT judge picks A
    on 17 (its own), the Claude judge picks B on 16 (its own), a third judge has no family."""
    items = []
    for i in range(20):
        label = "A" if i < 5 else "B"
        gpt_choice = 0.8 if i < 17 else 0.2
        claude_choice = 0.3 if i < 16 else 0.7
        items.append(
            JudgedItem(
                item=item(i, label, model_a="gpt-4o-2024-05-13", model_b="claude-3-5-sonnet"),
                votes=[vote("openai/gpt-4o-mini", gpt_choice), vote("claude-judge", claude_choice),
                       vote("judge-3", 0.6)],
            )  # fmt: skip
        )
    same_family = item(20, "A", model_a="gpt-4o", model_b="gpt-4o-mini")
    no_models = item(21, "A")
    for extra in (same_family, no_models):
        items.append(JudgedItem(item=extra, votes=[vote("openai/gpt-4o-mini", 0.9), vote("claude-judge", 0.9)]))
    items.append(
        JudgedItem(
            item=item(22, "A", model_a="gpt-4o", model_b="claude-3"),
            votes=[vote("openai/gpt-4o-mini", None), vote("claude-judge", 0.2)],
        )
    )
    return items


def test_self_preference_by_hand():
    found = {row.judge: row for row in self_preference(preference_items(), n_resamples=500)}
    assert set(found) == {"openai/gpt-4o-mini", "claude-judge"}  # judge-3 has no family
    gpt = found["openai/gpt-4o-mini"]
    assert (gpt.family, gpt.n, gpt.n_decided, gpt.n_no_answer) == ("openai", 21, 20, 1)
    assert gpt.chose_own == pytest.approx(17 / 20) and gpt.label_own == pytest.approx(5 / 20)
    assert gpt.excess == pytest.approx(12 / 20)
    assert (gpt.own_when_other_better, gpt.other_when_own_better) == (12, 0)
    assert gpt.excludes_zero and gpt.low <= gpt.excess <= gpt.high
    claude = found["claude-judge"]
    # items 0-19: B picked on 0-15 (16), label B on 5-19 (15); item 22: B picked, label A
    assert (claude.n, claude.n_decided) == (21, 21)
    assert claude.chose_own == pytest.approx(17 / 21) and claude.label_own == pytest.approx(15 / 21)
    assert (claude.own_when_other_better, claude.other_when_own_better) == (6, 4)


def test_compare_command_prints_and_writes_every_view(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    votes = tmp_path / "votes.jsonl"
    with VotesWriter(votes) as writer:
        for judged in preference_items():
            writer.write(judged)
    out_json, out_html = tmp_path / "compare.json", tmp_path / "compare.html"
    code = main(["compare", str(votes), "--judges", "openai/gpt-4o-mini", "claude-judge", "--bootstrap", "100",
                 "--json", str(out_json), "--html", str(out_html)])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0
    assert "cand.-aligned" in text or "candidate-aligned" in text
    assert "every judge on the common pool: 20 labelled items all 3 judges voted on" in " ".join(text.split())
    assert "openai/gpt-4o-mini prefers its own family's answers (openai): +60.0 points" in text
    report = json.loads(out_json.read_text())
    assert [(v["metric"], v["view"]) for v in report["views"]] == [
        (metric, view) for metric in ("ece", "brier")
        for view in ("raw", "instance_aligned", "distribution_aligned", "candidate_aligned")
    ]  # fmt: skip
    assert report["common_pool"]["n"] == 20 and len(report["common_pool"]["judges"]) == 3
    assert {row["judge"]: row["excess"] for row in report["self_preference"]}["openai/gpt-4o-mini"] == pytest.approx(0.6)
    page = out_html.read_text()
    assert "<h2>Self-preference</h2>" in page and "candidate-aligned" in page and "claude-judge" in page


def test_compare_says_when_no_item_names_its_answer_models(shared_data: Path, capsys):
    code = main(["compare", str(shared_data / "trust_or_escalate"), "--judges", "gpt-4-turbo", "gpt-3.5-turbo",
                 "--bootstrap", "50"])  # fmt: skip
    text = " ".join(capsys.readouterr().out.split())
    assert code == 0
    assert "self-preference: no item names the models of its two answers" in text
    assert "candidate-aligned: equal to raw here" in text
    assert "every judge on the common pool: 500 labelled items all 3 judges voted on" in text


def test_candidate_intervals_equal_rebuilding_the_candidates_on_each_resample() -> None:
    """candidate_differences gathers per-candidate arrays built once (issue 46): its intervals
    are the ones rebuilding both judges' candidates on every resample gives, to the bit."""
    from judgefuse.calibration.bootstrap import interval_from_stats
    from judgefuse.evaluation.candidate_aligned import CandidateScores, candidate_differences

    rng = np.random.default_rng(11)
    n = 400
    label_a = rng.random(n) < 0.5
    index = np.arange(n)
    first = CandidateScores(np.where(rng.random(n) < 0.1, 0.5, rng.random(n)), label_a, index)
    second = CandidateScores(rng.choice([0.0, 0.1, 0.3, 0.7, 0.9, 1.0], n), label_a, index)
    got = candidate_differences(first, second, raw_winners={"ece": 1, "brier": 2}, n_bins=10, n_resamples=50, seed=5)
    draw = np.random.default_rng(5)
    draws = [draw.integers(0, n, size=n) for _ in range(50)]
    for metric in ("ece", "brier"):

        def score(scores: CandidateScores, i: np.ndarray, metric: str = metric) -> float:
            part = CandidateScores(scores.p_a[i], scores.label_a[i], np.arange(i.size))
            return part.ece(10) if metric == "ece" else part.brier()

        stats = np.asarray([score(first, i) - score(second, i) for i in draws])
        row = got[(metric, CA_VIEW)]
        want = interval_from_stats(row.score_1 - row.score_2, stats, level=0.95, bounds=(-1.0, 1.0), n_resamples=50)
        assert row.interval == want, metric


@pytest.mark.parametrize("n", [1, 7, 1000, 4097])
def test_self_preference_draws_in_row_blocks_equal_the_full_matrix(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """The resamples x items index matrix is drawn a block of rows at a time (issue 46: 8 GB at
    10^6 items): the same integers as one full draw, so the same means, to the bit."""
    from judgefuse.evaluation import candidate_aligned

    rng = np.random.default_rng(n)
    chose_own = (rng.random(n) < 0.6).astype(float)
    label_own = (rng.random(n) < 0.5).astype(float)
    full = np.random.default_rng(9).integers(0, n, size=(37, n))
    want = chose_own[full].mean(axis=1) - label_own[full].mean(axis=1)
    for cells in (1, 3 * n, 5 * n + 1, 1 << 22):  # one row, 3 rows, 5 rows (37 = 7 * 5 + 2), all rows
        monkeypatch.setattr(candidate_aligned, "RESAMPLE_CELLS", cells)
        got = candidate_aligned._excess_stats(chose_own, label_own, 37, 9)
        assert np.array_equal(got, want), cells
