"""The console script's error statuses: input errors exit 2, the run's OS errors exit 1, bugs
propagate with their traceback (a ValueError from a bug is not a user's mistake)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from judgefuse import cli
from judgefuse.calibration.metric_registry import UnknownMetric
from judgefuse.errors import InputError, JudgefuseError
from judgefuse.evaluation import commands as evaluation_commands
from judgefuse.evaluation.comparison import CompareError
from judgefuse.evaluation.judge_command import JudgeCommandError
from judgefuse.evaluation.loaders import DatasetError
from judgefuse.evaluation.runner import EvaluationError
from judgefuse.evaluation.tune_command import TuneError
from judgefuse.fusion import NotEnoughLabels, UnknownFusionMethod, UnknownRecalibrator
from judgefuse.judges.config import PanelConfigError
from judgefuse.judges.local import ModelNotInstalledError
from judgefuse.judges.registry import UnknownJudgeBackend
from judgefuse.service import settings
from judgefuse.service.ops import export


def _handler_raising(exc: BaseException):  # noqa: ANN202 - a stand-in handler
    def handler(args: argparse.Namespace) -> int:
        raise exc

    return handler


def test_an_input_error_exits_2_with_its_message(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setattr(evaluation_commands, "run_eval", _handler_raising(InputError("votes.jsonl:3: bad label")))
    assert cli.main(["eval", "votes.jsonl"]) == 2
    err = capsys.readouterr().err
    assert err == "judgefuse eval: error: votes.jsonl:3: bad label\n"


@pytest.mark.parametrize("bug", [ValueError("math domain error"), KeyError("judges"), TypeError("bad call")])
def test_a_programming_error_is_not_swallowed_as_bad_input(bug: Exception, monkeypatch: pytest.MonkeyPatch,
                                                           capsys) -> None:
    monkeypatch.setattr(evaluation_commands, "run_eval", _handler_raising(bug))
    with pytest.raises(type(bug)) as caught:
        cli.main(["eval", "votes.jsonl"])
    assert caught.value is bug
    assert "error:" not in capsys.readouterr().err


def test_an_os_error_of_the_run_exits_1(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setattr(evaluation_commands, "run_eval", _handler_raising(OSError(28, "No space left on device")))
    assert cli.main(["eval", "votes.jsonl"]) == 1
    assert capsys.readouterr().err.startswith("judgefuse eval: error: ")


def test_the_service_commands_report_bad_input_as_input_errors(tmp_path, capsys) -> None:
    """export's and serve's own input errors are InputErrors: exit 2 with the message."""
    assert cli.main(["export", "--storage", f"sqlite:///{tmp_path / 'missing.sqlite3'}", "out.jsonl"]) == 2
    assert "judgefuse export: error: --storage: no SQLite file at" in capsys.readouterr().err
    assert cli.main(["export", "--storage", "nosuchscheme://x", "out.jsonl"]) == 2
    assert "judgefuse export: error: " in capsys.readouterr().err
    assert issubclass(export.ExportInputError, InputError) and issubclass(export.ExportInputError, ValueError)
    assert issubclass(settings.SettingsError, InputError) and issubclass(settings.SettingsError, ValueError)


def test_an_unknown_fusion_method_exits_2_listing_the_known_ones(shared_data: Path, capsys) -> None:
    assert cli.main(["tune", str(shared_data / "trust_or_escalate"), "--method", "majorty"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("judgefuse tune: error: unknown fusion method 'majorty'; known methods: ")
    assert "majority" in err and "Traceback" not in err
    assert cli.main(["tune", str(shared_data / "trust_or_escalate"), "--method", "majority+magic"]) == 2
    assert "error: unknown recalibrator 'magic'; known: histogram" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("error", "historic"),
    [
        (PanelConfigError, ValueError),
        (DatasetError, ValueError),
        (EvaluationError, ValueError),
        (TuneError, ValueError),
        (JudgeCommandError, ValueError),
        (CompareError, ValueError),
        (NotEnoughLabels, ValueError),
        (UnknownRecalibrator, ValueError),
        (UnknownFusionMethod, KeyError),
        (UnknownJudgeBackend, KeyError),
        (UnknownMetric, KeyError),
        (ModelNotInstalledError, LookupError),
    ],
)
def test_typed_input_errors_are_input_errors_and_keep_their_base(error: type, historic: type) -> None:
    assert issubclass(error, InputError) and issubclass(error, JudgefuseError)
    assert issubclass(error, historic)  # `except ValueError` / `except KeyError` callers still catch it
