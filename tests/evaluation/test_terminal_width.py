"""Every command's terminal output fits 80 and 120 columns, and no table shows two judges alike.

The commands run in-process with their output piped (as in CI logs or ``| less``) and ``COLUMNS``
set, which is what a user's shell exports. Tables are read back from the text: a table is a run of
lines holding the column rule ``│``; its rows are the lines whose name cell is not empty.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from judgefuse.cli import main

RULE = "│"


def _tables(text: str) -> list[list[list[str]]]:
    """Each table as rows of stripped cells (header and rule lines and continuation lines left out)."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    header_seen = False
    for line in text.splitlines():
        if RULE not in line and "┼" not in line:
            current, header_seen = None, False
            continue
        if "┼" in line:  # the rule under the header, or a section rule
            continue
        cells = [cell.strip() for cell in line.split(RULE)]
        if current is None:
            current = []
            tables.append(current)
            header_seen = True  # the first ruled line of a table is its header
            continue
        if header_seen and cells[0]:
            current.append(cells)
    return tables


def _run(args: list[str], width: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    code = main(args)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def _check(text: str, width: int, name_column: int | None) -> int:
    too_long = [line for line in text.splitlines() if len(line) > width]
    assert not too_long, f"{len(too_long)} lines over {width} columns, e.g. {too_long[0]!r}"
    tables = _tables(text)
    assert tables, "no table in the output"
    for rows in tables:
        if name_column is None:
            continue
        names = [row[name_column] for row in rows if len(row) > name_column]
        assert len(names) == len(set(names)), f"two rows read the same: {sorted(n for n in names if names.count(n) > 1)}"
    return len(tables)


WIDTHS = (80, 120)


@pytest.mark.parametrize("width", WIDTHS)
def test_eval_judgebench(shared_data: Path, width: int, monkeypatch, capsys) -> None:
    args = ["eval", str(shared_data / "judgebench"), "--bootstrap", "30", "--methods", "majority", "stacked", "majority+isotonic"]
    text = _run(args, width, monkeypatch, capsys)
    assert _check(text, width, name_column=0) >= 5  # main, other metrics, 3 categories, helped/harmed
    assert "names:" in text or width > 80  # five reward models cannot keep full names at 80 columns
    for judge in ("Skywork-R", "internlm2-20b", "internlm2-7b", "GRM-Gemma"):
        assert judge in text


@pytest.mark.parametrize("width", WIDTHS)
def test_eval_llmbar_many_judges(shared_data: Path, width: int, monkeypatch, capsys) -> None:
    args = ["eval", str(shared_data / "llmbar"), "--bootstrap", "20", "--methods", "majority"]
    text = _run(args, width, monkeypatch, capsys)
    assert _check(text, width, name_column=0) >= 3


@pytest.mark.parametrize("width", WIDTHS)
def test_eval_toe_wide_is_the_one_exception(shared_data: Path, width: int, monkeypatch, capsys) -> None:
    """``--wide`` asks for every column; the default output is the one that must fit."""
    args = ["eval", str(shared_data / "trust_or_escalate"), "--bootstrap", "20", "--methods", "majority"]
    _check(_run(args, width, monkeypatch, capsys), width, name_column=0)
    wide = _run([*args, "--wide"], width, monkeypatch, capsys)
    assert "AdaptCE %" in wide and "MacroCE %" in wide


@pytest.mark.parametrize("width", WIDTHS)
def test_compare(shared_data: Path, width: int, monkeypatch, capsys) -> None:
    args = ["compare", str(shared_data / "judgebench"), "--bootstrap", "50", "--judges",
            "reward_model:internlm2-20b-reward", "reward_model:internlm2-7b-reward"]  # fmt: skip
    text = _run(args, width, monkeypatch, capsys)
    _check(text, width, name_column=None)  # rows are metrics and views; the judges are named in the title
    flat = " ".join(text.split())
    assert "reward_model:internlm2-20b-reward" in flat and "reward_model:internlm2-7b-reward" in flat


@pytest.mark.parametrize("width", WIDTHS)
def test_tune_and_cascade(shared_data: Path, width: int, monkeypatch, capsys) -> None:
    toe = str(shared_data / "trust_or_escalate")
    _check(_run(["tune", toe, "--judge", "gpt-4-turbo", "--target", "0.8"], width, monkeypatch, capsys), width, None)
    text = _run(["tune", toe, "--cascade", "mistral-7b-instruct,gpt-3.5-turbo", "--fallback", "panel"], width, monkeypatch, capsys)
    _check(text, width, name_column=1)
