"""JSON and HTML reports, the reliability SVGs and the atomic writer."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest

from judgefuse.cli import main
from judgefuse.evaluation import atomic
from judgefuse.evaluation import svg as svg_module
from judgefuse.evaluation.atomic import write_atomic
from judgefuse.evaluation.html_report import render_html
from judgefuse.evaluation.json_report import to_json
from judgefuse.evaluation.runner import EvaluationOptions, evaluate
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem

EVIL = "<b>&"


def _refuse_constant(constant: str) -> None:
    raise AssertionError(f"JSON must not contain {constant}")


def _vote(judge: str, choice: str, confidence: float) -> JudgeVote:
    return JudgeVote(judge=judge, mode="sc", choice=choice, confidence=confidence)


# ------------------------------------------------------------------ JSON
def test_json_single_class_auroc_is_null() -> None:
    # "perfect" is always right (single class: AUROC undefined); "mixed" has both classes
    items = [
        JudgedItem(
            item=PairwiseItem(id=f"i{i}", label="A"),
            votes=[_vote("perfect", "A", 0.6 + 0.03 * i), _vote("mixed", "A" if i % 2 else "B", 0.7)],
        )
        for i in range(10)
    ]
    evaluation = evaluate(items, options=EvaluationOptions(methods=("majority",), n_bootstrap=20))
    assert math.isnan(evaluation.row("perfect").metrics["auroc"])
    text = to_json(evaluation, sources=["synthetic"])
    assert "NaN" not in text and "Infinity" not in text
    document = json.loads(text, parse_constant=_refuse_constant)
    rows = {row["name"]: row for row in document["rows"]}
    assert rows["perfect"]["auroc"] is None
    assert rows["perfect"]["accuracy"] == 1.0
    assert rows["mixed"]["auroc"] == 0.5  # all confidences tie
    assert rows["mixed"]["accuracy"] == 0.5
    assert document["sources"] == ["synthetic"]
    assert document["n_items"] == document["n_labelled"] == 10
    assert document["options"]["n_bootstrap"] == 20


# ------------------------------------------------------------------ HTML
def _bins_hit(confidences: list[float]) -> set[int]:
    """Equal-width bins (10, last closed) that hold at least one confidence (plain Python)."""
    hit = set()
    for c in confidences:
        index = 0
        for i in range(10):
            if c >= i / 10:
                index = i
        hit.add(index)
    return hit


def test_html_has_one_diagram_per_row_and_bars_only_for_nonempty_bins() -> None:
    conf = {"j1": [0.55, 0.58, 0.93, 1.0], "j2": [0.71, 0.72, 0.74, 0.76], "j3": [0.5, 0.65, 0.85, 0.95]}
    items = [
        JudgedItem(
            item=PairwiseItem(id=f"i{k}", label="A" if k % 2 else "B"),
            votes=[_vote(name, "A" if (k + j) % 3 else "B", values[k]) for j, (name, values) in enumerate(conf.items())],
        )
        for k in range(4)
    ]
    evaluation = evaluate(items, options=EvaluationOptions(methods=("majority", "mean_probability"), n_bootstrap=10))
    html = render_html(evaluation, title="t", sources=["s"])
    names = [report.row.name for report in evaluation.rows]
    assert names == ["j1", "j2", "j3", "majority", "mean_probability"]
    assert html.count("<svg") == len(names)
    svgs = re.findall(r"<svg.*?</svg>", html, flags=re.DOTALL)
    assert len(svgs) == len(names)
    for name, svg in zip(names, svgs, strict=True):
        assert f"reliability diagram: {name}" in svg
        if name in conf:
            expected = _bins_hit(conf[name])
            assert svg.count('class="bin"') == len(expected), name
            # each bar starts at the lower edge of its bin: x = LEFT + SIZE * i / 10
            xs = {float(x) for x in re.findall(r'class="bin" x="([0-9.]+)"', svg)}
            assert xs == {round(svg_module.LEFT + svg_module.SIZE * i / 10, 1) for i in expected}, name
            # one count per non-empty bin, and they add up to the items scored
            counts = [int(c) for c in re.findall(r'class="count-label"[^>]*>(\d+)<', svg)]
            assert len(counts) == len(expected) and sum(counts) == len(conf[name]), name
    main_table = html.split('<table id="main">', 1)[1].split("</table>", 1)[0]
    for name in names:
        assert f"<td>{name}</td>" in main_table


def _votes_file(path: Path) -> None:
    lines = []
    for i in range(12):
        label = "A" if i % 3 else "B"
        votes = [
            _vote(EVIL, "A" if i % 2 else "B", 0.55 + 0.03 * i),
            _vote("plain", label if i % 4 else ("B" if label == "A" else "A"), 0.8),
        ]
        lines.append(JudgedItem(item=PairwiseItem(id=f"i{i}", label=label), votes=votes).model_dump_json())
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_html_escapes_judge_names_from_a_votes_file(tmp_path: Path) -> None:
    votes = tmp_path / "votes.jsonl"
    _votes_file(votes)
    html_out, json_out = tmp_path / "r.html", tmp_path / "r.json"
    code = main(
        ["eval", str(votes), "--methods", "majority", "--html", str(html_out), "--json", str(json_out), "--quiet", "--bootstrap", "10"]
    )
    assert code == 0
    html = html_out.read_text(encoding="utf-8")
    assert EVIL not in html, "a judge name was written into the HTML unescaped"
    assert "&lt;b&gt;&amp;" in html
    assert "<td>&lt;b&gt;&amp;</td>" in html
    assert "reliability diagram: &lt;b&gt;&amp;" in html
    assert html.count("<svg") == 3  # two judges + majority
    # the JSON keeps the name as data
    rows = json.loads(json_out.read_text(encoding="utf-8"), parse_constant=_refuse_constant)["rows"]
    assert [row["name"] for row in rows] == [EVIL, "plain", "majority"]


# ------------------------------------------------------------------ atomic writes
def _leftovers(folder: Path, name: str) -> list[Path]:
    return [p for p in folder.iterdir() if p.name != name]


def test_write_atomic_success_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "report.json"
    result = write_atomic(target, "first\n")
    assert result == target.resolve()
    assert target.read_text(encoding="utf-8") == "first\n"
    write_atomic(target, "second é\n")
    assert target.read_text(encoding="utf-8") == "second é\n"
    assert _leftovers(target.parent, target.name) == []


def test_write_atomic_keeps_old_file_when_replace_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "report.html"
    target.write_text("old", encoding="utf-8")

    def broken_replace(src: object, dst: object) -> None:
        raise OSError("simulated failure")

    monkeypatch.setattr(atomic.os, "replace", broken_replace)
    with pytest.raises(OSError, match="simulated"):
        write_atomic(target, "new")
    monkeypatch.undo()
    assert target.read_text(encoding="utf-8") == "old"
    assert _leftovers(tmp_path, target.name) == []


def test_write_atomic_keeps_old_file_when_writing_fails(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("old", encoding="utf-8")

    class Unwritable:
        def __str__(self) -> str:
            raise RuntimeError("cannot render")

    with pytest.raises(TypeError):
        write_atomic(target, Unwritable())  # type: ignore[arg-type]
    assert target.read_text(encoding="utf-8") == "old"
    assert _leftovers(tmp_path, target.name) == []


def test_write_atomic_report_is_readable_by_others(tmp_path: Path) -> None:
    """A report is a normal file: the umask decides its mode, not mkstemp's private 0600."""
    umask = os.umask(0o022)
    try:
        target = write_atomic(tmp_path / "r.json", "{}\n")
    finally:
        os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o644


