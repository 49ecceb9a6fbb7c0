"""Parquet input (judgefuse.evaluation.loaders.parquet): the same records as JSONL, one a row.

``eval`` on a votes Parquet file gives the numbers of the same rows in JSONL (the tie fixture
and the CSV fixture's items, ties and both-bad labels included); ``export --format parquet``
files read back; ``judge`` reads the Hugging Face chosen / rejected layout from Parquet as from
JSONL; a bad row's error names the row and the column; without pyarrow the command says which
extra to install. Fixtures: tests/evaluation/fixtures/README.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from judgefuse.cli import main
from judgefuse.evaluation.judge_command import read_pairs
from judgefuse.evaluation.loaders import DatasetError, load
from judgefuse.evaluation.loaders.parquet import PARQUET_EXTRA

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

FIXTURES = Path(__file__).parent / "fixtures"


def write_parquet(path: Path, records: list[dict[str, Any]], row_group_size: int = 2) -> Path:
    pq.write_table(pa.Table.from_pylist(records), path, row_group_size=row_group_size)
    return path


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def csv_records() -> list[dict[str, Any]]:
    return [json.loads(j.model_dump_json(exclude_defaults=True)) for j in load(FIXTURES / "pairs_with_ties.csv")]


def eval_json(path: Path, out: Path) -> dict[str, Any]:
    assert main(["eval", str(path), "--methods", "majority", "mean_probability", "--bootstrap", "20",
                 "--json", str(out), "--quiet"]) == 0  # fmt: skip
    report = json.loads(out.read_text())
    report.pop("source", None)
    report.pop("timing", None)
    return report


TIES_VOTES = [json.loads(line) for line in (FIXTURES / "ties_votes.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("records", [csv_records(), TIES_VOTES])
def test_eval_on_parquet_gives_the_numbers_of_the_same_rows_in_jsonl(
    tmp_path: Path, records: list[dict[str, Any]]
) -> None:
    jsonl = write_jsonl(tmp_path / "votes.jsonl", records)
    parquet = write_parquet(tmp_path / "votes.parquet", records)
    assert load(parquet) == load(jsonl)
    from_jsonl, from_parquet = eval_json(jsonl, tmp_path / "j.json"), eval_json(parquet, tmp_path / "p.json")
    assert from_parquet["rows"] == from_jsonl["rows"] and from_parquet["n_labelled"] == from_jsonl["n_labelled"]
    assert any(row["name"] == "majority" for row in from_parquet["rows"])


def test_an_export_parquet_reads_back_through_its_judged_item_column(tmp_path: Path) -> None:
    judged = load(FIXTURES / "ties_votes.jsonl")
    rows = [{"id": j.item.id, "label": j.item.label, "judged_item": j.model_dump_json()} for j in judged]
    assert load(write_parquet(tmp_path / "export.parquet", rows)) == judged


def test_judge_reads_the_preference_layout_from_parquet_as_from_jsonl(tmp_path: Path) -> None:
    records = [{"id": f"p{i}", "prompt": f"q{i}", "chosen": f"good {i}", "rejected": f"bad {i}", "subset": "math"}
               for i in range(5)]  # fmt: skip
    chat = [{"chosen": [{"role": "user", "content": "hi?"}, {"role": "assistant", "content": f"good chat {i}"}],
             "rejected": [{"role": "user", "content": "hi?"}, {"role": "assistant", "content": f"bad chat {i}"}],
             "id": f"c{i}"} for i in range(3)]  # fmt: skip
    for name, rows in (("plain", records), ("chat", chat)):
        from_parquet = read_pairs(write_parquet(tmp_path / f"{name}.parquet", rows))
        assert from_parquet == read_pairs(write_jsonl(tmp_path / f"{name}.jsonl", rows))
        assert len(from_parquet) == len(rows)
    assert read_pairs(tmp_path / "chat.parquet")[2].question == "hi?"


def test_a_bad_row_names_the_row_and_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"prompt": "q", "chosen": "a", "rejected": "b"}, {"prompt": "q", "chosen": "a", "rejected": "b"},
            {"prompt": "q", "chosen": "a", "rejected": None}]  # fmt: skip
    path = write_parquet(tmp_path / "prefs.parquet", rows)
    with pytest.raises(DatasetError) as caught:
        read_pairs(path)
    assert (caught.value.line, caught.value.field) == (3, "rejected")
    votes = csv_records()
    votes[4]["votes"][0]["confidence"] = 1.5
    bad = write_parquet(tmp_path / "bad_votes.parquet", votes)
    capsys.readouterr()
    assert main(["eval", str(bad), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:5: field 'votes[0].confidence'" in err or f"{bad}:5: field 'votes.0.confidence'" in err, err


def test_without_pyarrow_the_command_names_the_extra(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "votes.parquet", csv_records())
    code = ("import sys; sys.modules['pyarrow'] = None; sys.modules['pyarrow.parquet'] = None\n"
            "from judgefuse.cli import main\n"
            f"sys.exit(main(['eval', {str(path)!r}, '--quiet']))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert f"{path}: reading Parquet needs pyarrow, which is not installed: {PARQUET_EXTRA}" in done.stderr
    assert "pip install 'judgefuse[parquet]'" in PARQUET_EXTRA


def test_an_empty_parquet_file_is_called_empty_and_a_folder_of_parquet_is_read(tmp_path: Path) -> None:
    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"item": pa.array([], pa.string())}), empty)
    with pytest.raises(DatasetError, match="empty file"):
        load(empty)
    folder = tmp_path / "votes"
    folder.mkdir()
    write_parquet(folder / "a.parquet", TIES_VOTES[:2])
    write_parquet(folder / "b.parquet", TIES_VOTES[2:])
    assert load(folder) == load(FIXTURES / "ties_votes.jsonl")


def test_compare_and_tune_read_parquet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parquet = write_parquet(tmp_path / "votes.parquet", csv_records())
    assert main(["compare", str(parquet), "--judges", "j1", "j2", "--bootstrap", "10"]) == 0
    from_parquet = capsys.readouterr().out
    assert main(["compare", str(FIXTURES / "pairs_with_ties.csv"), "--judges", "j1", "j2", "--bootstrap", "10"]) == 0
    assert from_parquet.replace(str(parquet), "X") == capsys.readouterr().out.replace(
        str(FIXTURES / "pairs_with_ties.csv"), "X"
    )


async def test_judge_runs_a_panel_on_a_parquet_preference_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end on the stub (tests/evaluation/test_judge_command.py's judge): the same votes as from JSONL."""
    import asyncio
    import re

    from jf_test_support import openai_stub as S
    from jf_test_support.judge_cli import parse

    from judgefuse.evaluation.loaders import read_votes

    def reply(body: dict[str, Any]) -> Any:
        output_a = re.split(r"</?output_a_[0-9a-f]+>", body["messages"][-1]["content"])[1]
        choice = "a" if "good" in output_a else "b"
        text = json.dumps({"selected_output": f"Output ({choice})", "confidence_score": 80, "explanation": "x"})
        return S.Reply(texts=text, usage=(100, 10))

    server = await S.StubServer().start()
    server.handler = reply
    try:
        panel = tmp_path / "panel.yaml"
        panel.write_text(f"name: one\nfusion: majority\njudges:\n  - name: j\n    model: openai/j\n    backend: direct\n"
                         f"    api_base: {server.url}\n    timeout_s: 5\n", encoding="utf-8")  # fmt: skip
        rows = [{"id": f"p{i}", "prompt": f"q{i}", "chosen": f"good {i}", "rejected": f"bad {i}"} for i in range(6)]
        votes = {}
        for kind, path in (("parquet", write_parquet(tmp_path / "prefs.parquet", rows)),
                           ("jsonl", write_jsonl(tmp_path / "prefs.jsonl", rows))):  # fmt: skip
            out = tmp_path / f"votes-{kind}.jsonl"
            args = parse(str(path), "--panel", str(panel), "--out", str(out), "--quiet")
            assert await asyncio.to_thread(args.handler, args) == 0
            votes[kind] = sorted((j.item.id, j.item.label, j.votes[0].choice) for j in read_votes(out))
    finally:
        await server.stop()
    assert "judged 6 items" in capsys.readouterr().out
    assert votes["parquet"] == votes["jsonl"] and len(votes["parquet"]) == 6
    assert all(label == choice for _, label, choice in votes["parquet"])  # the stub's judge picks "good"
