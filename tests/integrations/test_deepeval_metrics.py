"""The DeepEval metrics with the real ``deepeval`` package, offline: an arena test case judged
by a gateway panel on loopback, and the reference metric run through ``deepeval.evaluate``."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest
from jf_test_support import openai_stub as stub_module
from jf_test_support.app_support import sc_text
from jf_test_support.live_gateway import API_KEY, live_gateway

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")  # no phoning home, before it is imported
# deepeval makes its folder (./.deepeval) when imported: keep it out of the working tree
os.environ.setdefault("DEEPEVAL_CACHE_FOLDER", tempfile.mkdtemp(prefix="deepeval-"))
pytest.importorskip("deepeval")

from deepeval import evaluate  # noqa: E402
from deepeval.evaluate.configs import AsyncConfig, DisplayConfig  # noqa: E402
from deepeval.test_case import ArenaTestCase, Contestant, LLMTestCase  # noqa: E402

from judgefuse.integrations.deepeval import (  # noqa: E402
    JudgefuseArenaMetric,
    JudgefuseReferenceMetric,
    compare,
)

pytestmark = pytest.mark.slow  # importing deepeval: ~10 s of CPU


def judges_prefer_paris(model: str, text: str) -> stub_module.Reply:
    """Every judge picks the answer position holding "Paris" (j3 is unsure: 60)."""
    answer_a = re.search(r"<output_a_\w+>(.*?)</output_a_", text, re.S)
    choice = "A" if answer_a is not None and "Paris" in answer_a.group(1) else "B"
    return stub_module.Reply(texts=sc_text(choice, 60 if model == "j3" else 90))


def case(output: str, expected: str | None = None) -> LLMTestCase:
    return LLMTestCase(input="What is the capital of France?", actual_output=output, expected_output=expected)


async def test_arena_cases_are_judged_pairwise(tmp_path: Path) -> None:
    with live_gateway(tmp_path) as live:
        live.script.by_question = judges_prefer_paris
        metric = JudgefuseArenaMetric(live.url, API_KEY)
        arena = ArenaTestCase(contestants=[Contestant(name="small-model", test_case=case("Lyon")),
                                           Contestant(name="big-model", test_case=case("Paris"))])
        winner = metric.measure(arena)
        assert winner == metric.winner == "big-model" and metric.is_successful()
        assert metric.verdict is not None and metric.verdict.choice == "B"
        assert metric.score == pytest.approx(metric.verdict.confidence)
        assert [v["choice"] for v in metric.metadata["votes"]] == ["B", "B", "B"]
        assert "big-model" in metric.reason
        swapped = ArenaTestCase(contestants=list(reversed(arena.contestants)))
        assert await metric.a_measure(swapped) == "big-model"
        assert compare([arena, swapped], metric) == {"big-model": 2}
        assert live.judge_calls() == 4 * 3
        with pytest.raises(ValueError, match="2 contestants"):
            metric.measure(ArenaTestCase(contestants=[arena.contestants[0]]))


def test_the_reference_metric_runs_in_deepeval_evaluate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # deepeval keeps its run files in ./.deepeval
    with live_gateway(tmp_path) as live:
        live.script.by_question = judges_prefer_paris
        metric = JudgefuseReferenceMetric(live.url, API_KEY, threshold=0.5)
        result = evaluate(
            test_cases=[case("Paris", expected="It is Lyon."), case("Marseille", expected="Paris")],
            metrics=[metric],
            async_config=AsyncConfig(run_async=False),
            display_config=DisplayConfig(print_results=False, show_indicator=False),
        )
        assert live.judge_calls() == 2 * 3
    by_output = {r.actual_output: r for r in result.test_results}
    good, bad = by_output["Paris"].metrics_data[0], by_output["Marseille"].metrics_data[0]
    assert good.name == "judgefuse (reference)" and good.success and good.score > 0.5
    assert not bad.success and bad.score < 0.5 and bad.error is None
    assert "reference" in bad.reason
