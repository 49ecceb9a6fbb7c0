"""The cascade engine (fusion/cascade.py) on hand-built votes: who decides, escalation, calls."""

from __future__ import annotations

import pytest

from judgefuse.fusion.cascade import (
    Cascade,
    CascadeStage,
    run_cascade,
    run_cascade_async,
    run_cascade_detailed,
    vote_calls,
)
from judgefuse.fusion.cascade_tuning import evaluate_cascade, tune_cascade
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem

CHEAP, MID, BIG = "cheap", "mid", "big"


def v(judge: str, choice: str | None, conf: float | None = None, *, calls: int = 1, cost: float = 0.0,
      tokens: tuple[int, int] = (0, 0), mode: str = "sc") -> JudgeVote:
    if choice is None:
        return JudgeVote.invalid(judge, mode, "broken", calls=calls, cost_usd=cost)  # type: ignore[arg-type]
    return JudgeVote(judge=judge, mode=mode, choice=choice, confidence=conf, calls=calls, cost_usd=cost,  # type: ignore[arg-type]
                     prompt_tokens=tokens[0], completion_tokens=tokens[1])


def three_stage(t1: float | None = 0.9, t2: float | None = 0.8, t3: float | None = 0.7, **kw) -> Cascade:
    return Cascade((CascadeStage((CHEAP,), t1), CascadeStage((MID,), t2), CascadeStage((BIG,), t3)), **kw)


def test_first_stage_accepts_and_only_its_vote_is_counted() -> None:
    votes = [v(CHEAP, "A", 0.95, cost=0.001, tokens=(10, 2)), v(MID, "B", 0.99, calls=3, cost=0.01), v(BIG, "B", 0.99, calls=10)]
    d = run_cascade_detailed(three_stage(), votes)
    assert d.stage == 0 and d.accepted and d.stages_consulted == 1
    assert (d.calls, d.cost_usd, d.prompt_tokens, d.completion_tokens) == (1, 0.001, 10, 2)
    verdict = d.verdict
    assert (verdict.choice, verdict.confidence, verdict.route, verdict.threshold) == ("A", 0.95, "auto_accept", 0.9)
    assert verdict.method == "cascade" and verdict.model_version == "cascade:1/3:cheap"
    assert [x.judge for x in verdict.votes] == [CHEAP]
    assert any("stage 1/3 (cheap) accepted" in n for n in verdict.notes)


def test_escalation_to_the_stage_that_is_sure() -> None:
    votes = {CHEAP: v(CHEAP, "A", 0.6), MID: v(MID, "B", 0.85, calls=2, cost=0.02), BIG: v(BIG, "B", 0.99, calls=5)}
    d = run_cascade_detailed(three_stage(), votes)
    assert d.stage == 1 and d.calls == 3 and d.cost_usd == pytest.approx(0.02)
    assert d.verdict.choice == "B" and d.verdict.model_version == "cascade:2/3:mid" and d.verdict.threshold == 0.8
    assert [x.judge for x in d.verdict.votes] == [CHEAP, MID]
    assert any("stage 1/3 (cheap) confidence 0.6 below threshold 0.9: escalated" in n for n in d.verdict.notes)


def test_nobody_sure_goes_to_review_with_all_calls() -> None:
    votes = [v(CHEAP, "A", 0.6), v(MID, "A", 0.7), v(BIG, "B", 0.65, calls=4)]
    d = run_cascade_detailed(three_stage(), votes)
    assert d.stage is None and not d.accepted and d.stages_consulted == 3 and d.calls == 6
    assert d.verdict.route == "human_review" and d.verdict.model_version == "cascade:review"
    assert d.verdict.choice == "B" and d.verdict.threshold is None  # the last stage's suggestion


def test_invalid_vote_escalates_even_with_threshold_zero() -> None:
    votes = [v(CHEAP, None), v(MID, "B", 0.55)]
    d = run_cascade_detailed(Cascade((CascadeStage((CHEAP,), 0.0), CascadeStage((MID,), 0.0))), votes)
    assert d.stage == 1 and d.verdict.choice == "B" and d.verdict.degraded
    assert any("no usable verdict" in n for n in d.verdict.notes)


