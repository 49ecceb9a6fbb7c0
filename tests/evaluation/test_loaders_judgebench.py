"""JudgeBench loader: JudgeBench's own accuracy rule, the p_a rules per judge kind, and faults."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest

from judgefuse.evaluation.loaders import (
    DatasetError,
    UndefinedAnswers,
    judge_name_from_path,
    judgebench_score,
    load_judgebench,
    load_judgebench_paths,
    vote_from_record,
)
from judgefuse.evaluation.loaders.judgebench import sigmoid, verdict_p_shown_a

PAIRS = "dataset=judgebench,response_model=gpt-4o-2024-05-13.jsonl"

# The README's recorded accuracies by the JudgeBench rule (to 0.001). The four rubric runs are
# "0.43-0.45" there; their exact values are pinned from judgebench_score on the raw decisions.
EXPECTED = {
    "arena_hard:o1-mini": 0.657,
    "reward_model:Skywork-Reward-Gemma-2-27B": 0.643,
    "reward_model:internlm2-20b-reward": 0.634,
    "reward_model:Skywork-Reward-Llama-3.1-8B": 0.623,
    "reward_model:GRM-Gemma-2B-rewardmodel-ft": 0.594,
    "reward_model:internlm2-7b-reward": 0.594,
    "no_rubric:Qwen3-1.7B": 0.431,
    "rubric(Qwen3-8B):Qwen3-8B": 0.451,
    "rubric(Qwen3-8B):Llama-3.1-8B-Instruct": 0.454,
    "rubric(gpt-4.1):Qwen3-1.7B": 0.426,
}
RUBRIC = {name for name in EXPECTED if "rubric" in name}


@pytest.fixture(scope="module")
def judgebench(shared_data: Path):
    return load_judgebench_paths([shared_data / "judgebench"])


def _outputs(shared_data: Path) -> list[Path]:
    return sorted((shared_data / "judgebench" / "outputs").glob("*.jsonl"))


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def _accuracy(items, judge: str) -> float:
    votes = [(j.item.label, v) for j in items for v in j.votes if v.judge == judge]
    assert len(votes) == 350
    return sum(v.choice == label for label, v in votes) / len(votes)


def test_items_judges_and_categories(judgebench, shared_data: Path) -> None:
    assert len(judgebench) == 350
    pair_ids = [json.loads(line)["pair_id"] for line in _lines(shared_data / "judgebench" / PAIRS)]
    assert [j.item.id for j in judgebench] == pair_ids  # the pairs file's order, kept
    assert Counter(j.item.label for j in judgebench) == {"A": 193, "B": 157}
    assert Counter(j.item.category for j in judgebench) == {"mmlu": 154, "livebench": 154, "livecodebench": 42}
    for judged in judgebench:
        assert sorted(v.judge for v in judged.votes) == sorted(EXPECTED)
        assert all(v.mode == "recorded" and v.calls == 2 for v in judged.votes)
    assert [judge_name_from_path(p, _hint(p)) for p in _outputs(shared_data)] == [v.judge for v in judgebench[0].votes]


def _hint(path: Path) -> str:
    first = json.loads(_lines(path)[0])
    return first["judgments"][0]["judgment"]["judge_model"]


@pytest.mark.parametrize("judge", sorted(EXPECTED))
def test_accuracy_is_the_recorded_figure(judgebench, judge: str) -> None:
    accuracy = _accuracy(judgebench, judge)
    assert accuracy == pytest.approx(EXPECTED[judge], abs=0.001)
    if judge in RUBRIC:
        assert 0.43 <= round(accuracy, 2) <= 0.45


def test_vote_accuracy_equals_judgebench_rule_on_raw_decisions(judgebench, shared_data: Path) -> None:
    for path in _outputs(shared_data):
        records = [json.loads(line) for line in _lines(path)]
        name = judge_name_from_path(path, _hint(path))
        assert _accuracy(judgebench, name) == pytest.approx(judgebench_score(records), abs=1e-12)


def test_valid_votes_lean_towards_their_choice(judgebench) -> None:
    for judged in judgebench:
        for vote in judged.votes:
            if vote.valid:
                assert vote.confidence == pytest.approx(vote.p_a if vote.choice == "A" else 1 - vote.p_a)
                assert vote.confidence > 0.5
            else:
                assert vote.tie or vote.error in {"games disagree", "no decision"}


def test_invalid_counts(judgebench) -> None:
    invalid = Counter(v.judge for j in judgebench for v in j.votes if not v.valid and not v.tie)
    assert invalid["arena_hard:o1-mini"] == 76
    assert invalid["reward_model:GRM-Gemma-2B-rewardmodel-ft"] == 0
    assert invalid["reward_model:Skywork-Reward-Gemma-2-27B"] == 3


def test_reward_model_bradley_terry_by_hand(judgebench, shared_data: Path) -> None:
    path = next(p for p in _outputs(shared_data) if "Skywork-Reward-Llama" in p.name)
    record = json.loads(_lines(path)[0])
    g1, g2 = (g["judgment"]["scores"] for g in record["judgments"])
    g1, g2 = (json.loads(g) if isinstance(g, str) else g for g in (g1, g2))
    # g1 shows (A, B); g2 shows (B, A): the original A's margin is g1[0]-g1[1] and g2[1]-g2[0].
    margin = ((g1[0] - g1[1]) + (g2[1] - g2[0])) / 2
    vote = next(v for v in judgebench[0].votes if v.judge == "reward_model:Skywork-Reward-Llama-3.1-8B")
    assert judgebench[0].item.id == record["pair_id"]
    assert vote.signals["margin"] == pytest.approx(margin)
    assert vote.p_a == pytest.approx(1 / (1 + math.exp(-margin)))


def _record(games, label="A>B"):
    return {"pair_id": "p", "label": label, "judgments": games}


def _game(decision, **judgment):
    return {"judgment": judgment, "decision": decision}


def test_verdict_strength_mapping() -> None:
    assert verdict_p_shown_a("... [[A>>B]]") == 0.9
    assert verdict_p_shown_a("[[A>B]]") == 0.7
    assert verdict_p_shown_a("[[A=B]]") == 0.5
    assert verdict_p_shown_a("[[B>A]]") == pytest.approx(0.3)
    assert verdict_p_shown_a("[[B>>A]]") == pytest.approx(0.1)
    assert verdict_p_shown_a("first [[A>>B]] then, on reflection, [[B>A]]") == pytest.approx(0.3)  # the last
    assert verdict_p_shown_a("no verdict here") is None


def test_arena_hard_vote_by_hand() -> None:
    # g1: A strongly better. g2 (swapped): shown A = original B, weakly better -> original A at 0.3.
    record = _record([_game("A>B", response="[[A>>B]]"), _game("A>B", response="[[A>B]]")])
    vote = vote_from_record(record, "arena_hard:x", "verdict")
    assert vote.choice is None and vote.error == "games disagree"
    assert vote.p_a == pytest.approx((0.9 + 0.3) / 2)
    assert vote.samples == ["A", "B"]
    record = _record([_game("A>B", response="[[A>>B]]"), _game("B>A", response="[[B>A]]")])
    vote = vote_from_record(record, "arena_hard:x", "verdict")
    assert vote.choice == "A" and vote.p_a == pytest.approx((0.9 + 0.7) / 2) and vote.confidence == vote.p_a


def test_reward_vote_with_disagreeing_games_keeps_p_a() -> None:
    record = _record([_game("A>B", scores=[2.0, 1.0]), _game("A>B", scores="[3.0, 0.5]")])
    vote = vote_from_record(record, "reward_model:x", "reward")
    # g2's shown A is the original B: original A margin -2.5; mean (1 - 2.5) / 2 = -0.75.
    assert vote.error == "games disagree" and vote.choice is None
    assert vote.signals["margin"] == pytest.approx(-0.75)
    assert vote.p_a == pytest.approx(sigmoid(-0.75))


def test_rubric_soft_laplace_rule() -> None:
    record = _record(
        [_game("A>B", score_A="1.0", score_B="0.0"), _game("B>A", score_A=0.5, score_B=1.0)]
    )
    vote = vote_from_record(record, "rubric:x", "rubric")
    # d1 = 1.0, d2 = 1.0 - 0.5 = 0.5 -> wins 1.0 and 0.75 -> (1.75 + 1) / 4.
    assert vote.choice == "A" and vote.p_a == pytest.approx(2.75 / 4)
    assert vote.signals["margin"] == pytest.approx(0.75)
    # A failed grading (-1) counts the game's decision as a hard result; ties are invalid votes.
    record = _record([_game("B>A", score_A=-1.0, score_B=0.9), _game("A=B", score_A=0.8, score_B=0.8)])
    vote = vote_from_record(record, "rubric:x", "rubric")
    assert vote.choice == "B" and vote.p_a == pytest.approx((0 + 0.5 + 1) / 4)
    assert vote.signals["margin"] == 0.0
    vote = vote_from_record(_record([_game("A=B", score_A=1, score_B=1), _game(None, score_A=-1, score_B=-1)]), "r", "rubric")
    assert vote.tie and vote.outcome == "tie" and vote.error is None and vote.p_a == 0.5


def test_a_judges_a_equals_b_is_a_tie_vote(judgebench) -> None:
    """JudgeBench records "A=B": kept as a tie vote, not an invalid one (counted on the shared data)."""
    ties = Counter(v.judge for j in judgebench for v in j.votes if v.tie)
    assert ties["arena_hard:o1-mini"] == 5
    assert ties["no_rubric:Qwen3-1.7B"] == 124
    assert ties["reward_model:GRM-Gemma-2B-rewardmodel-ft"] == 0
    both = vote_from_record(_record([_game("A=B"), _game("A=B")]), "other:x", "decision")
    assert both.tie and both.p_a == 0.5
    with_null = vote_from_record(_record([_game("A=B"), _game(None)]), "other:x", "decision")
    assert with_null.tie
    disagree = vote_from_record(_record([_game("A>B"), _game("A>B")]), "other:x", "decision")  # g2 flipped: B
    assert not disagree.tie and disagree.error == "games disagree"


def test_decision_only_laplace_fallback() -> None:
    vote = vote_from_record(_record([_game("A>B"), _game("B>A")]), "other:x", "decision")
    assert vote.choice == "A" and vote.p_a == pytest.approx(3 / 4)
    vote = vote_from_record(_record([_game("A=B"), _game("B>A")]), "other:x", "decision")
    assert vote.choice == "A" and vote.p_a == pytest.approx((1 + 0.5 + 1) / 4)
    vote = vote_from_record(_record([_game(None), _game(None)]), "other:x", "decision")
    assert vote.error == "no decision" and vote.p_a is None


def test_judge_names_from_file_names(shared_data: Path) -> None:
    names = {judge_name_from_path(p, _hint(p)) for p in _outputs(shared_data)}
    assert names == set(EXPECTED)
    with pytest.raises(DatasetError, match="judge_name="):
        judge_name_from_path("results.jsonl")


# ---------------------------------------------------------------- faults name file, line, field


def _cut(shared_data: Path, tmp_path: Path, n: int = 3) -> tuple[Path, Path]:
    """The first n pairs and o1-mini's judgments of them (JudgeBench, MIT), copied to tmp_path."""
    src = shared_data / "judgebench"
    pairs = tmp_path / PAIRS
    pairs.write_text("".join(_lines(src / PAIRS)[:n]))
    arena = next(p for p in _outputs(shared_data) if "arena_hard" in p.name)
    out = tmp_path / arena.name
    out.write_text("".join(_lines(arena)[:n]))
    return pairs, out


