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
