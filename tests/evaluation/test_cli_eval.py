"""``judgefuse eval`` / ``judgefuse compare`` from the command line, on the real data.

The metric checks recompute every number from the raw Trust-or-Escalate files with the ``json``
module and plain Python loops (no numpy, no judgefuse code), so they can disagree with the
product's vectorised path.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judgefuse.cli import main
from judgefuse.evaluation.loaders import load
from judgefuse.evaluation.runner import default_methods
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem

ROW_KEYS = ["name", "kind", "n", "accuracy", "ece", "adaptive_ce", "mce", "brier", "nll", "th_score", "macroce", "auroc"]
FRACTIONS = ["accuracy", "ece", "adaptive_ce", "mce", "brier", "macroce", "auroc"]
TOE_SUFFIX = ".calibration.jsonl"


# ------------------------------------------------------------------ independent metrics
def _toe_judge(path: Path) -> tuple[list[float], list[bool]]:
    """(confidence, correct) of one Trust-or-Escalate file, read with json and plain Python."""
    conf: list[float] = []
    correct: list[bool] = []
    with path.open(encoding="utf-8") as handle:
        for text in handle:
            if not text.strip():
                continue
            record = json.loads(text)
            p1, p2 = record["probs"]
            p_a = p1 / (p1 + p2)
            assert p_a != 0.5, f"{path.name}: an exact 0.5 would be an invalid vote; the test assumes none"
            choice = "A" if p_a > 0.5 else "B"
            truth = "A" if record["preferences"]["human"] == 1 else "B"
            conf.append(max(p_a, 1.0 - p_a))
            correct.append(choice == truth)
    return conf, correct


def _plain_ece(conf: list[float], correct: list[bool], n_bins: int = 10) -> float:
    bins: list[list[tuple[float, bool]]] = [[] for _ in range(n_bins)]
    for c, z in zip(conf, correct, strict=True):
        index = 0
        for i in range(n_bins):  # bin i = [i/n, (i+1)/n), last closed: the highest lower edge <= c
            if c >= i / n_bins:
                index = i
        bins[index].append((c, z))
    total = 0.0
    for members in bins:
        if members:
            acc = sum(1.0 for _, z in members if z) / len(members)
            mean_c = sum(c for c, _ in members) / len(members)
            total += len(members) / len(conf) * abs(acc - mean_c)
    return total


def _plain_mce(conf: list[float], correct: list[bool], n_bins: int = 10) -> float:
    worst = 0.0
    for i in range(n_bins):
        lo, hi = i / n_bins, (i + 1) / n_bins
        members = [(c, z) for c, z in zip(conf, correct, strict=True) if lo <= c < hi or (i == n_bins - 1 and c == 1.0)]
        if members:
            acc = sum(1.0 for _, z in members if z) / len(members)
            worst = max(worst, abs(acc - sum(c for c, _ in members) / len(members)))
    return worst


def _plain_brier(conf: list[float], correct: list[bool]) -> float:
    return sum((c - (1.0 if z else 0.0)) ** 2 for c, z in zip(conf, correct, strict=True)) / len(conf)


def _plain_nll(conf: list[float], correct: list[bool]) -> float:
    total = 0.0
    for c, z in zip(conf, correct, strict=True):
        p = min(max(c, 1e-12), 1.0 - 1e-12)
        total -= math.log(p) if z else math.log(1.0 - p)
    return total / len(conf)


def _plain_macroce(conf: list[float], correct: list[bool]) -> float:
    right = [1.0 - c for c, z in zip(conf, correct, strict=True) if z]
    wrong = [c for c, z in zip(conf, correct, strict=True) if not z]
    return (sum(right) / len(right) + sum(wrong) / len(wrong)) / 2.0


def _plain_th(conf: list[float], correct: list[bool], eps: float = 0.1) -> float:
    total = 0.0
    for members in (
        [z for c, z in zip(conf, correct, strict=True) if c >= 1.0 - eps - 1e-9],
        [z for c, z in zip(conf, correct, strict=True) if c <= eps + 1e-9],
    ):
        if members:
            acc = sum(1.0 for z in members if z) / len(members)
            total += (math.exp(acc - 0.5) - 1.0) * 100.0 * len(members) / len(conf)
    return total / 2.0


def _plain_auroc(conf: list[float], correct: list[bool]) -> float:
    pos = [c for c, z in zip(conf, correct, strict=True) if z]
    neg = [c for c, z in zip(conf, correct, strict=True) if not z]
    wins = 0.0
    for p in pos:
        for q in neg:
            wins += 1.0 if p > q else 0.5 if p == q else 0.0
    return wins / (len(pos) * len(neg))


def _strict_json(text: str) -> dict:
    def refuse(constant: str) -> None:
        raise AssertionError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


# ------------------------------------------------------------------ end to end on Trust-or-Escalate
def test_eval_toe_json_matches_independent_metrics(shared_data: Path, tmp_path: Path) -> None:
    toe = shared_data / "trust_or_escalate"
    out, html = tmp_path / "report.json", tmp_path / "report.html"
    code = main(["eval", str(toe), "--json", str(out), "--html", str(html), "--quiet", "--bootstrap", "50"])
    assert code == 0
    assert html.is_file() and html.stat().st_size > 0
    document = _strict_json(out.read_text(encoding="utf-8"))
    rows = {row["name"]: row for row in document["rows"]}
    assert len(rows) == len(document["rows"]), "duplicate row names"

    files = sorted(toe.glob(f"*{TOE_SUFFIX}"))
    judges = [f.name[: -len(TOE_SUFFIX)] for f in files]
    assert len(judges) == 3
    assert set(rows) == set(judges) | set(default_methods())
    assert document["skipped_methods"] == {}
    page = html.read_text(encoding="utf-8")
    assert page.count("<svg") == len(rows)
    for name in rows:
        assert f"<td>{name}</td>" in page, name

    for row in document["rows"]:
        assert list(row)[: len(ROW_KEYS)] == ROW_KEYS, row.keys()
        assert row["kind"] == ("judge" if row["name"] in judges else "fusion")
        assert row["n"] == 500
        for metric in FRACTIONS:
            assert 0.0 <= row[metric] <= 1.0, (row["name"], metric, row[metric])
        assert row["nll"] >= 0.0
        assert isinstance(row["th_score"], float)

    for path, name in zip(files, judges, strict=True):
        conf, correct = _toe_judge(path)
        row = rows[name]
        assert row["n"] == len(conf) == 500
        expected = {
            "accuracy": sum(1.0 for z in correct if z) / len(correct),
            "ece": _plain_ece(conf, correct),
            "mce": _plain_mce(conf, correct),
            "brier": _plain_brier(conf, correct),
            "nll": _plain_nll(conf, correct),
            "macroce": _plain_macroce(conf, correct),
            "th_score": _plain_th(conf, correct),
            "auroc": _plain_auroc(conf, correct),
        }
        for metric, value in expected.items():
            assert row[metric] == pytest.approx(value, abs=1e-9), (name, metric)
        print(name, {k: round(v, 4) for k, v in expected.items()})


def test_eval_subprocess_prints_the_table(shared_data: Path, tmp_path: Path) -> None:
    toe = shared_data / "trust_or_escalate"
    proc = subprocess.run(
        [sys.executable, "-m", "judgefuse.cli", "eval", str(toe), "--bootstrap", "20", "--methods", "majority", "stacked"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "judge / method" in proc.stdout
    for name in ("gpt-4-turbo", "gpt-3.5-turbo", "mistral-7b-instruct", "majority", "stacked", "Acc %", "ECE %"):
        assert name in proc.stdout, name
    assert "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == [], "eval without --json/--html must write no file"


# ------------------------------------------------------------------ bad input: exit 2, nothing written
def _vote_line(item_id: str, judge: str = "j1", confidence: float = 0.8, label: str | None = "A") -> dict:
    judged = JudgedItem(
        item=PairwiseItem(id=item_id, question="q", answer_a="a", answer_b="b", label=label),
        votes=[JudgeVote(judge=judge, mode="sc", choice="A", confidence=confidence)],
    )
    return judged.model_dump(mode="json")


def _run_bad(paths: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    (tmp_path / "out").mkdir(exist_ok=True)  # report folders must exist (a missing one is a usage error)
    out, html = tmp_path / "out" / "r.json", tmp_path / "out" / "r.html"
    before = sorted(p.name for p in tmp_path.iterdir())
    code = main(["eval", *paths, "--json", str(out), "--html", str(html), "--quiet", "--bootstrap", "10", *extra])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert not out.exists() and not html.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "a bad run must create nothing"
    assert list((tmp_path / "out").iterdir()) == []
    assert "Traceback" not in captured.err
    return captured.err


def test_malformed_jsonl_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "votes.jsonl"
    lines = [json.dumps(_vote_line("i1")), "{not json", json.dumps(_vote_line("i3"))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    err = _run_bad([str(path)], tmp_path, capsys, "--format", "votes")
    assert f"{path}:2:" in err
    assert "malformed JSON" in err


def test_votes_confidence_out_of_range(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "votes.jsonl"
    bad = _vote_line("i2")
    bad["votes"][0]["confidence"] = 1.7
    lines = [_vote_line("i1"), bad, _vote_line("i3")]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    err = _run_bad([str(path)], tmp_path, capsys)
    assert f"{path}:2:" in err
    assert "confidence" in err and "1.7" in err


def test_judgebench_unknown_label(shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = next((shared_data / "judgebench" / "outputs").glob("*judge_name=reward_model*internlm2-7b*.jsonl"))
    records = [json.loads(text) for text in source.read_text(encoding="utf-8").splitlines()[:8]]
    assert records[2]["label"] in ("A>B", "B>A")
    records[2]["label"] = "C>A"
    path = tmp_path / source.name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    err = _run_bad([str(path)], tmp_path, capsys)
    assert f"{path.name}:3:" in err
    assert "'label'" in err and "C>A" in err


def test_unknown_fusion_method_lists_known(shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _run_bad([str(shared_data / "trust_or_escalate")], tmp_path, capsys, "--methods", "majority", "no_such_method")
    assert "no_such_method" in err
    for known in ("majority", "stacked", "mean_probability"):
        assert known in err


def test_output_path_that_is_a_directory(shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "taken"
    target.mkdir()
    code = main(["eval", str(shared_data / "trust_or_escalate"), "--methods", "majority", "--quiet", "--bootstrap", "10", "--json", str(target)])
    captured = capsys.readouterr()
    assert code == 2  # a usage error, refused before any work
    assert str(target) in captured.err and "Traceback" not in captured.err
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]  # no temp file left beside it
    assert list(target.iterdir()) == []


# ------------------------------------------------------------------ compare
def test_compare_prints_three_views(shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["compare", str(shared_data / "trust_or_escalate"), "--judges", "gpt-4-turbo", "gpt-3.5-turbo", "--bootstrap", "300"]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    for view in ("raw", "instance-aligned", "distribution-aligned"):
        assert view in captured.out
    assert "gpt-4-turbo" in captured.out and "gpt-3.5-turbo" in captured.out
    # the only flip here is Brier 0.163 vs 0.164, inside resampling noise: named, and not a reversal
    assert "ranking reversal: no" in captured.out
    assert "Brier: no reliable difference" in captured.out and "no reversal" in captured.out
    assert "ECE: gpt-3.5-turbo is better (raw interval excludes 0)" in captured.out
    print(captured.out)


def test_compare_unknown_judge(shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["compare", str(shared_data / "trust_or_escalate"), "--judges", "gpt-4-turbo", "gpt-9"])
    captured = capsys.readouterr()
    assert code == 2
    assert "gpt-9" in captured.err
    for known in ("gpt-4-turbo", "gpt-3.5-turbo", "mistral-7b-instruct"):
        assert known in captured.err


# ------------------------------------------------------------------ LLMBar: the widest panel
def test_eval_llmbar_many_judges(shared_data: Path, tmp_path: Path) -> None:
    llmbar = shared_data / "llmbar"
    out = tmp_path / "llmbar.json"
    started = time.perf_counter()
    code = main(["eval", str(llmbar), "--methods", "majority", "stacked", "--bootstrap", "50", "--quiet", "--json", str(out)])
    elapsed = time.perf_counter() - started
    assert code == 0
    document = _strict_json(out.read_text(encoding="utf-8"))
    items = load(llmbar)
    judges = {vote.judge for judged in items if judged.item.label is not None for vote in judged.votes}
    judge_rows = [row for row in document["rows"] if row["kind"] == "judge"]
    fusion_rows = [row for row in document["rows"] if row["kind"] == "fusion"]
    print(f"llmbar: {len(judges)} judges, {len(items)} items, eval {elapsed:.1f} s")
    assert {row["name"] for row in judge_rows} == judges
    assert len(judge_rows) == len(judges) == 65
    assert [row["name"] for row in fusion_rows] == ["majority", "stacked"]
    n_labelled = sum(1 for judged in items if judged.item.label is not None)
    assert all(row["n"] == n_labelled for row in fusion_rows)  # its time is printed, not asserted
