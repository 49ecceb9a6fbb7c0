"""``judgefuse judge --executor ray`` on a real Ray cluster: a head and two worker nodes on loopback
(tests/jf_test_support/ray_cluster.py), started and stopped here; the judges are the scripted
OpenAI stub (a real HTTP server on loopback) asked through the panel exactly as the local run
asks it, so every vote crosses the same code.

What is checked, on 2,000 pairs against the single-process run of the same file:

* the votes are the local run's, item for item (all but each vote's latency), and so is the
  summary line; every (item, judge) is asked exactly once;
* the driver killed (SIGKILL) mid-run and the command run again: every item in the file once,
  the rerun judges exactly what the file lacked and asks nothing the file already had;
* a worker node killed mid-run: the run finishes on the surviving worker with every item once
  and the local run's votes; the only (item, judge) pairs asked twice are those of the items the
  dead worker held when it died (counted by the run, at most its --concurrency);
* a panel no worker can start names the worker's error (exit 1), and the argument checks.

No speed is asserted: the cluster shares this machine's 2 cores with everything else.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from jf_test_support import openai_stub as S
from jf_test_support.judge_cli import parse, serving, stub_panel
from jf_test_support.ports import free_port
from jf_test_support.ray_cluster import RayCluster

from judgefuse.cli import main
from judgefuse.evaluation.judge_command import arun_judge
from judgefuse.evaluation.loaders import read_votes
from judgefuse.judges.types import JudgedItem

N_ITEMS = 2000
Reference = tuple[Path, dict[str, dict[str, Any]], str]
"""The pairs file, the single-process run's votes by item id, and its summary line."""
CONCURRENCY = 8
REPO = Path(__file__).resolve().parents[2]


def scripted(body: dict[str, Any]) -> S.Reply:
    """A judge whose answer is a hash of (model, question) (the prompt's nonce tags change per
    call): the two judges disagree on some items, confidences spread, and one answer in 25 is
    unreadable (an invalid vote)."""
    digest = hashlib.sha256((body["model"] + _question(body)).encode()).digest()
    if digest[2] % 25 == 0:
        text = "I cannot decide."
    else:
        choice = "a" if digest[0] % 3 else "b"
        text = json.dumps({"selected_output": f"Output ({choice})", "confidence_score": 50 + digest[1] % 51,
                           "explanation": "scripted"})  # fmt: skip
    return S.Reply(texts=text, usage=(100 + digest[3] % 50, 10), delay_s=0.05)


def _question(body: dict[str, Any]) -> str:
    return re.split(r"</?instruction_[0-9a-f]+>", body["messages"][-1]["content"])[1].strip()


def question_of(request: S.Recorded) -> str:
    return _question(request.body)


def asked(stub: S.StubServer, since: int = 0) -> Counter[tuple[str, str]]:
    """(judge model, question) -> how often the stub was asked, from request ``since`` on."""
    return Counter((r.body["model"], question_of(r)) for r in stub.requests[since:])


def write_pairs(path: Path) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for i in range(N_ITEMS):
            record = {"pair_id": f"p{i:04d}", "question": f"question {i}", "response_A": f"answer a{i}",
                      "response_B": f"answer b{i}", "label": "A>B" if i % 2 else "B>A", "source": "synthetic-x"}  # fmt: skip
            handle.write(json.dumps(record) + "\n")
    return path


def panel_file(path: Path, url: str) -> Path:
    return stub_panel(path, url, [
        {"name": "judge-one", "model": "openai/judge-one", "backend": "direct"},
        {"name": "judge-two", "model": "openai/judge-two", "backend": "direct"},
    ], name="two", timeout_s=30)  # fmt: skip


def comparable(judged: JudgedItem) -> dict[str, Any]:
    """The line as written, less each vote's latency (the only field that differs run to run)."""
    data = judged.model_dump(mode="json")
    for vote in data["votes"]:
        vote.pop("latency_s")
    return data


def by_id(path: Path) -> dict[str, dict[str, Any]]:
    judged = read_votes(path)
    ids = Counter(j.item.id for j in judged)
    assert set(ids.values()) == {1}, [i for i, n in ids.items() if n > 1]  # each item once
    return {j.item.id: comparable(j) for j in judged}


def costs(summary: str) -> str:
    """The summary line after its wall time: items, calls, tokens, cost, invalid votes, quorum."""
    head, _, tail = summary.partition(" s: ")
    return re.sub(r" in [0-9.]+$", "", head) + " | " + tail


def lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    with RayCluster(workers=2) as running:
        yield running


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """The pairs file and the single-process run's votes (by id) and summary line."""
    tmp = tmp_path_factory.mktemp("reference")
    pairs = write_pairs(tmp / "pairs.jsonl")

    async def run() -> str:
        async with serving(scripted) as stub:
            out = tmp / "votes.jsonl"
            args = parse(str(pairs), "--out", str(out), "--panel", str(panel_file(tmp / "panel.yaml", stub.url)),
                         "--concurrency", str(2 * CONCURRENCY), "--quiet")  # fmt: skip
            summary = await _captured(arun_judge(args))
            assert set(asked(stub).values()) == {1} and len(stub.requests) == 2 * N_ITEMS
            return summary

    summary = asyncio.run(run())
    return pairs, by_id(tmp / "votes.jsonl"), summary


async def _captured(run: Any) -> str:
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        await run
    return buffer.getvalue().splitlines()[0]


@pytest.fixture
async def stub() -> AsyncIterator[S.StubServer]:
    async with serving(scripted) as server:
        yield server


def _argv(pairs: Path, out: Path, panel: Path, cluster: RayCluster, *extra: str) -> list[str]:
    return [sys.executable, "-m", "judgefuse.cli", "judge", str(pairs), "--out", str(out), "--panel", str(panel),
            "--concurrency", str(CONCURRENCY), "--quiet", "--executor", "ray", "--address", cluster.address, *extra]  # fmt: skip


def _env(cluster: RayCluster) -> dict[str, str]:
    env = {k: v for k, v in cluster.env.items() if not k.startswith("JUDGEFUSE_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


async def _spawn(argv: list[str], cluster: RayCluster, cwd: Path, *, quiet: bool = False) -> asyncio.subprocess.Process:
    """The command as a child (its output piped, or dropped with ``quiet``)."""
    stream = asyncio.subprocess.DEVNULL if quiet else asyncio.subprocess.PIPE
    return await asyncio.create_subprocess_exec(*argv, env=_env(cluster), cwd=cwd, stdout=stream, stderr=stream)


async def _run(argv: list[str], cluster: RayCluster, cwd: Path) -> tuple[int, str, str]:
    proc = await _spawn(argv, cluster, cwd)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=400)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _until_lines(path: Path, n: int, proc: asyncio.subprocess.Process, timeout: float = 300) -> None:
    async with asyncio.timeout(timeout):
        while lines(path) < n:
            assert proc.returncode is None, "the run ended before the kill"
            await asyncio.sleep(0.02)


@pytest.mark.timeout(900)
async def test_ray_run_matches_the_local_run_and_resumes_after_the_driver_is_killed(
    cluster: RayCluster, reference: Reference, stub: S.StubServer, tmp_path: Path
) -> None:
    pairs, local_votes, local_summary = reference
    panel = panel_file(tmp_path / "panel.yaml", stub.url)

    out = tmp_path / "votes.jsonl"
    code, stdout, stderr = await _run(_argv(pairs, out, panel, cluster), cluster, tmp_path)
    assert code == 0, stdout + stderr
    summary, ray_line = stdout.splitlines()  # stdout is the summary, as in the local run, and the Ray line
    assert costs(summary) == costs(local_summary), (summary, local_summary)
    assert ray_line.startswith("ray: 2 of 2 workers started on 2 nodes") and "lost" not in ray_line, ray_line
    assert by_id(out) == local_votes
    assert len(stub.requests) == 2 * N_ITEMS and set(asked(stub).values()) == {1}
    print(f"ray run: {summary}\n{ray_line}")

    # the driver SIGKILLed mid-run, then the same command again
    stub.requests.clear()
    out = tmp_path / "votes-killed.jsonl"
    argv = _argv(pairs, out, panel, cluster)
    proc = await _spawn(argv, cluster, tmp_path, quiet=True)
    try:
        await _until_lines(out, 300, proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    survived = by_id(out)  # every whole line parses (VotesWriter cuts a partial tail on reopen)
    done = len(survived)
    assert 300 <= done < N_ITEMS
    first_run = len(stub.requests)
    code, stdout, stderr = await _run(argv, cluster, tmp_path)
    assert code == 0, stdout + stderr
    assert f"judged {N_ITEMS - done} items ({done} already done, skipped)" in stdout, stdout
    assert by_id(out) == local_votes
    rerun = asked(stub, since=first_run)
    written = {f"question {int(item_id[1:])}" for item_id in survived}
    assert not {question for _, question in rerun} & written  # nothing already in the file is asked again
    # the rerun asks for every missing item; the killed run's workers may send what they held a
    # moment after the snapshot (they die with their driver, not at once)
    assert 2 * (N_ITEMS - done) <= sum(rerun.values()) <= 2 * (N_ITEMS - done) + 2 * 2 * CONCURRENCY
    twice = {question for (_, question), n in asked(stub).items() if n > 1}
    assert len(twice) <= 2 * CONCURRENCY  # only what the killed run's two workers held
    print(f"driver SIGKILL after {done}/{N_ITEMS} items; the rerun judged {N_ITEMS - done}, "
          f"{len(twice)} items in flight at the kill asked again")  # fmt: skip


@pytest.mark.timeout(900)
async def test_a_worker_node_killed_mid_run_loses_nothing_and_repeats_only_what_it_held(
    cluster: RayCluster, reference: Reference, stub: S.StubServer, tmp_path: Path
) -> None:
    pairs, local_votes, _ = reference
    panel = panel_file(tmp_path / "panel.yaml", stub.url)
    out = tmp_path / "votes.jsonl"
    proc = await _spawn(_argv(pairs, out, panel, cluster), cluster, tmp_path)
    try:
        await _until_lines(out, 300, proc)
        await asyncio.to_thread(cluster.kill_worker, 0)
        at_kill = lines(out)
        stdout_b, stderr_b = await asyncio.wait_for(proc.communicate(), timeout=400)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    stdout = stdout_b.decode()
    assert proc.returncode == 0, stdout + stderr_b.decode()[-4000:]
    assert at_kill < N_ITEMS, "the run had finished when the node died"
    summary, ray_line = stdout.splitlines()  # Ray's own message on the lost node went to stderr
    assert f"judged {N_ITEMS} items (0 already done, skipped)" in summary, summary
    match = re.search(r"1 lost \(.*\): the (\d+) items? they held went back to the queue", ray_line)
    assert match, ray_line
    requeued = int(match.group(1))
    assert 1 <= requeued <= CONCURRENCY
    assert by_id(out) == local_votes  # nothing lost, nothing twice, the local run's votes
    counts = asked(stub)
    assert set(counts.values()) <= {1, 2}
    twice = {question for (_, question), n in counts.items() if n == 2}
    assert len(twice) <= requeued  # asked again: only the items the dead worker held
    assert sum(counts.values()) <= 2 * N_ITEMS + 2 * requeued
    print(f"worker node killed with {at_kill}/{N_ITEMS} items written: {requeued} items it held went back "
          f"to the queue, {len(twice)} of them had reached a judge; {ray_line}")  # fmt: skip
    await asyncio.to_thread(cluster.add_worker)  # the cluster as the other tests found it


@pytest.mark.timeout(600)
async def test_a_panel_no_worker_can_start_names_the_error(cluster: RayCluster, tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"id": "x", "question": "q", "answer_a": "a", "answer_b": "b"}) + "\n")
    panel = stub_panel(tmp_path / "panel.yaml", "http://127.0.0.1:9/v1", [
        {"name": "keyed", "model": "openai/keyed", "backend": "direct", "api_key_env": "JF_TEST_RAY_UNSET_KEY"},
    ])  # fmt: skip
    code, stdout, stderr = await _run(_argv(pairs, tmp_path / "v.jsonl", panel, cluster), cluster, tmp_path)
    assert code == 1, stdout + stderr
    assert "no Ray worker could start the panel" in stderr and "JF_TEST_RAY_UNSET_KEY" in stderr, stderr
    assert "judged 0 items" in stdout