def test_write_atomic_keeps_an_existing_files_mode(tmp_path: Path) -> None:
    target = tmp_path / "r.html"
    target.write_text("old", encoding="utf-8")
    target.chmod(0o640)
    write_atomic(target, "new")
    assert target.read_text(encoding="utf-8") == "new"
    assert target.stat().st_mode & 0o777 == 0o640


def test_html_panels_have_axes_titles_gaps_and_a_summary() -> None:
    rng = np.random.default_rng(2)
    items = []
    for k in range(200):
        label = "A" if k % 2 else "B"
        votes = [
            _vote("over", label if rng.uniform() < 0.6 else ("B" if label == "A" else "A"), 0.95),  # overconfident
            _vote("under", label if rng.uniform() < 0.9 else ("B" if label == "A" else "A"), 0.6),  # underconfident
        ]
        items.append(JudgedItem(item=PairwiseItem(id=f"i{k}", label=label), votes=votes))
    evaluation = evaluate(items, options=EvaluationOptions(methods=("majority", "mean_probability"), n_bootstrap=50))
    html = render_html(evaluation, title="t", sources=["s"])
    svgs = dict(zip((r.row.name for r in evaluation.rows), re.findall(r"<svg.*?</svg>", html, flags=re.DOTALL), strict=True))
    for svg in svgs.values():
        for tick in ("0", "0.2", "0.4", "0.6", "0.8", "1"):
            assert f'text-anchor="middle">{tick}</text>' in svg and f'text-anchor="end">{tick}</text>' in svg
        assert "stroke-dasharray" in svg and ">confidence</text>" in svg and ">accuracy</text>" in svg
        assert 'class="region-high"' in svg and 'class="region-low"' in svg
    assert 'class="gap-over"' in svgs["over"] and 'class="gap-under"' not in svgs["over"]
    assert 'class="gap-under"' in svgs["under"] and 'class="gap-over"' not in svgs["under"]
    for report in evaluation.rows:  # ECE and n in each panel's title, the full name on hover
        caption = f'<span class="name">{report.row.name}</span>'
        assert caption in html
        assert f"ECE {100 * report.metrics['ece']:.2f}% · n={report.row.correct.size}" in html
        assert f'<figure title="{report.row.name}">' in html
    summary = html.split('id="summary"', 1)[1].split("</div>\n</div>", 1)[0]
    assert "Best judge" in summary and '<div class="name">under <' in summary  # 90% beats 60%
    assert "What fusion gained" in html and "accuracy points" in html
    gain = html.split('id="gain"', 1)[1].split("</div></div>", 1)[0]
    # majority of a 90% and a 60% judge loses to the 90% judge: the words must say so, not "gain"
    assert "fusion lost accuracy" in gain or "no reliable difference" in gain
    assert "grid-template-columns: repeat(auto-fill" in html  # the responsive grid
