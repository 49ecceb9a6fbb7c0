"""``judgefuse eval --fuser`` end to end: the fuser on the OpenAI-compatible stub over loopback.

The stub fuser prefers the output that says "correct" (so it is right on every item), with one
unusable reply on a chosen item; the judges in the data are wrong on half the items. The test
checks the fuser's row in the JSON and the terminal table, its recorded answers (tokens, the
invalid vote for the unusable reply), that a rerun calls the model zero times, that a limit then a
larger run calls only for the new items, and that answers recorded over other votes are refused.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from jf_test_support import openai_stub as S

from judgefuse.cli import main
from judgefuse.evaluation.loaders import read_votes
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem

N_ITEMS = 24
UNUSABLE = "i7"


def fuser_reply(body: dict) -> S.Reply:
    user = body["messages"][-1]["content"]
    output_a = re.split(r"</?output_a_[0-9a-f]+>", user)[1]
    if f"question {UNUSABLE}\n" in user:
        return S.Reply(texts="I cannot decide.", usage=(300, 5))
    choice = "a" if "correct" in output_a else "b"
    text = json.dumps({"selected_output": f"Output ({choice})", "confidence_score": 90, "explanation": "read them"})
    return S.Reply(texts=text, usage=(300, 20))


class ThreadedStub:
    """The stub server on its own event loop in a thread (the CLI runs its own loop)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(S.StubServer().start(), self.loop).result(10)
        self.server.handler = fuser_reply

    @property
    def calls(self) -> int:
        return len(self.server.requests)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def stub() -> Iterator[ThreadedStub]:
    server = ThreadedStub()
    try:
        yield server
    finally:
        server.stop()


def judged_item(i: int) -> JudgedItem:
    a_wins = i % 2 == 0
    item = PairwiseItem(
        id=f"i{i}",
        question=f"question i{i}",
        answer_a="the correct answer" if a_wins else "wrong",
        answer_b="wrong" if a_wins else "the correct answer",
        label="A" if a_wins else "B",
    )
    # two judges that always say A: right on even items, wrong on odd ones
    votes = [
        JudgeVote(judge=name, mode="sc", choice="A", confidence=conf, p_a=conf, explanation=f"{name} likes A")
        for name, conf in (("judge-1", 0.8), ("judge-2", 0.7))
    ]
    return JudgedItem(item=item, votes=votes)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "votes.jsonl"
    path.write_text("".join(judged_item(i).model_dump_json() + "\n" for i in range(N_ITEMS)), encoding="utf-8")
    return path


def run_eval(data: Path, stub: ThreadedStub, tmp_path: Path, *extra: str) -> int:
    return main(
        [
            "eval", str(data), "--fuser", "openai/fuser-model", "--fuser-api-base", stub.server.url,
            "--fuser-votes", str(tmp_path / "fuser.jsonl"), "--json", str(tmp_path / "report.json"),
            "--bootstrap", "20", "--methods", "majority", "stacked", "fuser", *extra,
        ]
    )  # fmt: skip


def rows(tmp_path: Path) -> dict[str, dict]:
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    return {row["name"]: row for row in report["rows"]}


def test_fuser_row_beside_voting_and_learned_methods(data, stub, tmp_path, capsys) -> None:
    assert run_eval(data, stub, tmp_path) == 0
    assert stub.calls == N_ITEMS
    out = capsys.readouterr()
    assert re.search(r"^fuser\s", out.out, re.M), out.out  # its row in the terminal table
    assert f"fuser: {N_ITEMS} items fused" in out.err and "1 unusable answer (fell back to majority)" in out.err
    by_name = rows(tmp_path)
    assert {"judge-1", "majority", "stacked", "fuser"} <= set(by_name)
    fuser = by_name["fuser"]
    # right everywhere except the unusable item, where majority's fallback says A on an odd (B) item
    assert fuser["accuracy"] == pytest.approx((N_ITEMS - 1) / N_ITEMS)
    assert by_name["majority"]["accuracy"] == pytest.approx(0.5)
    assert fuser["calls_total"] == N_ITEMS  # the fuser's calls (the recorded judges cost none)

    recorded = {judged.item.id: judged.votes[0] for judged in read_votes(tmp_path / "fuser.jsonl")}
    assert len(recorded) == N_ITEMS
    assert not recorded[UNUSABLE].valid and "fuser output invalid" in (recorded[UNUSABLE].error or "")
    assert recorded["i0"].choice == "A" and recorded["i1"].choice == "B"
    assert recorded["i0"].prompt_tokens == 300 and recorded["i0"].completion_tokens == 20
    # the fuser read the judges' critiques
    assert any("judge-2 likes A" in r.body["messages"][-1]["content"] for r in stub.server.requests)

    first = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert run_eval(data, stub, tmp_path) == 0
    assert stub.calls == N_ITEMS  # every answer recorded: no new call
    assert "0 items fused" in capsys.readouterr().err
    assert rows(tmp_path)["fuser"] == {row["name"]: row for row in first["rows"]}["fuser"]


