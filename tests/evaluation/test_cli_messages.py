"""The offline commands' messages: flag names in errors, one error style, exit 2, help everywhere."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from judgefuse.cli import build_parser, main

OFFLINE = ("eval", "compare", "tune")


def _error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval", "{toe}", "--folds", "1"], "judgefuse eval: error: argument --folds: must be an integer >= 2 (got 1)"),
        (["eval", "{toe}", "--bootstrap", "0"], "argument --bootstrap: must be an integer >= 1 (got 0)"),
        (["eval", "{toe}", "--bins", "x"], "argument --bins: must be an integer >= 1 (got 'x')"),
        (["eval", "{toe}", "--eps", "0.7"], "argument --eps: must be a number in [0, 0.5) (got 0.7)"),
        (["tune", "{toe}", "--target", "1.5"], "judgefuse tune: error: argument --target: must be a number in (0, 1)"),
        (["tune", "{toe}", "--delta", "0"], "argument --delta: must be a number in (0, 1) (got 0)"),
        (["tune", "{toe}", "--folds", "1"], "argument --folds: must be an integer >= 2"),
        (["compare", "{toe}", "--judges", "a", "b", "--bootstrap", "-3"], "judgefuse compare: error: argument --bootstrap"),
    ],
)
def test_bad_flag_values_name_the_flag(args, message: str, shared_data: Path, capsys) -> None:
    toe = str(shared_data / "trust_or_escalate")
    err = _error([a.replace("{toe}", toe) for a in args], capsys)
    assert message in err
    for internal in ("n_folds", "n_resamples", "target_precision", "n_bins"):
        assert internal not in err


def test_report_into_a_missing_folder_is_refused_naming_it(shared_data: Path, tmp_path: Path, capsys) -> None:
    missing = tmp_path / "reports"
    for flag in ("--json", "--html"):
        err = _error(["eval", str(shared_data / "trust_or_escalate"), flag, str(missing / "r.out")], capsys)
        assert f"argument {flag}: the folder '{missing}' does not exist" in err
    err = _error(["tune", str(shared_data / "trust_or_escalate"), "--json", str(missing / "t.json")], capsys)
    assert "argument --json: the folder" in err
    assert not missing.exists(), "a missing folder must not be created"


def test_empty_file_is_called_empty(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "votes.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    err = _error(["eval", str(empty)], capsys)
    assert f"judgefuse eval: error: {empty}: empty file" in err


def test_format_hint_names_the_flag(tmp_path: Path, capsys) -> None:
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"x": 1}\n', encoding="utf-8")
    err = _error(["eval", str(odd)], capsys)
    assert "pass --format" in err and "format=" not in err.split("pass --format", 1)[0]


def test_unknown_judge_in_compare_names_the_flag(shared_data: Path, capsys) -> None:
    err = _error(["compare", str(shared_data / "trust_or_escalate"), "--judges", "gpt-4-turbo", "nope"], capsys)
    assert "judgefuse compare: error: --judges: unknown judge 'nope'" in err


def test_every_offline_flag_has_help_and_every_command_a_description() -> None:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in OFFLINE:
        sub = subparsers.choices[name]
        assert sub.description, f"{name} has no description"
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"{name} {action.option_strings or action.dest} has no help"


def test_help_exits_0_through_main(capsys) -> None:
    assert main(["compare", "--help"]) == 0
    out = capsys.readouterr().out
    assert "ranking reversal is reported" in " ".join(out.split())


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...]):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield path + (name,), sub, None
                yield from _walk(sub, path + (name,))
        elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            yield path, parser, action


def test_every_subcommand_of_the_cli_has_help_on_every_flag() -> None:
    missing = []
    for path, parser, action in _walk(build_parser(), ()):
        if action is None and not parser.description:
            missing.append(f"{' '.join(path)}: no description")
        elif action is not None and not action.help:
            missing.append(f"{' '.join(path)} {action.option_strings or action.dest}: no help")
    assert not missing, missing


# ---------------------------------------------------------------- hostile input files (issue 41)

DEEP = "[" * 100_000
"""A line of 100,000 nested brackets: json.loads raised RecursionError on it (a traceback, exit 1)."""


def _votes_line(item_id: str) -> str:
    from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem

    judged = JudgedItem(
        item=PairwiseItem(id=item_id, question="q", answer_a="a", answer_b="b", label="A",
                          metadata={"system_a": "x", "system_b": "y"}),
        votes=[JudgeVote(judge=j, mode="sc", choice="A", confidence=0.8) for j in ("j1", "j2")],
    )
    return judged.model_dump_json()


PAIR_LINE = '{"pair_id": "p1", "question": "q", "response_A": "a", "response_B": "b", "label": "A>B"}'
FAULTS = {
    "deep": (DEEP.encode(), "nested deeper than 128 levels"),
    "deep in a key": (b'{"item": ' + DEEP.encode() + b"}", "nested deeper than 128 levels"),
    "not utf-8": (b'{"item": "\xff\xfe caf\xe9"}', "not UTF-8 text"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("command", [
    ["eval", "{f}", "--quiet"],
    ["compare", "{f}", "--judges", "j1", "j2"],
    ["tune", "{f}"],
    ["winrate", "{f}", "--field-a", "system_a", "--field-b", "system_b"],
    ["judge", "{pairs}", "--out", "{out}"],
])
def test_a_hostile_line_is_one_error_naming_file_and_line(command: list[str], fault: str, tmp_path: Path,
                                                          capsys) -> None:
    bad, reason = FAULTS[fault]
    votes, pairs, out = tmp_path / "votes.jsonl", tmp_path / "pairs.jsonl", tmp_path / "out.jsonl"
    votes.write_bytes(_votes_line("i1").encode() + b"\n" + bad + b"\n" + _votes_line("i3").encode() + b"\n")
    pairs.write_bytes(PAIR_LINE.encode() + b"\n" + bad + b"\n")
    args = [a.format(f=votes, pairs=pairs, out=out) for a in command]
    err = _error(args, capsys)
    assert err.strip().count("\n") == 0, err
    where = pairs if command[0] == "judge" else votes
    assert f"judgefuse {command[0]}: error: {where}:2: {reason}" in err
    assert not out.exists()


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_hostile_first_line_is_named_not_sent_to_format(fault: str, tmp_path: Path, capsys) -> None:
    bad, reason = FAULTS[fault]
    path = tmp_path / "votes.jsonl"
    path.write_bytes(bad + b"\n" + _votes_line("i2").encode() + b"\n")
    err = _error(["eval", str(path)], capsys)
    assert f"{path}:1: {reason}" in err and "--format" not in err


def test_a_csv_that_is_not_utf8_names_the_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "pairs.csv"
    path.write_bytes(b"question,answer_a,answer_b,label\nq1,a,b,A\nq2,\xff,b,B\n")
    for args in (["eval", str(path)], ["judge", str(path), "--out", str(tmp_path / "out.jsonl")]):
        assert f"{path}:3: not UTF-8 text" in _error(args, capsys)
