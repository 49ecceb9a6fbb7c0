"""The pair helpers: bounded concurrency, results as they finish, a resume file that makes an
interrupted run judge each pair once in all."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from jf_test_support import openai_stub as stub_module
from jf_test_support.live_gateway import API_KEY, LiveGateway, live_gateway

from judgefuse.client import AsyncClient, Client, InvalidRequest, RetryPolicy

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