def _edit(path: Path, line: int, change) -> None:
    lines = path.read_text().splitlines(keepends=True)
    record = json.loads(lines[line - 1])
    change(record)
    lines[line - 1] = json.dumps(record) + "\n"
    path.write_text("".join(lines))


def test_small_cut_loads(shared_data: Path, tmp_path: Path) -> None:
    pairs, out = _cut(shared_data, tmp_path)
    items = load_judgebench(pairs, [out])
    assert len(items) == 3 and [v.judge for v in items[0].votes] == ["arena_hard:o1-mini"]


def test_unknown_label(shared_data: Path, tmp_path: Path) -> None:
    pairs, out = _cut(shared_data, tmp_path)
    _edit(pairs, 2, lambda r: r.update(label="C>A"))
    with pytest.raises(DatasetError) as info:
        load_judgebench(pairs, [out])
    err = info.value
    assert (err.path, err.line, err.field) == (pairs, 2, "label")
    assert str(err).startswith(f"{pairs}:2: field 'label': unknown label 'C>A'")


def test_unknown_decision_is_an_error_when_strict(shared_data: Path, tmp_path: Path) -> None:
    pairs, out = _cut(shared_data, tmp_path)
    _edit(out, 3, lambda r: r["judgments"][1].update(decision="A>>B"))
    with pytest.raises(DatasetError, match=r":3: field 'judgments\[1\].decision': undefined answer 'A>>B'") as info:
        load_judgebench(pairs, [out], answers=UndefinedAnswers(strict=True))
    assert info.value.path == out