def test_limit_then_resume_calls_only_for_new_items(data, stub, tmp_path) -> None:
    assert run_eval(data, stub, tmp_path, "--limit", "10") == 0
    assert stub.calls == 10
    assert rows(tmp_path)["fuser"]["n"] == 10
    assert run_eval(data, stub, tmp_path) == 0
    assert stub.calls == N_ITEMS
    assert rows(tmp_path)["fuser"]["n"] == N_ITEMS


def test_answers_recorded_over_other_votes_are_refused(data, stub, tmp_path, capsys) -> None:
    assert run_eval(data, stub, tmp_path, "--limit", "4") == 0
    changed = [judged_item(i) for i in range(N_ITEMS)]
    changed[2] = changed[2].model_copy(update={"votes": changed[2].votes[:1]})
    data.write_text("".join(j.model_dump_json() + "\n" for j in changed), encoding="utf-8")
    assert run_eval(data, stub, tmp_path, "--limit", "4") == 2
    assert "recorded over other judges' votes" in capsys.readouterr().err
    assert stub.calls == 4


def test_methods_fuser_needs_a_model(data, tmp_path, capsys) -> None:
    assert main(["eval", str(data), "--methods", "fuser", "--quiet"]) == 2
    assert "--fuser PANEL_OR_MODEL" in capsys.readouterr().err


def test_panel_without_fuser_entry_is_refused(data, tmp_path, capsys) -> None:
    panel = tmp_path / "panel.yaml"
    panel.write_text("name: p\njudges:\n  - name: j\n    external: true\n", encoding="utf-8")
    assert main(["eval", str(data), "--fuser", str(panel), "--quiet"]) == 2
    assert "no 'fuser:' model entry" in capsys.readouterr().err


def judgments_seen(body: dict) -> list[dict]:
    """The judges' verdicts as the fuser prompt shows them (one JSON object per judgment block)."""
    user = body["messages"][-1]["content"]
    return [json.loads(block) for block in re.findall(r"<judgment_[0-9a-f]+ index=\"\d+\">\n(.*?)\n</judgment", user, re.S)]


def tie_reading_fuser(body: dict) -> S.Reply:
    """Picks A when a judge called the item a tie, B otherwise: the fuser's answer depends on
    whether the prompt showed the tie as a tie (an abstention would read ``null``)."""
    seen = [j["selected_output"] for j in judgments_seen(body)]
    choice = "a" if "tie: judged the answers equal" in seen else "b"
    text = json.dumps({"selected_output": f"Output ({choice})", "confidence_score": 70, "explanation": "x"})
    return S.Reply(texts=text, usage=(100, 10))


