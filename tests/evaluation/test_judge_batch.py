"""``judgefuse judge --batch`` end to end against the stub's files and batches endpoints on
loopback: upload, create, poll, download; partial failure, expiry, a failed batch; an
interrupted run that resumes the same batches; votes identical to the online path's."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from jf_test_support import openai_stub as S
from jf_test_support.judge_cli import (
    FAIL,
    batch_args,
    comparable,
    output_a,
    parse,
    prefers_correct,
    serving,
    stub_panel,
    write_pairs,
)

from judgefuse.cli import main
from judgefuse.evaluation.judge_command import JudgeCommandError, arun_judge
from judgefuse.evaluation.loaders import read_votes
from judgefuse.judges.batch import BatchUnsupported, answers_path, state_path
from judgefuse.judges.batch.runner import batch_endpoint
from judgefuse.judges.batch.state import BatchFileError
from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.structured_output import forget_refusals


def reply(body: dict) -> S.Action:
    """Prefers whichever output mentions 'correct'; SC answers JSON, logprob answers a letter.
    A question containing FAIL gets an HTTP 500 for the SC judge."""
    if body.get("logprobs"):
        a_wins = "correct" in output_a(body)
        top = [("A", -0.2), ("B", -1.8)] if a_wins else [("B", -0.3), ("A", -1.5)]
        return S.Reply(texts=top[0][0], top_logprobs=top, usage=(90, 1))
    if FAIL in body["messages"][-1]["content"]:
        return S.Status(500, "scripted failure")
    return prefers_correct(body)


@pytest.fixture
async def stub() -> AsyncIterator[S.StubServer]:
    async with serving(reply) as server:
        yield server


@pytest.fixture
def panel_yaml(tmp_path: Path, stub: S.StubServer) -> Path:
    return stub_panel(tmp_path / "panel.yaml", stub.url, [
        {"name": "sc-judge", "model": "openai/gpt-4o-mini", "backend": "direct"},
        {"name": "logprob-judge", "model": "openai/gpt-4o-mini", "mode": "logprob", "position_swap": True,
         "backend": "direct"},
    ], name="two")  # fmt: skip


def created_batches(out: Path) -> list[str]:
    """The batch ids the run has recorded beside its output."""
    if not state_path(out).exists():
        return []
    return [b["batch_id"] for b in json.loads(state_path(out).read_text())["batches"] if b["batch_id"]]


async def test_batch_votes_equal_online_votes_at_half_the_cost(stub, panel_yaml, tmp_path, capsys):
    pairs = write_pairs(tmp_path / "pairs.jsonl", 60)
    online_out, batch_out = tmp_path / "online.jsonl", tmp_path / "batch.jsonl"
    await arun_judge(parse(str(pairs), "--panel", str(panel_yaml), "--out", str(online_out), "--quiet"))
    online_calls = len(stub.requests)
    assert online_calls == 60 * 3  # SC once, logprob in both orders

    stub.requests.clear()
    capsys.readouterr()
    assert await arun_judge(batch_args(pairs, panel_yaml, batch_out)) == 0
    printed = capsys.readouterr().out
    assert stub.requests == []  # nothing went online
    assert stub.batches.created == 2  # one per judge, all requests in the first round
    assert sum(len(b.lines) for b in stub.batches.batches.values()) == online_calls
    assert "batch: 2 created, 0 resumed, 180 requests submitted, 0 failed or expired, 2 rounds" in printed

    online = {j.item.id: j for j in read_votes(online_out)}
    batch = {j.item.id: j for j in read_votes(batch_out)}
    assert set(online) == set(batch) == {f"p{i}" for i in range(60)}
    for item_id, judged in batch.items():
        assert [comparable(v) for v in judged.votes] == [comparable(v) for v in online[item_id].votes]
        assert all(v.valid and v.choice == judged.item.label for v in judged.votes)
        for mine, theirs in zip(judged.votes, online[item_id].votes, strict=True):
            assert theirs.cost_usd > 0 and mine.cost_usd == pytest.approx(theirs.cost_usd / 2)


@pytest.mark.parametrize("n", [200, pytest.param(1000, marks=pytest.mark.slow)])
async def test_pairs_with_a_partial_failure_and_an_interrupted_run_that_resumes(n, stub, panel_yaml, tmp_path, capsys):
    failing = set(range(0, n, 50))
    pairs = write_pairs(tmp_path / "pairs.jsonl", n, failing=failing)
    out = tmp_path / "votes.jsonl"
    args = batch_args(pairs, panel_yaml, out)
    stub.batches.hold = True  # the provider takes its time: the run is interrupted while polling
    task = asyncio.create_task(arun_judge(args))
    for _ in range(1000):
        await asyncio.sleep(0.02)
        if len(created_batches(out)) == 2:
            break
    await asyncio.sleep(0.05)  # a few polls in progress
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert capsys.readouterr().out.startswith("interrupted after 0 items")
    assert stub.batches.created == 2
    assert not out.exists() or read_votes(out) == []  # nothing was answered yet

    stub.batches.hold = False
    assert await arun_judge(args) == 0
    printed = capsys.readouterr().out
    assert stub.batches.created == 2  # the same batches were polled, none submitted again
    assert f"batch: 0 created, 2 resumed, 0 requests submitted, {len(failing)} failed or expired, 1 rounds" in printed
    assert f"judged {n} items (0 already done, skipped)" in printed and f"{len(failing)} invalid votes" in printed
    assert stub.requests == []
    judged = read_votes(out)
    assert len(judged) == n
    for item in judged:
        sc, logprob = item.votes
        assert logprob.valid and logprob.choice == item.item.label
        if int(item.item.id[1:]) in failing:
            assert not sc.valid and sc.error.startswith("ServerError: HTTP 500: scripted failure")
        else:
            assert sc.valid and sc.choice == item.item.label

    assert await arun_judge(args) == 0  # a third run has nothing left to do
    assert f"judged 0 items ({n} already done, skipped)" in capsys.readouterr().out
    assert stub.batches.created == 2


async def test_an_expired_batch_degrades_the_unrun_votes_and_can_retry_them_online(stub, panel_yaml, tmp_path, capsys):
    pairs = write_pairs(tmp_path / "pairs.jsonl", 10)
    stub.batches.expire_after = 4  # each judge's batch runs its first 4 lines, then expires
    out = tmp_path / "votes.jsonl"
    assert await arun_judge(batch_args(pairs, panel_yaml, out)) == 0
    assert "batch: 2 created, 0 resumed, 30 requests submitted, 22 failed or expired" in capsys.readouterr().out
    errors = [v.error for j in read_votes(out) for v in j.votes if not v.valid]
    assert errors and all("batch_expired" in e or "both orders invalid" in e or "batch request" in e for e in errors)
    assert any(e.startswith("JudgeTimeout: batch request batch_expired") for e in errors)
    valid = sum(v.valid for j in read_votes(out) for v in j.votes)
    assert 0 < valid < 20

    retry_out = tmp_path / "retry.jsonl"
    assert await arun_judge(batch_args(pairs, panel_yaml, retry_out, "--batch-retry-online")) == 0
    printed = capsys.readouterr().out
    assert "22 failed or expired (22 retried online)" in printed
    assert len(stub.requests) == 22  # exactly the expired requests went online
    assert all(v.valid for j in read_votes(retry_out) for v in j.votes)


async def test_a_dependent_call_takes_another_round_and_an_online_retry_is_paid_once(
    stub, panel_yaml, tmp_path, capsys
):
    """The endpoint refuses structured output (HTTP 400 naming response_format): the SC judge's
    prompt-and-parse retry is a second request, so a second batch round. The logprob requests of
    two items fail and are retried online in the first round; those items are judged again in
    the second round, and their online retries are not sent again."""
    forget_refusals()
    failing_questions = {"question 1", "question 4"}

    def handler(body: dict) -> S.Action:
        user = body["messages"][-1]["content"]
        if "response_format" in body:
            return S.Status(400, "response_format is not supported", param="response_format")
        if body.get("logprobs") and any(f"\n{q}\n" in user for q in failing_questions):
            return S.Status(500, "logprob backend down")
        return reply(body)

    stub.handler = handler
    pairs = write_pairs(tmp_path / "pairs.jsonl", 6)
    out = tmp_path / "votes.jsonl"
    try:
        assert await arun_judge(batch_args(pairs, panel_yaml, out, "--batch-retry-online")) == 0
    finally:
        forget_refusals()
    printed = capsys.readouterr().out
    assert "batch: 3 created, 0 resumed, 24 requests submitted" in printed and "3 rounds" in printed
    assert "(4 retried online)" in printed
    assert len(stub.requests) == 4  # two items x two orders, once each although judged in two rounds
    judged = {j.item.id: j for j in read_votes(out)}
    for item_id, item in judged.items():
        sc, logprob = item.votes
        assert sc.valid and sc.choice == item.item.label
        assert logprob.valid is (item_id not in ("p1", "p4"))
    # round 1 asked the SC judge with the schema; round 2's batch holds its six plain requests
    first_sc, _logprob, second_sc = [[line["body"] for line in b.lines] for b in stub.batches.batches.values()]
    assert len(first_sc) == 6 and all("response_format" in body for body in first_sc)
    assert len(second_sc) == 6 and not any("response_format" in body for body in second_sc)


async def test_passing_poll_failures_are_waited_out_and_lasting_ones_stop_the_run(stub, panel_yaml, tmp_path, capsys):
    pairs = write_pairs(tmp_path / "pairs.jsonl", 3)
    stub.batches.failing_retrieves = 5  # fewer than POLL_RETRIES in a row per batch: waited out
    assert await arun_judge(batch_args(pairs, panel_yaml, tmp_path / "votes.jsonl")) == 0
    assert len(read_votes(tmp_path / "votes.jsonl")) == 3
    stub.batches.failing_retrieves = 12  # both batches are polled at once: 6 failures in a row each
    with pytest.raises(JudgeCommandError, match=r"GET /batches/\S+: HTTP 503: .*rerun the same command"):
        await arun_judge(batch_args(pairs, panel_yaml, tmp_path / "again.jsonl"))
    capsys.readouterr()
    stub.batches.failing_retrieves = 0
    assert await arun_judge(batch_args(pairs, panel_yaml, tmp_path / "again.jsonl")) == 0  # the rerun resumes
    assert "batch: 0 created, 2 resumed" in capsys.readouterr().out


async def test_a_failed_batch_makes_invalid_votes_not_a_crash(stub, panel_yaml, tmp_path, capsys):
    pairs = write_pairs(tmp_path / "pairs.jsonl", 3)
    stub.batches.fail_validation = True
    out = tmp_path / "votes.jsonl"
    assert await arun_judge(batch_args(pairs, panel_yaml, out)) == 0
    assert "judged 3 items" in capsys.readouterr().out
    votes = [v for j in read_votes(out) for v in j.votes]
    assert len(votes) == 6 and not any(v.valid for v in votes)
    assert all("batch_failed" in v.error for v in votes)
    assert answers_path(out).exists()


async def test_the_batch_api_failing_says_how_to_resume(stub, panel_yaml, tmp_path):
    pairs = write_pairs(tmp_path / "pairs.jsonl", 2)
    panel_yaml.write_text(panel_yaml.read_text().replace(stub.url, stub.url + "/missing"), encoding="utf-8")
    with pytest.raises(JudgeCommandError, match=r"the batch API failed: POST /files: HTTP 404.*rerun the same command"):
        await arun_judge(batch_args(pairs, panel_yaml, tmp_path / "votes.jsonl"))


def test_judges_without_a_batch_api_are_refused_up_front():
    local = JudgeConfig.model_validate({"name": "l", "model": "smollm2", "local": {"model": "smollm2"}})
    with pytest.raises(BatchUnsupported, match="local model, which has no batch API"):
        batch_endpoint(local)
    gemini = JudgeConfig.model_validate({"name": "g", "model": "gemini/gemini-2.0-flash"})
    with pytest.raises(BatchUnsupported, match="neither an OpenAI or Anthropic model"):
        batch_endpoint(gemini)
    assert (
        batch_endpoint(JudgeConfig.model_validate({"name": "o", "model": "gpt-4o-mini"})) == "https://api.openai.com/v1"
    )


async def test_a_refused_panel_touches_nothing(tmp_path, capsys):
    panel = tmp_path / "gemini.yaml"
    panel.write_text("name: g\njudges:\n  - name: gemini\n    model: gemini/gemini-2.0-flash\n", encoding="utf-8")
    out = tmp_path / "votes.jsonl"
    with pytest.raises(BatchUnsupported, match="judge 'gemini': --batch speaks the OpenAI batch API and Anthropic"):
        await arun_judge(batch_args(write_pairs(tmp_path / "pairs.jsonl", 2), panel, out))
    assert not out.exists() and not state_path(out).exists() and capsys.readouterr().out == ""


async def test_batch_needs_a_file(panel_yaml):
    with pytest.raises(JudgeCommandError, match="--batch judges a file"):
        await arun_judge(parse("--question", "q", "--answer-a", "a", "--answer-b", "b", "--batch"))


# ---------------------------------------------------------------- resume files that cannot be read (issue 41)

ENTRY = {"judge": "sc-judge", "api_base": "http://127.0.0.1:9/v1", "input_file_id": "file-1", "custom_ids": ["c1"]}
BAD_STATE = {
    "not json": (b"{not json", "malformed JSON"),
    "not utf-8": (b'{"version": 1, "batches": [], "note": "\xff"}', "not UTF-8 text"),
    "deep": (b"[" * 100_000, "nested deeper than 128 levels"),
    "a list": (b"[]", "not a batch state file: the whole file: Input should be a valid dictionary"),
    "another version": (json.dumps({"version": 2, "batches": []}).encode(), "batch state version 2"),
    "an unknown key": (json.dumps({"version": 1, "batches": [{**ENTRY, "surprise": 1}]}).encode(),
                       "batches[0].surprise"),
    "a wrong type": (json.dumps({"version": 1, "batches": [{**ENTRY, "custom_ids": "c1"}]}).encode(),
                     "batches[0].custom_ids"),
    "a missing key": (json.dumps({"version": 1, "batches": [{"judge": "sc-judge"}]}).encode(), "batches[0].api_base"),
}
BAD_ANSWERS = {
    "deep": (b"[" * 100_000, "line 2: nested deeper than 128 levels"),
    "an error that is not a record": (b'{"custom_id": "c2", "error": "boom"}', "line 2: not an answer record"),
    "no custom id": (b'{"status_code": 200, "body": {}}', "line 2: not an answer record: no custom_id"),
    "a status that is text": (b'{"custom_id": "c2", "status_code": "200"}', "line 2: not an answer record"),
}
GOOD_ANSWER = b'{"custom_id": "c1", "error": {"code": "batch_expired", "message": "gone"}}'


def _judge_batch(tmp_path: Path, capsys) -> str:
    """``judgefuse judge PAIRS --batch`` through main(): exit 2, one line, no traceback; nothing
    sent (the panel's api_base is a closed port) and no votes file written."""
    panel = stub_panel(tmp_path / "panel.yaml", "http://127.0.0.1:9/v1",
                       [{"name": "sc-judge", "model": "openai/gpt-4o-mini", "backend": "direct"}])
    pairs, out = write_pairs(tmp_path / "pairs.jsonl", 2), tmp_path / "votes.jsonl"
    code = main(["judge", str(pairs), "--panel", str(panel), "--out", str(out), "--quiet", "--batch"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and err.strip().count("\n") == 0, err
    assert not out.exists()
    return err


@pytest.mark.parametrize("fault", list(BAD_STATE))
def test_a_state_file_that_cannot_be_read_is_named_with_how_to_start_over(fault: str, tmp_path: Path, capsys) -> None:
    content, problem = BAD_STATE[fault]
    state = state_path(tmp_path / "votes.jsonl")
    state.write_bytes(content)
    err = _judge_batch(tmp_path, capsys)
    assert f"judgefuse judge: error: {state}: " in err and problem in err
    assert "to start over, move it aside and run again: the answers already downloaded are kept" in err
    assert state.read_bytes() == content, "a file that cannot be read is left as it was"


@pytest.mark.parametrize("fault", list(BAD_ANSWERS))
def test_an_answers_file_that_cannot_be_read_names_its_line(fault: str, tmp_path: Path, capsys) -> None:
    content, problem = BAD_ANSWERS[fault]
    answers = answers_path(tmp_path / "votes.jsonl")
    answers.write_bytes(GOOD_ANSWER + b"\n" + content + b"\n")
    err = _judge_batch(tmp_path, capsys)
    assert f"judgefuse judge: error: {answers}: {problem}" in err
    assert "move it aside and run again: every request it answered is asked (and paid for) again" in err


async def test_a_real_runs_files_resume_and_a_corrupted_one_is_refused(stub, panel_yaml, tmp_path):
    pairs, out = write_pairs(tmp_path / "pairs.jsonl", 3), tmp_path / "votes.jsonl"
    assert await arun_judge(batch_args(pairs, panel_yaml, out)) == 0
    answers = answers_path(out)
    kept = answers.read_bytes()
    answers.write_bytes(kept + b'{"custom_id": "x"')  # a torn tail: skipped, the run resumes
    assert await arun_judge(batch_args(pairs, panel_yaml, out)) == 0
    answers.write_bytes(kept + b"[" * 100_000 + b"\n")
    with pytest.raises(BatchFileError, match=r"batch-answers.jsonl: line \d+: nested deeper"):
        await arun_judge(batch_args(pairs, panel_yaml, out))
    answers.write_bytes(kept)
    state = state_path(out)
    state.write_text(state.read_text(encoding="utf-8")[:40], encoding="utf-8")  # cut short
    with pytest.raises(BatchFileError, match=r"batch.json: malformed JSON"):
        await arun_judge(batch_args(pairs, panel_yaml, out))