def test_unknown_decision_is_an_invalid_game_by_default(shared_data: Path, tmp_path: Path) -> None:
    pairs, out = _cut(shared_data, tmp_path)
    _edit(out, 3, lambda r: [g.update(decision="A>A") for g in r["judgments"]])
    answers = UndefinedAnswers()
    items = load_judgebench(pairs, [out], answers=answers)
    vote = items[2].votes[0]
    assert vote.choice is None and vote.error is not None and "undefined answer 'A>A'" in vote.error
    assert [(a.line, a.field, a.value) for a in answers.found] == [
        (3, "judgments[0].decision", "A>A"),
        (3, "judgments[1].decision", "A>A"),
    ]
    assert answers.per_judge() == {"arena_hard:o1-mini": 2}
    (summary,) = answers.summary()
    assert f"{out}: 2 answers the format does not define" in summary and f"first at {out}:3" in summary


def test_malformed_json(shared_data: Path, tmp_path: Path) -> None:
    pairs, out = _cut(shared_data, tmp_path)
    lines = out.read_text().splitlines(keepends=True)
    lines[1] = lines[1][:50] + "\n"
    out.write_text("".join(lines))
    with pytest.raises(DatasetError, match="malformed JSON") as info:
        load_judgebench(pairs, [out])
    assert (info.value.path, info.value.line) == (out, 2)


