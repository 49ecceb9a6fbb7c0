"""A judge that disagrees with the rest far more than chance allows: found without labels and
said in ``judgefuse eval`` (judgefuse/fusion/judge_outliers.py, issue 43)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from judgefuse.cli import main
from judgefuse.evaluation.runner import EvaluationOptions, evaluate
from judgefuse.fusion.judge_outliers import judge_warnings
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem

ACCURACIES = (0.60, 0.65, 0.70, 0.75, 0.75)


def _items(n: int, *, seed: int = 0, broken: str | None = None, prior_a: float = 0.5) -> list[JudgedItem]:
    """Five independent judges (confidence uninformative); ``broken`` makes the last one
    ``inverted`` (right 25% of the time), ``biased`` (A on every item shown in one order, half
    of them), or ``flipped`` (30% of its answers flipped at random: a 0.60 judge)."""
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n):
        truth = "A" if rng.random() < prior_a else "B"
        votes = []
        for k, accuracy in enumerate(ACCURACIES):
            last = k == len(ACCURACIES) - 1
            right = rng.random() < (0.25 if last and broken == "inverted" else accuracy)
            choice = truth if right else ("B" if truth == "A" else "A")
            if last and broken == "biased" and rng.random() < 0.5:
                choice = "A"
            if last and broken == "flipped" and rng.random() < 0.3:
                choice = "B" if choice == "A" else "A"
            votes.append(JudgeVote(judge=f"j{k + 1}", mode="sc", choice=choice, confidence=0.8))  # type: ignore[arg-type]
        label = truth if i % 2 == 0 else None  # half of them labelled: the check needs no label
        item = PairwiseItem(id=f"i{i}", question="q", answer_a="a", answer_b="b", label=label)  # type: ignore[arg-type]
        items.append(JudgedItem(item=item, votes=votes))
    return items


def _batches(items: list[JudgedItem]) -> list[list[JudgeVote]]:
    return [judged.votes for judged in items]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_honest_panels_raise_no_warning(seed: int) -> None:
    assert judge_warnings(_batches(_items(1000, seed=seed))) == []
    # unequal labels make every judge's two disagreement rates differ, the same way for each
    assert judge_warnings(_batches(_items(1000, seed=seed, prior_a=0.8))) == []
    # random flips make an honest-looking weaker judge: agreement cannot tell (said, not hidden)
    assert judge_warnings(_batches(_items(1000, seed=seed, broken="flipped"))) == []


def test_an_inverted_judge_is_named() -> None:
    (warning,) = judge_warnings(_batches(_items(300, broken="inverted")))
    assert (warning.judge, warning.kind) == ("j5", "inverted")
    assert warning.disagreement > 0.6 and "j5" in warning.message and "wrong way" in warning.message


def test_a_position_biased_judge_is_named() -> None:
    (warning,) = judge_warnings(_batches(_items(300, broken="biased")))
    assert (warning.judge, warning.kind) == ("j5", "one_sided")
    assert warning.a_when_others_b is not None and warning.b_when_others_a is not None
    assert warning.a_when_others_b > 0.5 > 0.25 > warning.b_when_others_a
    assert "says A on" in warning.message


def test_too_few_judges_or_items_say_nothing() -> None:
    two = [[v for v in votes if v.judge in ("j1", "j5")] for votes in _batches(_items(300, broken="inverted"))]
    assert judge_warnings(two) == []
    assert judge_warnings(_batches(_items(20, broken="inverted"))) == []


def test_eval_warns_naming_the_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    items = _items(300, broken="biased")
    evaluation = evaluate(items, options=EvaluationOptions(methods=("majority", "dawid_skene"), n_bootstrap=10))
    assert [w.judge for w in evaluation.judge_warnings] == ["j5"]
    monkeypatch.setenv("COLUMNS", "200")
    data, report = tmp_path / "votes.jsonl", tmp_path / "report.json"
    data.write_text("".join(judged.model_dump_json(exclude_defaults=True) + "\n" for judged in items))
    args = ["eval", str(data), "--format", "votes", "--methods", "majority", "dawid_skene", "--bootstrap", "10"]
    assert main([*args, "--json", str(report)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "warning: judge j5 says A on" in out and "majority, dawid_skene weigh it like any other judge" in out
    assert [w["judge"] for w in json.loads(report.read_text())["judge_warnings"]] == ["j5"]


def test_the_html_report_names_the_judge_and_what_auto_chose(tmp_path: Path) -> None:
    """The page says what the terminal says: the judge warning, and ``auto``'s choice per fold."""
    items = _items(300, broken="biased")
    data, page = tmp_path / "votes.jsonl", tmp_path / "report.html"
    data.write_text("".join(judged.model_dump_json(exclude_defaults=True) + "\n" for judged in items))
    args = ["eval", str(data), "--format", "votes", "--methods", "majority", "auto", "--bootstrap", "10", "--quiet"]
    assert main([*args, "--html", str(page)]) == 0
    html = page.read_text()
    warnings = html.split('<ul id="judge-warnings">', 1)[1].split("</ul>", 1)[0]
    assert "judge j5 says A on" in warnings
    chosen = html.split('<ul id="chosen">', 1)[1].split("</ul>", 1)[0]
    assert chosen.startswith("<li>auto chose ") and " in " in chosen  # "<candidate> in k of 5 folds ..."


def test_the_html_report_has_no_such_sections_without_them(tmp_path: Path) -> None:
    items = _items(300)
    data, page = tmp_path / "votes.jsonl", tmp_path / "report.html"
    data.write_text("".join(judged.model_dump_json(exclude_defaults=True) + "\n" for judged in items))
    args = ["eval", str(data), "--format", "votes", "--methods", "majority", "--bootstrap", "10", "--quiet"]
    assert main([*args, "--html", str(page)]) == 0
    html = page.read_text()
    assert 'id="judge-warnings"' not in html and 'id="chosen"' not in html
