"""Helpers for the ``judgefuse judge`` tests: the subcommand's parsed arguments and a panel file.

``judgefuse judge`` is tested through :func:`~judgefuse.evaluation.judge_command.arun_judge`
with real arguments, online and with ``--batch``; these are the pieces every such test needs.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from jf_test_support import openai_stub as S
from judgefuse.evaluation.judge_command import add_commands
from judgefuse.judges.types import JudgeVote

RETRIES_ONCE = "{attempts: 1, base_delay_s: 0, max_delay_s: 0}"
"""One attempt and no waits: a scripted failure shows at once."""


def parse(*argv: str) -> argparse.Namespace:
    """``judgefuse judge ARGV`` as the command line would parse it."""
    parser = argparse.ArgumentParser(prog="judgefuse")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["judge", *argv])


def batch_args(pairs: Path, panel: Path, out: Path, *extra: str) -> argparse.Namespace:
    """``judge PAIRS --panel PANEL --out OUT --batch``, quiet, polling every 10 ms."""
    return parse(
        str(pairs), "--panel", str(panel), "--out", str(out), "--quiet", "--batch", "--batch-poll-s", "0.01", *extra
    )


def comparable(vote: JudgeVote) -> tuple[object, ...]:
    """What must match between a batch vote and the online vote for the same answers (all but
    cost, latency and the explanation)."""
    return (vote.judge, vote.mode, vote.choice, vote.confidence, vote.p_a, vote.raw, vote.error,
            vote.calls, vote.prompt_tokens, vote.completion_tokens, tuple(vote.notes))  # fmt: skip


def write_panel(path: Path, judges: str, *, name: str = "panel", fusion: str = "majority") -> Path:
    """A panel file with ``judges`` (YAML list entries, already indented by two spaces)."""
    path.write_text(f"name: {name}\nfusion: {fusion}\njudges:\n{judges}", encoding="utf-8")
    return path


def output_a(body: dict[str, object]) -> str:
    """Output (a) as the judge prompt in a chat ``body`` shows it (between its nonce tags)."""
    user = body["messages"][-1]["content"]  # type: ignore[index]
    return re.split(r"</?output_a_[0-9a-f]+>", str(user))[1]


def prefers_correct(body: dict[str, object]) -> S.Reply:
    """An SC judge's reply choosing whichever output mentions 'correct', at confidence 80."""
    choice = "a" if "correct" in output_a(body) else "b"
    text = json.dumps({"selected_output": f"Output ({choice})", "confidence_score": 80, "explanation": "x"})
    return S.Reply(texts=text, usage=(100, 10))
