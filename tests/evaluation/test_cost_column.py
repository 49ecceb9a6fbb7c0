"""The terminal table's cost columns (calls/item, cost $) from votes with known calls and cost."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from judgefuse.evaluation.loaders import load
from judgefuse.evaluation.runner import EvaluationOptions, evaluate
from judgefuse.evaluation.table import COST_COLUMNS, cost_cells, wide_table
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem


def _votes_file(tmp_path: Path) -> Path:
    lines = []
    for i in range(4):
        label = "A" if i % 2 else "B"
        votes = [
            # an MP judge whose adaptive sampling drew 3, 10, 3, 10 samples (one call each)
            JudgeVote(judge="mp", mode="mp", choice=label, confidence=0.9, calls=3 if i % 2 else 10, cost_usd=0.001 * (i + 1)),
            JudgeVote(judge="sc", mode="sc", choice="A", confidence=0.7, calls=1, cost_usd=0.0005),
        ]
        lines.append(JudgedItem(item=PairwiseItem(id=f"i{i}", label=label), votes=votes).model_dump_json())
    path = tmp_path / "votes.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_cost_columns(tmp_path: Path) -> None:
    items = load(_votes_file(tmp_path))
    evaluation = evaluate(items, options=EvaluationOptions(methods=("majority",), n_bootstrap=10))
    mp, sc, majority = (evaluation.row(name) for name in ("mp", "sc", "majority"))
    assert (mp.row.calls, sc.row.calls, majority.row.calls) == (26, 4, 30)
    assert cost_cells(mp.row) == ("6.50", "0.0100")
    assert cost_cells(sc.row) == ("1.00", "0.0020")
    assert cost_cells(majority.row) == ("7.50", "0.0120")  # a fusion row counts every vote it fused
    table = wide_table(evaluation, title="t")
    assert [c.header for c in table.columns][-2:] == list(COST_COLUMNS)
    console = Console(width=400, record=True)
    console.print(table)
    text = console.export_text()
    assert "calls/item" in text and "cost $" in text
    mp_line = next(line for line in text.splitlines() if line.lstrip("│ ").startswith("mp "))
    assert "6.50" in mp_line and "0.0100" in mp_line
