"""The pair helpers: bounded concurrency, results as they finish, a resume file that makes an
interrupted run judge each pair once in all."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from jf_test_support import openai_stub as stub_module
from jf_test_support.live_gateway import API_KEY, LiveGateway, live_gateway

from judgefuse.client import AsyncClient, CircuitBreaker, Client, GatewayDown, InvalidRequest, PairResult, RetryPolicy

FAST = RetryPolicy(deadline_s=10, backoff_s=0.05, max_backoff_s=0.2)


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[LiveGateway]:
    with live_gateway(tmp_path) as live:
        yield live


def pairs(n: int) -> Iterator[dict[str, str]]:
    """A generator (no len): the helper must not need the whole input."""
    for i in range(n):
        yield {"question": f"question {i}", "answer_a": f"a{i}", "answer_b": f"b{i}"}


def test_an_interrupted_run_resumes_and_judges_every_pair_once(gateway: LiveGateway, tmp_path: Path) -> None:
    progress_file = tmp_path / "run.jsonl"
    with Client(gateway.url, API_KEY, retry=FAST) as client:
        first = []
        for result in client.judge_pairs(pairs(30), concurrency=4, resume=progress_file, progress=False):
            first.append(result)
            if len(first) == 10:
                break  # interrupted: pairs in flight finish on the gateway but not in the file
        with progress_file.open("a") as cut:
            cut.write('{"index": 29, "id": "cut sh')  # a line a killed run left half-written
        rest = list(client.judge_pairs(list(pairs(30)), concurrency=4, resume=progress_file, progress=False))
    assert all(r.ok for r in first + rest)
    indices = sorted(r.index for r in first + rest)
    assert indices == list(range(30))  # nothing missing, nothing twice
    assert gateway.judge_calls() == 30 * 3  # each pair's judges called once over both runs
    lines = [json.loads(line) for line in progress_file.read_text().splitlines() if line.endswith("}")]
    assert sorted(line["index"] for line in lines if line.get("verdict")) == list(range(30))
    again = list(Client(gateway.url, API_KEY).judge_pairs(pairs(30), resume=progress_file, progress=False))
    assert again == []  # all done: nothing to judge


def test_a_resume_file_with_hostile_lines_is_read_past_them(gateway: LiveGateway, tmp_path: Path) -> None:
    """Bytes that are not UTF-8 and a line of 100,000 brackets (issue 41: a UnicodeDecodeError and
    a RecursionError out of the resume file) read as lines that record nothing: judged again."""
    progress_file = tmp_path / "run.jsonl"
    progress_file.write_bytes(b'{"index": 0, "id": "caf\xe9", "verdict": {}}\n' + b"[" * 100_000 + b"\n")
    with Client(gateway.url, API_KEY, retry=FAST) as client:
        results = list(client.judge_pairs(pairs(3), resume=progress_file, progress=False))
    assert sorted(r.index for r in results) == [0, 1, 2] and all(r.ok for r in results)


async def test_async_pairs_yield_as_they_finish_and_report_failures(tmp_path: Path) -> None:
    with live_gateway(tmp_path, max_text_chars=100) as live:
        live.script.by_question = lambda model, text: stub_module.Reply(
            texts='{"selected_output": "Output (a)", "confidence_score": 90, "explanation": "x"}',
            delay_s=1.0) if "question 0" in text else None
        items = list(pairs(12))
        items[5] = {**items[5], "answer_b": "x" * 500}  # over max_text_chars: a 422 for that pair
        async with AsyncClient(live.url, API_KEY, retry=FAST) as client:
            results = [r async for r in client.judge_pairs(items, concurrency=3, progress=True)]
    assert sorted(r.index for r in results) == list(range(12))
    assert results[0].index != 0  # the slow pair did not hold the others back
    failed = [r for r in results if not r.ok]
    assert [r.index for r in failed] == [5] and isinstance(failed[0].error, InvalidRequest)
    assert failed[0].error.fields[0].field == "body.answer_b"



N_PAIRS, KILL_AFTER, CONCURRENCY = 2000, 100, 8
BREAKER = CircuitBreaker(failures=5, outage_s=30)


def _stored_verdicts(tmp_path: Path) -> int:
    with sqlite3.connect(tmp_path / "gateway.sqlite3") as db:
        return int(db.execute("select count(*) from verdicts").fetchone()[0])


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_dead_gateway_stops_the_run_once_and_a_rerun_judges_each_pair_once(tmp_path: Path, flavour: str) -> None:
    """Issue 47: the gateway stops after 100 of 2,000 pairs. Without a breaker each of the 1,900
    pairs left waits out its own 120 s retry deadline (about 8 h at 8 in flight); with it the
    run raises one GatewayDown after at most failures + concurrency sends that got no answer,
    the resume file holds only verdicts, and a rerun judges the rest, none twice."""
    progress_file = tmp_path / "run.jsonl"
    stack = contextlib.ExitStack()
    live = stack.enter_context(live_gateway(tmp_path))
    first: list[PairResult] = []
    async_clients: list[AsyncClient] = []
    started = time.monotonic()
    if flavour == "sync":
        client = Client(live.url, API_KEY, breaker=BREAKER)
        with pytest.raises(GatewayDown) as stopped:
            for result in client.judge_pairs(pairs(N_PAIRS), concurrency=CONCURRENCY, resume=progress_file,
                                             progress=False):
                first.append(result)
                if len(first) == KILL_AFTER:
                    live.wait_until_quiet()  # the pairs in flight finish (and are stored) first
                    stack.close()  # the gateway stops
        client.close()
        breaker = client.last_breaker
        assert breaker is not None
    else:
        async def run() -> None:
            async with AsyncClient(live.url, API_KEY, breaker=BREAKER) as client:
                async_clients.append(client)
                async for result in client.judge_pairs(pairs(N_PAIRS), concurrency=CONCURRENCY,
                                                       resume=progress_file, progress=False):
                    first.append(result)
                    if len(first) == KILL_AFTER:
                        await asyncio.to_thread(live.wait_until_quiet)
                        await asyncio.to_thread(stack.close)

        with pytest.raises(GatewayDown) as stopped:
            asyncio.run(run())
        breaker = async_clients[0].last_breaker
        assert breaker is not None
    elapsed = time.monotonic() - started
    first_calls = live.judge_calls()
    assert all(r.ok for r in first)  # nothing cut off was yielded as a failure
    judged_first = len(first)
    assert KILL_AFTER <= judged_first <= KILL_AFTER + CONCURRENCY
    error = stopped.value
    assert error.finished == judged_first and error.resume == str(progress_file)
    assert f"{judged_first} pair(s) finished" in str(error) and "resume=" in str(error)
    assert BREAKER.failures <= breaker.failed <= BREAKER.failures + CONCURRENCY  # sends that found no one
    assert elapsed < 120  # the breaker, not 1,900 retry deadlines (hours)
    lines = [json.loads(line) for line in progress_file.read_text().splitlines()]
    assert len(lines) == judged_first and all(line.get("verdict") for line in lines)  # no error lines

    with live_gateway(tmp_path) as again, Client(again.url, API_KEY) as client:  # the same storage
        rest = list(client.judge_pairs(pairs(N_PAIRS), concurrency=CONCURRENCY, resume=progress_file,
                                       progress=False))
        second_calls = again.judge_calls()
    assert all(r.ok for r in rest)
    assert sorted(r.index for r in first + rest) == list(range(N_PAIRS))  # nothing missing, nothing twice
    assert first_calls + second_calls == N_PAIRS * 3  # each pair's judges called once over both runs
    assert _stored_verdicts(tmp_path) == N_PAIRS
