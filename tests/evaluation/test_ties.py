"""Ties as vote and label outcomes offline: loaders keep what the source says, the metrics say
how ties count (docs/offline-evaluation.md, 'Ties'), and ``judgefuse eval`` reads a CSV with ties.

Fixtures (tests/evaluation/fixtures/README.md gives source and licence): three JudgeBench pairs
whose o1-mini judgments say ``A=B``, a hand-written CSV and votes JSONL. The expected numbers of
the CSV are computed by hand in the comments below.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judgefuse.cli import main
from judgefuse.evaluation.judge_command import read_pairs
from judgefuse.evaluation.loaders import DatasetError, load, load_csv
from judgefuse.evaluation.runner import EvaluationOptions, evaluate
from judgefuse.evaluation.ties import tie_report

FIXTURES = Path(__file__).parent / "fixtures"
CSV = FIXTURES / "pairs_with_ties.csv"
HEADER = "id,question,answer_a,answer_b,label,vote:j1,confidence:j1\n"


def test_judgebench_a_equals_b_twice_is_a_tie_vote() -> None:
    items = {judged.item.id[:8]: judged for judged in load(FIXTURES / "judgebench_ties")}
    tied = items["30756abc"].votes[0]
    assert (tied.outcome, tied.p_a, tied.error, tied.valid) == ("tie", 0.5, None, False)
    # a tie in one game and a decided game: the decided game's letter (JudgeBench's sum rule)
    assert items["a7f0a43a"].votes[0].outcome == "B" and items["0437ca17"].votes[0].outcome == "B"


def test_votes_jsonl_keeps_tie_labels_and_tie_votes() -> None:
    items = {judged.item.id: judged for judged in load(FIXTURES / "ties_votes.jsonl")}
    assert [items[i].item.outcome for i in ("t1", "t2", "t3")] == ["tie", "both_bad", "A"]
    assert items["t1"].item.label is None and items["t1"].item.tie_label == "tie"
    assert [v.outcome for v in items["t1"].votes] == ["tie", "A"]
    assert items["t3"].votes[1].tie and items["t3"].votes[1].p_a == 0.5


def test_csv_loader_reads_labels_votes_and_quoted_cells() -> None:
    items = {judged.item.id: judged for judged in load(CSV)}
    assert [items[f"r{i}"].item.outcome for i in range(1, 10)] == ["A", "B", "tie", "A", "B", "both_bad", "tie", "A", None]
    assert items["r8"].item.answer_a == "two\nlines, quoted"
    assert items["r1"].item.category == "math"
    j1, j2 = items["r2"].votes
    assert (j1.judge, j1.choice, j1.confidence) == ("j1", "B", 0.8)
    assert (j2.choice, j2.confidence, j2.p_a) == ("A", 0.6, 0.6)  # from p_a:j2
    assert items["r8"].votes[1].choice == "B" and items["r8"].votes[1].confidence == pytest.approx(0.6)
    assert [v.outcome for v in items["r7"].votes] == ["A", "tie"]  # "A=B" in a vote cell


@pytest.mark.parametrize(
    ("text", "line", "field", "reason"),
    [
        (HEADER + "x,q,a,b,C,A,0.9\n", 2, "label", "unknown label 'C'"),
        (HEADER + "x,q,a,b,A,maybe,0.9\n", 2, "vote:j1", "unknown vote 'maybe'"),
        (HEADER + "x,q,a,b,A,A,\n", 2, "vote:j1", "needs confidence:j1 or p_a:j1"),
        (HEADER + "x,q,a,b,A,A,1.5\n", 2, "confidence:j1", "must be in [0, 1]"),
        (HEADER + "x,q,a,b,A,A,high\n", 2, "confidence:j1", "must be a number"),
        (HEADER + "x,q,a,b,A,A,0.9\nx,q,a,b,B,B,0.9\n", 3, "id", "duplicate id 'x' (first at line 2)"),
        ("id,question,answer_a,answer_b,labl\n", 1, "labl", "unknown column"),
        ("id,question,answer_a,label\n", 1, "answer_b", "required column is missing"),
        ("question,answer_a,answer_b,confidence:j3\n", 1, "confidence:j3", "no vote:j3 column"),
        (HEADER + "x,q,a,b,A,A,0.9,extra\n", 2, None, "8 cells for 7 columns"),
    ],
)
def test_csv_faults_name_line_and_column(tmp_path: Path, text: str, line: int, field: str | None, reason: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        load_csv(path)
    assert (caught.value.line, caught.value.field) == (line, field)
    assert reason in caught.value.reason
    assert str(caught.value).startswith(f"{path}:{line}: ")


def test_tie_report_by_hand() -> None:
    # labels A, B, tie, both_bad, A; answers A, tie, tie, B, None
    report = tie_report("x", ["A", "tie", "tie", "B", None], ["A", "B", "tie", "both_bad", "A"])
    assert (report.n_decided_labels, report.n_tie_labels, report.n_both_bad_labels) == (3, 1, 1)
    assert report.judgebench_accuracy == pytest.approx(1 / 3)  # only item 1; the tie on B scores 0
    assert report.decided_accuracy == 1.0 and report.n_decided_answers == 1
    assert report.three_way_accuracy == pytest.approx(2 / 4) and report.n_three_way == 4
    assert report.n_tie_answers == 2 and report.tie_rate == pytest.approx(2 / 5)
    # how often a tie answer is right: of the two (on B and on tie), the one on the tie label
    assert report.tie_precision == pytest.approx(1 / 2) and report.n_tie_answers_scored == 2
    assert report.tie_recall == 1.0  # the one tie label was answered tie
    empty = tie_report("y", [], [])
    assert empty.tie_rate is None and empty.three_way_accuracy is None
    assert empty.tie_precision is None and empty.tie_recall is None
    # a tie answer on a both_bad label is not scored (neither right nor wrong as a three-way answer)
    bad = tie_report("z", ["tie", "A"], ["both_bad", "tie"])
    assert (bad.tie_precision, bad.n_tie_answers_scored, bad.tie_recall) == (None, 0, 0.0)


def test_evaluate_csv_ties_by_hand() -> None:
    evaluation = evaluate(load(CSV), options=EvaluationOptions(methods=("majority",), n_bootstrap=10))
    ties = {t.name: t for t in evaluation.ties}
    # j1 on r1..r8: A B tie tie A B A A against labels A B tie A B both_bad tie A.
    j1 = ties["j1"]
    assert (j1.n_decided_labels, j1.n_tie_labels, j1.n_both_bad_labels) == (5, 2, 1)
    assert j1.judgebench_accuracy == pytest.approx(3 / 5)  # r1 r2 r8; r4's tie and r5 wrong
    assert j1.decided_accuracy == pytest.approx(3 / 4)  # r4's tie left out
    assert j1.three_way_accuracy == pytest.approx(4 / 7)  # r1 r2 r3 r8 of all but r6
    assert j1.tie_rate == pytest.approx(2 / 8)
    # j2: A A B A tie tie tie B
    j2 = ties["j2"]
    assert (j2.judgebench_accuracy, j2.decided_accuracy) == (pytest.approx(2 / 5), pytest.approx(2 / 4))
    assert j2.three_way_accuracy == pytest.approx(3 / 7) and j2.tie_rate == pytest.approx(3 / 8)
    # the main rows (accuracy, calibration) are on the five decided items; a judge's tie is n_ties
    row = evaluation.row("j1")
    assert row.row.correct.size == 5 and row.metrics["accuracy"] == pytest.approx(3 / 5)
    assert (row.row.n_ties, row.row.n_invalid) == (1, 0)
    # majority (tie votes are p_a 0.5): r1 A, r2 B (tie broken by 0.8), r3 B, r4 A, r5 A, r6 B, r7 A, r8 A
    majority = ties["majority"]
    assert majority.n_tie_answers == 0
    assert majority.judgebench_accuracy == pytest.approx(4 / 5)  # r1 r2 r4 r8
    assert majority.three_way_accuracy == pytest.approx(4 / 7)
    # j1 answered tie on r3 (label tie) and r4 (label A): right once; r7's tie label it answered A
    assert (j1.tie_precision, j1.n_tie_answers_scored, j1.tie_recall) == (pytest.approx(1 / 2), 2, pytest.approx(1 / 2))


def test_eval_command_over_a_csv_with_ties(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, html = tmp_path / "report.json", tmp_path / "report.html"
    code = main(["eval", str(CSV), "--methods", "majority", "mean_probability", "--bootstrap", "20",
                 "--json", str(out), "--html", str(html), "--quiet"])
    assert code == 0
    assert "9 items, 5 labelled A/B (+3 tie/both_bad)" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["n_labelled"] == 5 and "decided items" in report["metrics_on"]
    rows = {row["name"]: row for row in report["rows"]}
    assert rows["j1"]["n"] == 5 and rows["j1"]["n_ties"] == 1
    assert rows["j1"]["ties"]["three_way_accuracy"] == pytest.approx(4 / 7)
    assert rows["j2"]["ties"]["tie_rate"] == pytest.approx(3 / 8)
    assert rows["mean_probability"]["ties"]["n_tie_labels"] == 2
    page = html.read_text()
    assert '<table id="ties">' in page and "57.1" in page  # j1's three-way accuracy in percent
    assert main(["eval", str(CSV), "--methods", "majority", "--bootstrap", "20", "--wide"]) == 0
    printed = capsys.readouterr().out
    assert "3-way" in printed and "decided (A/B) labels only" in printed and "57.1" in printed


def test_judge_reads_the_pairs_of_a_csv() -> None:
    items = read_pairs(CSV)
    assert [item.id for item in items] == [f"r{i}" for i in range(1, 10)]
    assert items[2].tie_label == "tie" and items[5].outcome == "both_bad"


def test_compare_reads_a_csv_and_a_bad_row_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(CSV), "--judges", "j1", "j2", "--bootstrap", "10"]) == 0
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + "x,q,a,b,A,A,2\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["eval", str(bad), "--quiet"]) == 2
    assert f"{bad}:2: field 'confidence:j1': must be in [0, 1] (got 2)" in capsys.readouterr().err


def test_compare_has_evals_ties_table_in_terminal_json_and_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``compare``'s ties table is ``eval``'s, per judge: the same numbers in all three outputs."""
    out, html = tmp_path / "compare.json", tmp_path / "compare.html"
    assert main(["compare", str(CSV), "--judges", "j1", "j2", "--bootstrap", "10",
                 "--json", str(out), "--html", str(html)]) == 0
    printed = capsys.readouterr().out
    assert "3-way" in printed and "decided (A/B) labels only" in printed
    j1_line = next(line for line in printed.splitlines() if line.startswith("j1 ") and "57.1" in line)
    assert "60.0" in j1_line and "75.0" in j1_line and "25.0" in j1_line  # JB, dec, tie % (by hand above)
    evaluation = evaluate(load(CSV), options=EvaluationOptions(methods=("majority",), n_bootstrap=10))
    expected = {t.name: t.as_dict() for t in evaluation.ties if t.name in ("j1", "j2")}
    assert {t["name"]: t for t in json.loads(out.read_text())["ties"]} == expected
    page = html.read_text()
    assert page.count('<table id="ties">') == 1 and "<h2>Ties</h2>" in page
    assert "<tr><td>j2</td><td>5</td><td>2</td><td>1</td>" in page and "42.9" in page  # j2's 3-way 3/7