def test_panel_fallback_reuses_votes_and_asks_only_the_rest() -> None:
    cascade = Cascade((CascadeStage((CHEAP,), 0.9), CascadeStage((MID,), None)), fallback="panel",
                      panel_judges=(CHEAP, MID, BIG))
    votes = [v(CHEAP, "A", 0.6), v(MID, "A", 0.7), v(BIG, "B", 0.9, calls=2)]
    d = run_cascade_detailed(cascade, votes)
    # stage 2 never accepts; the panel (majority of 3) says A with 2/3 and accepts (threshold 0)
    assert d.stage == 2 and d.verdict.choice == "A" and d.verdict.confidence == pytest.approx(2 / 3)
    assert d.calls == 4 and d.verdict.model_version == "cascade:3/3:panel"
    assert any("has no threshold" in n for n in d.verdict.notes)
    strict = Cascade(cascade.stages, fallback="panel", panel_judges=(CHEAP, MID, BIG), panel_threshold=0.9)
    assert run_cascade(strict, votes).route == "human_review"


def test_multi_judge_stage_fuses_its_subset() -> None:
    cascade = Cascade((CascadeStage((CHEAP,), 0.95), CascadeStage((MID, BIG), 0.6, method="confidence_weighted")))
    votes = [v(CHEAP, "A", 0.9), v(MID, "B", 0.8), v(BIG, "B", 0.6)]
    verdict = run_cascade(cascade, votes)
    assert verdict.choice == "B" and verdict.confidence == pytest.approx(1.0) and verdict.route == "auto_accept"
    assert verdict.model_version == "cascade:2/2:mid+big"


def test_missing_judge_is_an_invalid_vote_not_a_crash() -> None:
    verdict = run_cascade(three_stage(), [v(CHEAP, "A", 0.5)])
    assert verdict.route == "human_review" and verdict.choice is None
    assert [x.error for x in verdict.votes[1:]] == ["no vote available for this judge"] * 2


async def test_async_runner_fetches_stage_by_stage() -> None:
    asked: list[list[str]] = []
    pool = {CHEAP: v(CHEAP, "A", 0.6), MID: v(MID, "A", 0.95), BIG: v(BIG, "B", 0.99)}

    async def fetch(names):
        asked.append(list(names))
        return [pool[n] for n in names]

    d = await run_cascade_async(three_stage(), fetch)
    assert asked == [[CHEAP], [MID]] and d.stage == 1 and d.verdict.choice == "A"


def test_recorded_votes_count_one_call() -> None:
    assert vote_calls(JudgeVote.from_p_a("x", "recorded", 0.8)) == 1
    assert vote_calls(JudgeVote.from_p_a("x", "recorded", 0.8, calls=3)) == 3
    assert vote_calls(JudgeVote.from_p_a("x", "logprob", 0.8)) == 0  # e.g. a cache hit


def test_stage_and_cascade_validation() -> None:
    with pytest.raises(ValueError):
        CascadeStage(())
    with pytest.raises(ValueError):
        CascadeStage((CHEAP, CHEAP))
    with pytest.raises(ValueError):
        CascadeStage((CHEAP,), 1.5)
    with pytest.raises(ValueError):
        Cascade(())
    with pytest.raises(ValueError):
        Cascade((CascadeStage((CHEAP,)),), fallback="panel")
    assert CascadeStage(CHEAP).judges == (CHEAP,)  # type: ignore[arg-type]


def _items(n: int, seed: int = 0) -> list[JudgedItem]:
    """Cheap judge: sure and right on the first half; mid: right on everything it sees with 0.9."""
    import random

    rng = random.Random(seed)
    out = []
    for i in range(n):
        label = rng.choice("AB")
        wrong = "B" if label == "A" else "A"
        easy = i % 2 == 0
        cheap = v(CHEAP, label if easy else rng.choice("AB"), 0.99 if easy else 0.6, mode="recorded", calls=0)
        mid = v(MID, label if rng.random() < 0.97 else wrong, 0.9, mode="recorded", calls=0)
        big = v(BIG, label, 0.8, mode="recorded", calls=0)
        out.append(JudgedItem(item=PairwiseItem(id=f"i{i}", label=label), votes=[cheap, mid, big]))
    return out


