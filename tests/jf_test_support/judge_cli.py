"""Helpers for the ``judgefuse judge`` tests: the subcommand's parsed arguments, the stub
server with a handler, a panel of judges on it, and a pairs file.

``judgefuse judge`` is tested through :func:`~judgefuse.evaluation.judge_command.arun_judge`
with real arguments, online and with ``--batch``; these are the pieces every such test needs.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

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


def stub_panel(
    path: Path, api_base: str, judges: Sequence[Mapping[str, Any]], *, name: str = "panel",
    fusion: str = "majority", timeout_s: float = 5, attempts: int = 1,
) -> Path:
    """A panel file whose ``judges`` (each a judge's config: name, model, mode, backend, ...)
    are served at ``api_base``, each with ``timeout_s`` and ``attempts`` tries without waits
    unless its own mapping says otherwise (one JSON flow mapping per judge: JSON is YAML)."""
    retries = {"attempts": attempts, "base_delay_s": 0, "max_delay_s": 0}
    entries = "".join(
        f"  - {json.dumps({'api_base': api_base, 'timeout_s': timeout_s, 'retries': retries, **judge})}\n"
        for judge in judges
    )
    return write_panel(path, entries, name=name, fusion=fusion)


@asynccontextmanager
async def serving(handler: Callable[[dict[str, Any]], S.Action], *, require_key: str | None = None
                  ) -> AsyncIterator[S.StubServer]:  # fmt: skip
    """The stub server on loopback answering with ``handler`` (and, with ``require_key``,
    refusing calls without that key), stopped on exit."""
    server = await S.StubServer().start()
    server.handler = handler
    server.require_key = require_key
    try:
        yield server
    finally:
        await server.stop()


FAIL = "please fail"
"""What a question carries when the test's handler must fail its calls."""


def write_pairs(
    path: Path, n: int, *, failing: Collection[int] = (), a_wins: Callable[[int], bool] = lambda i: i % 3 != 0,
    style: Literal["judgebench", "items"] = "judgebench", extra: Mapping[str, str] | None = None,
) -> Path:
    """``n`` pairs ``p0``, ``p1``, ...: the correct answer on A where ``a_wins(i)``, else on B,
    labelled so, with :data:`FAIL` in the questions of ``failing``; as JudgeBench records
    (``pair_id``, ``response_A``, ``label: A>B``) or as our items (``id``, ``answer_a``,
    ``label: A``), with ``extra`` fields added to each."""
    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            a = a_wins(i)
            question = f"question {i}" + (f" {FAIL}" if i in failing else "")
            answers = ("the correct answer", "wrong") if a else ("wrong", "the correct answer")
            if style == "judgebench":
                record = {"pair_id": f"p{i}", "question": question, "response_A": answers[0],
                          "response_B": answers[1], "label": "A>B" if a else "B>A"}  # fmt: skip
            else:
                record = {"id": f"p{i}", "question": question, "answer_a": answers[0], "answer_b": answers[1],
                          "label": "A" if a else "B"}  # fmt: skip
            handle.write(json.dumps({**record, **(extra or {})}) + "\n")
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