def test_the_fuser_prompt_shows_a_tie_vote_as_a_tie_not_as_an_abstention(stub, tmp_path) -> None:
    stub.server.handler = tie_reading_fuser
    lines = []
    for i in range(6):
        # even items: judge-1 for A, judge-2 a tie ("A=B"), judge-3 failed; odd: judge-2 abstains too
        second = (JudgeVote.tied("judge-2", "recorded", explanation="both fine") if i % 2 == 0
                  else JudgeVote.invalid("judge-2", "recorded", "unparseable"))
        votes = [JudgeVote(judge="judge-1", mode="recorded", choice="A", confidence=0.8), second,
                 JudgeVote.invalid("judge-3", "recorded", "timeout")]
        item = PairwiseItem(id=f"t{i}", question=f"tie question {i}", answer_a="x", answer_b="y", label="A" if i % 2 == 0 else "B")
        lines.append(JudgedItem(item=item, votes=votes).model_dump_json() + "\n")
    data = tmp_path / "ties.jsonl"
    data.write_text("".join(lines), encoding="utf-8")
    assert run_eval(data, stub, tmp_path) == 0
    shown = {int(re.findall(r"tie question (\d+)", r.body["messages"][-1]["content"])[0]): judgments_seen(r.body)
             for r in stub.server.requests}
    assert sorted(shown) == list(range(6))
    for i, judgments in shown.items():
        outputs = [j["selected_output"] for j in judgments]
        tie_or_null = "tie: judged the answers equal" if i % 2 == 0 else None
        assert outputs == ["Output (a)", tie_or_null, None], (i, outputs)
        assert [j["confidence_score"] for j in judgments] == [80, None, None]
    system = stub.server.requests[0].body["messages"][0]["content"]
    assert '"tie: judged the answers equal" found the two outputs equally good' in system
    recorded = {j.item.id: j.votes[0].choice for j in read_votes(tmp_path / "fuser.jsonl")}
    assert recorded == {f"t{i}": "A" if i % 2 == 0 else "B" for i in range(6)}
    assert rows(tmp_path)["fuser"]["accuracy"] == 1.0


def test_an_unreachable_fuser_fails_the_run_and_records_nothing(data, tmp_path, capsys) -> None:
    """Issue 43: with the fuser's model unreachable, eval exited 0 with a 'fuser' row that was the
    majority fallback on every item, and saved the connection failures as answers, so a rerun
    reused them. A failed call is not an answer: nothing recorded, no row, exit 1."""
    from jf_test_support.ports import free_port

    votes = tmp_path / "fuser.jsonl"
    argv = [
        "eval", str(data), "--fuser", "openai/fuser-model", "--fuser-api-base", f"http://127.0.0.1:{free_port()}/v1",
        "--fuser-votes", str(votes), "--json", str(tmp_path / "report.json"), "--bootstrap", "20",
        "--methods", "majority", "fuser", "--quiet",
    ]  # fmt: skip
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"fuser: {N_ITEMS} calls failed" in err and "the next run asks again" in err
    assert not votes.exists() or read_votes(votes) == []
    names = set(rows(tmp_path))
    assert "majority" in names and "fuser" not in names  # the other rows are still reported

    # the model is back: the next run asks for every item, and the row is the fuser's own
    server = ThreadedStub()
    try:
        argv[argv.index("--fuser-api-base") + 1] = server.server.url
        assert main(argv) == 0
        assert server.calls == N_ITEMS
    finally:
        server.stop()
    assert len(read_votes(votes)) == N_ITEMS
    assert rows(tmp_path)["fuser"]["accuracy"] == pytest.approx((N_ITEMS - 1) / N_ITEMS)


def test_a_fuser_call_that_failed_is_not_recorded_but_an_unusable_reply_is(data, stub, tmp_path, capsys) -> None:
    """Only calls with no reply are asked again; a reply without a verdict is the model's answer."""
    answer = stub.server.handler

    def flaky(body: dict) -> S.Reply:
        if "question i3\n" in body["messages"][-1]["content"]:
            return S.Status(401, "no key")
        return answer(body)

    stub.server.handler = flaky
    assert run_eval(data, stub, tmp_path, "--quiet") == 1
    err = capsys.readouterr().err
    assert "fuser: 1 call failed" in err
    recorded = {judged.item.id for judged in read_votes(tmp_path / "fuser.jsonl")}
    assert "i3" not in recorded and UNUSABLE in recorded and len(recorded) == N_ITEMS - 1
    stub.server.handler = answer
    before = stub.calls
    assert run_eval(data, stub, tmp_path, "--quiet") == 0
    assert stub.calls == before + 1  # only the failed item is asked again
