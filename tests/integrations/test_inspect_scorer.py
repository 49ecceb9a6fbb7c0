"""A real Inspect AI eval, in process: its ``mockllm`` model is the solver (scripted outputs,
with usage so it needs no tokenizer download), a judgefuse gateway on loopback grades through
``judgefuse_scorer``; the eval log Inspect writes carries the judgefuse scores."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from jf_test_support import openai_stub as stub_module
from jf_test_support.app_support import sc_text
from jf_test_support.live_gateway import API_KEY, live_gateway

pytest.importorskip("inspect_ai")
pytestmark = [
    # Inspect's own: it calls tenacity with a deprecated argument; not judgefuse's
    pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning"),
    pytest.mark.slow,  # importing inspect_ai and running its eval loop: ~15 s of CPU
]

from inspect_ai import Task, eval  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.model import ModelOutput, ModelUsage, get_model  # noqa: E402
from inspect_ai.solver import generate  # noqa: E402

from judgefuse.integrations.inspect import judgefuse_scorer  # noqa: E402

OUTPUTS = {"What is 1 + 1?": "2", "What is 2 + 2?": "five", "What is 3 + 3?": "6"}


@pytest.fixture(autouse=True)
def close_inspects_event_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inspect opens a memory stream per sample for its hooks' events and, draining it
    (``inspect_ai.hooks._hooks.drain_sample_events``), drops the receiving end without closing
    it. anyio warns (``ResourceWarning: Unclosed <MemoryObjectReceiveStream>``) when the
    collector frees it, which on a busy machine was inside whichever test ran next (the
    promptfoo one failed on it). The drain is wrapped to close that end once it has drained;
    this test's own filter no longer ignores unraisable warnings, so a stream left open again
    fails here, not elsewhere."""
    from inspect_ai.hooks import _hooks
    from inspect_ai.log._samples import sample_active

    drain = _hooks.drain_sample_events

    async def drain_and_close() -> None:
        active = sample_active()
        receive = None if active is None else active.event_receive
        try:
            await drain()
        finally:
            if receive is not None:
                receive.close()

    monkeypatch.setattr(_hooks, "drain_sample_events", drain_and_close)


def judges_prefer_the_right_sum(model: str, text: str) -> stub_module.Reply | None:
    """j1 and j2 prefer answer B (the target) when the output is "five"; j3 always prefers A."""
    wrong = "five" in text
    choice = "B" if wrong and model in ("j1", "j2") else "A"
    return stub_module.Reply(texts=sc_text(choice, 90))


def test_an_inspect_eval_is_graded_by_a_judgefuse_panel(tmp_path: Path) -> None:
    samples = [Sample(input=q, target=str(2 * i), id=f"s{i}") for i, q in enumerate(OUTPUTS, 1)]
    usage = ModelUsage(input_tokens=10, output_tokens=1, total_tokens=11)
    solver_model = get_model("mockllm/model", custom_outputs=[
        ModelOutput.from_content(model="mockllm", content=answer).model_copy(update={"usage": usage})
        for answer in OUTPUTS.values()])
    with live_gateway(tmp_path / "gateway") as live:
        live.script.by_question = judges_prefer_the_right_sum
        task = Task(dataset=samples, solver=generate(), scorer=judgefuse_scorer(live.url, API_KEY))
        [log] = eval(task, model=solver_model, log_dir=str(tmp_path / "logs"), display="none",
                     max_samples=1)
        assert log.status == "success", log.error
        assert live.judge_calls() == 3 * 3
    stored = read_eval_log(log.location)  # what Inspect wrote is what its viewer reads
    assert stored.samples is not None and len(stored.samples) == 3
    scores = {s.id: s.scores["judgefuse"] for s in stored.samples if s.scores}
    for score in scores.values():
        meta = score.metadata
        assert meta is not None and len(meta["verdict_id"]) == 32
        assert [v["judge"] for v in meta["votes"]] == ["j1", "j2", "j3"]
        assert meta["route"] in ("auto_accept", "human_review") and 0.5 <= meta["confidence"] <= 1
        assert score.value == pytest.approx(meta["p_a"])  # P(the output is the better answer)
    assert scores["s2"].answer == "five" and scores["s2"].metadata["choice"] == "B"
    assert [v["choice"] for v in scores["s2"].metadata["votes"]] == ["B", "B", "A"]
    assert scores["s1"].metadata["choice"] == scores["s3"].metadata["choice"] == "A"
    assert scores["s2"].value < 0.5 < scores["s1"].value
    mean = stored.results.scores[0].metrics["mean"].value
    assert mean == pytest.approx(sum(s.value for s in scores.values()) / 3)
    # whatever Inspect left is collected here, under the suite's filter (error): an unclosed
    # stream among it fails this test, not whichever ran next
    del log, stored, task
    gc.collect()
