"""``judgefuse judge --batch`` with an Anthropic judge: message batches on the loopback stub
(``POST /v1/messages/batches``, its retrieve and ``results_url``), read like online answers.

The online path of the same judge is litellm's Anthropic client against the stub's
``/v1/messages``, answered by the same handler: the votes must be identical, at half the cost.
A few hundred pairs go through create, poll, a partial failure (errored requests) and an
interrupted run that resumes the batch it created; expired requests become invalid votes with
their reason, and ``--batch-retry-online`` sends exactly those online.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from jf_test_support import openai_stub as S
from jf_test_support.judge_cli import FAIL, batch_args, comparable, parse, prefers_correct, serving, stub_panel
from jf_test_support.judge_cli import write_pairs as write_judgebench_pairs

from judgefuse.evaluation.judge_command import arun_judge
from judgefuse.evaluation.loaders import read_votes
from judgefuse.judges.batch import state_path
from judgefuse.judges.batch.answers import anthropic_record
from judgefuse.judges.batch.runner import batch_endpoint
from judgefuse.judges.config import JudgeConfig

KEY = "sk-ant-test-key"
MODEL = "anthropic/claude-haiku-4-5"  # priced in litellm's table: the cost ratio is checked


def reply(body: dict) -> S.Action:
    """Prefers the output that mentions 'correct'; a question with FAIL gets an overloaded error."""
    user = body["messages"][-1]["content"]
    if FAIL in user:
        return S.Status(529, "scripted overload")
    return prefers_correct(body)


@pytest.fixture
async def stub() -> AsyncIterator[S.StubServer]:
    async with serving(reply, require_key=KEY) as server:
        yield server


@pytest.fixture(autouse=True)
def anthropic_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


@pytest.fixture
def panel(tmp_path: Path, stub: S.StubServer) -> Path:
    return stub_panel(tmp_path / "panel.yaml", stub.url.removesuffix("/v1"), [
        {"name": "claude", "model": MODEL, "api_key_env": "ANTHROPIC_API_KEY", "structured_output": False},
    ], name="claude", timeout_s=120)  # fmt: skip


def write_pairs(path: Path, n: int, *, failing: set[int] | frozenset[int] = frozenset()) -> Path:
    """Pairs as our items (``id``, ``answer_a``, ``label: A``), the other input format."""
    return write_judgebench_pairs(path, n, failing=failing, style="items")


async def test_batch_votes_equal_litellms_online_votes_at_half_the_cost(stub, panel, tmp_path, capsys):
    pairs = write_pairs(tmp_path / "pairs.jsonl", 20)  # litellm's Anthropic client is slow under load
    online_out, batch_out = tmp_path / "online.jsonl", tmp_path / "batch.jsonl"
    assert await arun_judge(parse(str(pairs), "--panel", str(panel), "--out", str(online_out), "--quiet")) == 0
    assert len(stub.requests) == 20  # one /v1/messages call per item
    stub.requests.clear()
    capsys.readouterr()
    assert await arun_judge(batch_args(pairs, panel, batch_out)) == 0
    assert "batch: 1 created, 0 resumed, 20 requests submitted, 0 failed or expired" in capsys.readouterr().out
    assert stub.requests == [] and stub.anthropic.created == 1  # nothing went online
    sent = next(iter(stub.anthropic.batches.values())).requests
    assert sent[0]["params"]["model"] == "claude-haiku-4-5" and sent[0]["params"]["max_tokens"] >= 1
    assert sent[0]["params"]["system"] and all(m["role"] != "system" for m in sent[0]["params"]["messages"])
    assert all(h.get("x-api-key") == KEY and h.get("anthropic-version") for h in stub.anthropic.headers)
    online = {j.item.id: j for j in read_votes(online_out)}
    batch = {j.item.id: j for j in read_votes(batch_out)}
    assert set(batch) == set(online) == {f"p{i}" for i in range(20)}
    for item_id, judged in batch.items():
        assert [comparable(v) for v in judged.votes] == [comparable(v) for v in online[item_id].votes]
        (vote,) = judged.votes
        assert vote.valid and vote.choice == judged.item.label
        theirs = online[item_id].votes[0]
        assert theirs.cost_usd > 0 and vote.cost_usd == pytest.approx(theirs.cost_usd / 2)
    assert KEY not in batch_out.read_text() and KEY not in state_path(batch_out).read_text()


async def test_partial_failure_and_an_interrupted_run_that_resumes(stub, panel, tmp_path, capsys):
    n = 300
    failing = set(range(0, n, 25))
    pairs = write_pairs(tmp_path / "pairs.jsonl", n, failing=failing)
    out = tmp_path / "votes.jsonl"
    args = batch_args(pairs, panel, out)
    stub.anthropic.hold = True  # still processing when the run is interrupted
    task = asyncio.create_task(arun_judge(args))
    for _ in range(1000):
        await asyncio.sleep(0.02)
        if stub.anthropic.created and state_path(out).exists() and '"batch_id": "msgbatch' in state_path(out).read_text():
            break
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert capsys.readouterr().out.startswith("interrupted after 0 items")
    assert stub.anthropic.created == 1

    stub.anthropic.hold = False
    assert await arun_judge(args) == 0
    printed = capsys.readouterr().out
    assert stub.anthropic.created == 1  # the same batch was polled, none created again
    assert f"batch: 0 created, 1 resumed, 0 requests submitted, {len(failing)} failed or expired" in printed
    assert f"judged {n} items (0 already done, skipped)" in printed
    judged = read_votes(out)
    assert len(judged) == n and stub.requests == []
    for item in judged:
        (vote,) = item.votes
        if int(item.item.id[1:]) in failing:
            assert not vote.valid and vote.error.startswith("ServerError: HTTP 529: scripted overload")
        else:
            assert vote.valid and vote.choice == item.item.label


async def test_expired_requests_are_invalid_votes_and_can_be_retried_online(stub, panel, tmp_path, capsys):
    pairs = write_pairs(tmp_path / "pairs.jsonl", 10)
    stub.anthropic.expire_after = 6
    out = tmp_path / "votes.jsonl"
    assert await arun_judge(batch_args(pairs, panel, out)) == 0
    assert "batch: 1 created, 0 resumed, 10 requests submitted, 4 failed or expired" in capsys.readouterr().out
    invalid = [v.error for j in read_votes(out) for v in j.votes if not v.valid]
    assert len(invalid) == 4 and all(e.startswith("JudgeTimeout: batch request batch_expired") for e in invalid)

    retry_out = tmp_path / "retry.jsonl"
    assert await arun_judge(batch_args(pairs, panel, retry_out, "--batch-retry-online")) == 0
    assert "4 failed or expired (4 retried online)" in capsys.readouterr().out
    assert len(stub.requests) == 4  # exactly the expired requests went online (/v1/messages)
    assert all(v.valid for j in read_votes(retry_out) for v in j.votes)


def test_anthropic_judges_batch_at_their_api_base_or_anthropics():
    claude = JudgeConfig.model_validate({"name": "c", "model": MODEL})
    assert batch_endpoint(claude) == "https://api.anthropic.com"
    at = JudgeConfig.model_validate({"name": "c", "model": MODEL, "api_base": "http://127.0.0.1:9/"})
    assert batch_endpoint(at) == "http://127.0.0.1:9/"


@pytest.mark.parametrize(("result", "expected"), [
    ({"type": "errored", "error": {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}},
     {"status_code": 400}),
    ({"type": "errored", "error": {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}},
     {"status_code": 429}),
    ({"type": "expired"}, {"error": {"code": "batch_expired"}}),
    ({"type": "canceled"}, {"error": {"code": "batch_cancelled"}}),
    (None, {"error": {"code": "batch_error"}}),
])
def test_each_result_type_becomes_the_record_an_online_answer_would(result, expected):
    record = anthropic_record("c1", result)
    for key, value in expected.items():
        assert record[key] == value if not isinstance(value, dict) else record[key].items() >= value.items()