def test_tune_cascade_on_synthetic_stages() -> None:
    items = _items(400)
    report = tune_cascade(items, three_stage(None, None, None), target_precision=0.9, delta=0.1, min_count=30)
    s1, s2, s3 = report.stages
    assert s1.n_reached == 400 and s1.threshold == 0.99 and s1.n_accepted == 200
    assert s2.n_reached == 200 and s2.threshold == 0.9 and s2.n_accepted == 200
    assert s3.n_reached == 0 and s3.threshold is None and s3.report is None
    ev = report.calibration
    assert ev.coverage == 1.0 and ev.accepted_by_stage == [200, 200, 0]
    assert ev.calls_per_item == pytest.approx(1.5)  # half stop at stage 1, half at stage 2
    assert ev.accuracy_accepted >= 0.95
    again = evaluate_cascade(items, report.cascade)
    assert again == ev
    bonf = tune_cascade(items, three_stage(None, None, None), target_precision=0.9, delta=0.1, delta_split="bonferroni")
    assert [s.delta for s in bonf.stages] == pytest.approx([0.1 / 3] * 3)
    # the default keeps the whole-cascade guarantee the report prints
    assert [s.delta for s in report.stages] == pytest.approx([0.1 / 3] * 3)
    assert report.delta_split == "bonferroni" and report.guarantee.startswith("whole cascade")
    assert report.as_dict()["guarantee"] == report.guarantee
    per = tune_cascade(items, three_stage(None, None, None), target_precision=0.9, delta=0.1, delta_split="per_stage")
    assert [s.delta for s in per.stages] == pytest.approx([0.1] * 3)
    assert "NOT guaranteed" in per.guarantee and "0.7" in per.guarantee  # 1 - 3 x 0.1


def test_panel_yaml_cascade(tmp_path) -> None:
    from judgefuse.fusion.cascade import cascade_from_config
    from judgefuse.judges.config import PanelConfigError, load_panel_config, parse_panel_config

    path = tmp_path / "panel.yaml"
    path.write_text(
        "name: p\nfusion: majority\njudges:\n"
        "  - {name: cheap, model: openai/a}\n  - {name: mid, model: openai/b}\n  - {name: big, model: openai/c}\n"
        "cascade:\n  - {judges: cheap, threshold: 0.93}\n  - {judges: [mid]}\n  - {judges: [mid, big], method: mean_probability, threshold: 0.8}\n"
        "cascade_fallback: panel\ncascade_panel_threshold: 0.7\n"
    )
    config = load_panel_config(path)
    cascade = cascade_from_config(config)
    assert cascade is not None
    assert [(s.judges, s.threshold, s.method) for s in cascade.stages] == [
        ((CHEAP,), 0.93, "majority"), ((MID,), None, "majority"), ((MID, BIG), 0.8, "mean_probability")
    ]
    assert (cascade.fallback, cascade.panel_judges, cascade.panel_threshold) == ("panel", (CHEAP, MID, BIG), 0.7)
    base = {"judges": [{"name": "cheap", "model": "m"}]}
    assert cascade_from_config(parse_panel_config(base)) is None
    for bad, where in [
        ({"cascade": [{"judges": ["nope"]}]}, "cascade[0] names unknown judges"),
        ({"cascade": [{"judges": ["cheap"], "threshold": 1.5}]}, "cascade[0].threshold"),
        ({"cascade": []}, "at least one stage"),
        ({"cascade_fallback": "panel"}, "needs a cascade"),
        ({"cascade": [{"judges": ["cheap", "cheap"]}]}, "twice"),
    ]:
        with pytest.raises(PanelConfigError, match=where.replace("[", r"\[").replace("]", r"\]")):
            parse_panel_config({**base, **bad})