def test_missing_required_key(shared_data: Path, tmp_path: Path) -> None:
    pairs, out = _cut(shared_data, tmp_path)
    _edit(pairs, 1, lambda r: r.pop("response_B"))
    with pytest.raises(DatasetError, match=r":1: field 'response_B': required key is missing"):
        load_judgebench(pairs, [out])
    pairs, out = _cut(shared_data, tmp_path)
    _edit(out, 2, lambda r: r.pop("judgments"))
    with pytest.raises(DatasetError, match=r":2: field 'judgments': required key is missing"):
        load_judgebench(pairs, [out])


def test_output_pair_not_in_pairs_file(shared_data: Path, tmp_path: Path) -> None:
    pairs, out = _cut(shared_data, tmp_path)
    _edit(out, 1, lambda r: r.update(pair_id="nope"))
    with pytest.raises(DatasetError, match=r":1: field 'pair_id': pair 'nope' is not in the pairs file"):
        load_judgebench(pairs, [out])


def test_bad_reward_scores(shared_data: Path, tmp_path: Path) -> None:
    pairs, _ = _cut(shared_data, tmp_path)
    src = next(p for p in _outputs(shared_data) if "internlm2-7b" in p.name)
    out = tmp_path / src.name
    out.write_text("".join(_lines(src)[:3]))
    _edit(out, 2, lambda r: r["judgments"][0]["judgment"].update(scores="[1.0]"))
    with pytest.raises(DatasetError, match=r":2: field 'judgments\[0\].judgment.scores': must be a list of two"):
        load_judgebench(pairs, [out])