def test_flags_that_do_not_go_together_and_a_missing_extra(tmp_path: Path, monkeypatch, capsys) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"id": "x", "question": "q", "answer_a": "a", "answer_b": "b"}) + "\n")
    out = str(tmp_path / "v.jsonl")
    cases = {
        ("--address", "127.0.0.1:1"): "--address is for --executor ray",
        ("--workers", "2"): "--workers is for --executor ray",
        ("--executor", "ray", "--batch"): "give one",
        ("--executor", "ray", "--workers", "0"): "--workers must be >= 1",
    }
    for flags, message in cases.items():
        assert main(["judge", str(pairs), "--out", out, *flags]) == 2
        assert message in capsys.readouterr().err
    single = ["judge", "--question", "q", "--answer-a", "a", "--answer-b", "b", "--executor", "ray"]
    assert main(single) == 2 and "not a single pair" in capsys.readouterr().err
    # an address nothing answers fails at once (Ray itself retries for minutes), as a failed run
    nowhere = f"127.0.0.1:{free_port()}"
    assert main(["judge", str(pairs), "--out", out, "--executor", "ray", "--address", nowhere]) == 1
    captured = capsys.readouterr()
    assert f"cannot reach the Ray cluster at {nowhere}" in captured.err and "ray: no cluster joined" in captured.out

    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    assert main(["judge", str(pairs), "--out", out, "--executor", "ray"]) == 2
    assert "pip install 'judgefuse[ray]'" in capsys.readouterr().err
    assert Path(out).read_text() == ""  # the unreachable cluster's run opened it; no run wrote to it


def test_the_parser_knows_the_executor() -> None:
    args = parse("pairs.jsonl", "--out", "v.jsonl", "--executor", "ray", "--address", "h:1", "--workers", "3")
    assert isinstance(args, argparse.Namespace)
    assert (args.executor, args.address, args.workers) == ("ray", "h:1", 3)
    assert parse("pairs.jsonl", "--out", "v.jsonl").executor == "local"
