"""``judgefuse judge`` end to end: a 2-judge panel (direct + litellm) on the stub server."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from jf_test_support import openai_stub as S
from jf_test_support.judge_cli import parse, prefers_correct, serving, stub_panel, write_pairs

from judgefuse.evaluation.judge_command import (
    JudgeCommandError,
    arun_judge,
    read_pairs,
)
from judgefuse.evaluation.loaders import DatasetError, read_votes


def sc_reply(body: dict, delay_s: float = 0.0) -> S.Reply:
    """A judge that prefers whichever output mentions 'correct'."""
    return replace(prefers_correct(body), delay_s=delay_s)


@pytest.fixture
async def stub() -> AsyncIterator[S.StubServer]:
    async with serving(sc_reply) as server:
        yield server


@pytest.fixture
def pairs(tmp_path: Path) -> Path:
    return write_pairs(tmp_path / "pairs.jsonl", 6, a_wins=lambda i: i % 2 == 0, extra={"source": "mmlu-pro-math"})


@pytest.fixture
def panel_yaml(tmp_path: Path, stub: S.StubServer) -> Path:
    return stub_panel(tmp_path / "panel.yaml", stub.url, [
        {"name": "direct-judge", "model": "openai/judge-one", "backend": "direct"},
        {"name": "litellm-judge", "model": "openai/judge-two", "backend": "litellm"},
    ], name="two", attempts=2)  # fmt: skip


async def test_file_run_writes_votes_and_a_rerun_judges_only_missing_items(pairs, panel_yaml, stub, tmp_path, capsys):
    out = tmp_path / "votes.jsonl"
    args = parse(str(pairs), "--panel", str(panel_yaml), "--out", str(out), "--concurrency", "3", "--quiet")
    assert await asyncio.to_thread(args.handler, args) == 0  # the real handler, with its own asyncio.run
    summary = capsys.readouterr().out
    assert "judged 6 items (0 already done, skipped)" in summary
    assert "12 calls, 1320 tokens (1200 prompt + 120 completion), cost $0.000000" in summary
    assert len(stub.requests) == 12
    judged = read_votes(out)
    assert sorted(j.item.id for j in judged) == [f"p{i}" for i in range(6)]
    for item in judged:
        assert [v.judge for v in item.votes] == ["direct-judge", "litellm-judge"]
        assert all(v.choice == item.item.label and v.confidence == 0.8 for v in item.votes)
        assert item.item.category == "mmlu"

    lines = out.read_text(encoding="utf-8").splitlines(keepends=True)
    removed = {json.loads(lines[1])["item"]["id"], json.loads(lines[4])["item"]["id"]}
    out.write_text("".join(line for i, line in enumerate(lines) if i not in (1, 4)), encoding="utf-8")
    stub.requests.clear()
    assert await asyncio.to_thread(args.handler, args) == 0
    summary = capsys.readouterr().out
    assert "judged 2 items (4 already done, skipped)" in summary and "4 calls" in summary
    assert len(stub.requests) == 4
    assert {re.split(r"</?instruction_[0-9a-f]+>", r.body["messages"][-1]["content"])[1].strip()
            for r in stub.requests} == {f"question {i[1:]}" for i in removed}  # fmt: skip
    assert sorted(j.item.id for j in read_votes(out)) == [f"p{i}" for i in range(6)]


async def test_limit_takes_the_first_items(pairs, panel_yaml, stub, tmp_path, capsys):
    out = tmp_path / "votes.jsonl"
    await arun_judge(parse(str(pairs), "--panel", str(panel_yaml), "--out", str(out), "--limit", "2", "--quiet"))
    assert [j.item.id for j in read_votes(out)] == ["p0", "p1"]
    assert "judged 2 items" in capsys.readouterr().out


async def test_cancelled_run_loses_no_finished_item_and_resumes(pairs, panel_yaml, stub, tmp_path, capsys):
    stub.handler = lambda body: sc_reply(body, delay_s=0.15)
    out = tmp_path / "votes.jsonl"
    args = parse(str(pairs), "--panel", str(panel_yaml), "--out", str(out), "--concurrency", "1", "--quiet")
    await arun_judge(args)  # warm-up run on a copy, so litellm's slow first call is out of the timing
    out.unlink()
    capsys.readouterr()
    task = asyncio.create_task(arun_judge(args))
    await asyncio.sleep(0.55)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert capsys.readouterr().out.startswith("interrupted after")
    finished = read_votes(out)  # every line whole
    assert 1 <= len(finished) < 6
    await arun_judge(args)
    assert f"({len(finished)} already done, skipped)" in capsys.readouterr().out
    assert sorted(j.item.id for j in read_votes(out)) == [f"p{i}" for i in range(6)]


async def test_single_pair_prints_votes_and_the_fused_verdict(panel_yaml, stub, capsys):
    args = parse(
        "--question", "2+2?", "--answer-a", "5", "--answer-b", "4, the correct answer", "--panel", str(panel_yaml)
    )
    assert await arun_judge(args) == 0
    out = capsys.readouterr().out
    assert "direct-judge [sc]: B (confidence 0.800)" in out
    assert "litellm-judge [sc]: B (confidence 0.800)" in out
    assert "verdict (majority): B (confidence 1.000, 2 valid votes)" in out
    assert "judged 1 item (" in out and "1 items" not in out


async def test_argument_errors_are_clear(pairs, panel_yaml):
    with pytest.raises(JudgeCommandError, match="needs --out"):
        await arun_judge(parse(str(pairs), "--panel", str(panel_yaml)))
    with pytest.raises(JudgeCommandError, match="--question, --answer-a and --answer-b"):
        await arun_judge(parse("--question", "q", "--panel", str(panel_yaml)))
    with pytest.raises(JudgeCommandError, match="input JSONL file or"):
        await arun_judge(parse("--panel", str(panel_yaml)))


def test_read_pairs_accepts_our_items_and_names_bad_lines(tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text(
        json.dumps({"id": "x1", "question": "q", "answer_a": "a", "answer_b": "b", "label": "B"}) + "\n"
        + json.dumps({"item": {"id": "x2", "question": "q", "answer_a": "a", "answer_b": "b"}, "votes": []}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    assert [(i.id, i.label) for i in read_pairs(path)] == [("x1", "B"), ("x2", None)]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x1", "question": "q"}\n{"id": "x1", "qestion": "q"}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"bad.jsonl:2"):
        read_pairs(bad)
    judgebench = tmp_path / "jb.jsonl"
    judgebench.write_text('{"pair_id": 1, "question": "q", "response_A": "a", "response_B": "b", "label": "A=B"}\n')
    with pytest.raises(DatasetError, match=r"jb.jsonl:1: field 'label'"):
        read_pairs(judgebench)


async def test_single_pair_with_a_fuser_panel(panel_yaml, stub, capsys):
    text = panel_yaml.read_text(encoding="utf-8").replace("fusion: majority", "fusion: fuser")
    text += f"fuser:\n  name: the-fuser\n  model: openai/fuser\n  api_base: {stub.url}\n  timeout_s: 5\n"
    panel_yaml.write_text(text, encoding="utf-8")
    fuser_reply = json.dumps({"selected_output": "Output (b)", "confidence_score": 95, "explanation": "both agree"})
    stub.handler = lambda body: (
        S.Reply(texts=fuser_reply) if body["model"] == "fuser" else sc_reply(body)
    )
    args = parse("--question", "2+2?", "--answer-a", "5", "--answer-b", "4, correct", "--panel", str(panel_yaml))
    assert await arun_judge(args) == 0
    assert "verdict (fuser): B (confidence 0.950, 2 valid votes)" in capsys.readouterr().out
    assert sorted(r.body["model"] for r in stub.requests) == ["fuser", "judge-one", "judge-two"]


def _cli(*argv: str, cwd: Path, terminal: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGEFUSE_", "FORCE_COLOR"))}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    if terminal:
        env["FORCE_COLOR"] = "1"  # rich draws as on a terminal: a bar shows in stderr
    return subprocess.run([sys.executable, "-m", "judgefuse.cli", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)


async def test_quiet_keeps_the_closing_summary_on_the_command_line(pairs, panel_yaml, stub, tmp_path):
    """issue 47, item 10: ``--quiet`` drops the progress bar only; the summary line stays the
    last line of stdout, in a real process (file run and single pair), as without it."""
    out = tmp_path / "votes.jsonl"
    runs = {}
    for name, extra in (("quiet", ["--quiet"]), ("loud", [])):
        out.unlink(missing_ok=True)
        runs[name] = await asyncio.to_thread(
            _cli, "judge", str(pairs), "--panel", str(panel_yaml), "--out", str(out), *extra, cwd=tmp_path,
            terminal=True)
    for done in runs.values():
        assert done.returncode == 0, done.stderr
        last = done.stdout.strip().splitlines()[-1]
        assert re.fullmatch(r"judged 6 items \(0 already done, skipped\) in [\d.]+ s: 12 calls, .*below quorum", last)
    assert "judging" in runs["loud"].stderr and "judging" not in runs["quiet"].stderr  # the bar, only
    single = await asyncio.to_thread(
        _cli, "judge", "--question", "2+2?", "--answer-a", "5", "--answer-b", "4, the correct answer",
        "--panel", str(panel_yaml), "--quiet", cwd=tmp_path)
    assert single.returncode == 0, single.stderr
    assert "verdict (majority): B" in single.stdout
    assert single.stdout.strip().splitlines()[-1].startswith("judged 1 item (0 already done, skipped)")