def test_compare_without_ties_shows_no_ties_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "plain.csv"
    plain.write_text("id,question,answer_a,answer_b,label,vote:j1,confidence:j1,vote:j2,confidence:j2\n"
                     + "".join(f"r{i},q,a,b,{'AB'[i % 2]},A,0.{5 + i % 4},B,0.7\n" for i in range(12)), encoding="utf-8")
    html = tmp_path / "c.html"
    assert main(["compare", str(plain), "--judges", "j1", "j2", "--bootstrap", "10", "--html", str(html)]) == 0
    assert "3-way" not in capsys.readouterr().out and 'id="ties"' not in html.read_text()


def _tied_items(n: int, label: str = "A") -> list:
    """``n`` items where two judges disagree at equal confidence: every vote-share rule ties."""
    from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem

    return [
        JudgedItem(
            item=PairwiseItem(id=f"tie{i}", question="q", answer_a="a", answer_b="b", label=label),  # type: ignore[arg-type]
            votes=[
                JudgeVote(judge="j1", mode="sc", choice="A", confidence=0.8),
                JudgeVote(judge="j2", mode="sc", choice="B", confidence=0.8),
            ],
        )
        for i in range(n)
    ]


def test_a_fused_exact_tie_counts_half_right_whatever_the_seed() -> None:
    """Issue 43: a seeded coin per tie moved a voting row with the seed. Half of a row's ties are
    scored right (an odd one out wrong), at confidence 0.5, the same for every seed, per item and
    over arrays."""
    from judgefuse.evaluation.scoring import score_verdicts, tie_halves
    from judgefuse.fusion import get_method

    items = [*_tied_items(7, "A"), *_tied_items(6, "B")]
    items = [judged.model_copy(update={"item": judged.item.model_copy(update={"id": f"t{k}"})})
             for k, judged in enumerate(items)]  # fmt: skip
    accuracies = set()
    for seed in range(4):
        evaluation = evaluate(items, options=EvaluationOptions(methods=("majority",), n_bootstrap=10, seed=seed))
        row = evaluation.row("majority")
        assert row.row.n_ties == 13 and set(row.row.confidence.tolist()) == {0.5}
        assert int(row.row.correct.sum()) == 6  # 13 // 2
        assert row.metrics["brier"] == pytest.approx(0.25)
        accuracies.add(row.metrics["accuracy"])
    assert accuracies == {6 / 13}
    # the per-item scoring (the reference of the columnar one) scores the same items right
    verdicts = [get_method("majority")(judged.votes) for judged in items]
    per_item = score_verdicts("majority", items, verdicts)
    assert per_item.correct.tolist() == evaluation.row("majority").row.correct.tolist()
    assert tie_halves([]).size == 0 and tie_halves(["x"]).tolist() == [False]
    assert int(tie_halves([f"id{k}" for k in range(1000)]).sum()) == 500
