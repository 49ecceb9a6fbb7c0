"""The promptfoo grader: run by the real promptfoo CLI (``promptfoo eval``, its ``echo``
provider as the model under test, offline) when scripts/install-test-deps installed it, and
always against the call contract promptfoo documents for Python assertions
(``get_assert(output, context)`` with ``vars``, ``prompt`` and the assertion's ``config``;
a GradingResult dict back)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from jf_test_support import openai_stub as stub_module
from jf_test_support.app_support import sc_text
from jf_test_support.live_gateway import API_KEY, live_gateway

from judgefuse.integrations.promptfoo import get_assert

ROOT = Path(__file__).resolve().parents[2]
PROMPTFOO = os.environ.get("JUDGEFUSE_PROMPTFOO") or str(ROOT / ".tools/promptfoo/node_modules/.bin/promptfoo")

CONFIG = """
prompts:
  - "{{answer}}"
providers:
  - echo
defaultTest:
  assert:
    - type: python
      value: file://judgefuse_grader.py
      config:
        reference_var: reference
        threshold: 0.5
tests:
  - vars: {question: "What is 2 + 2?", answer: "4", reference: "5"}
  - vars: {question: "What is 3 + 3?", answer: "7", reference: "6"}
"""


def judges_know_arithmetic(model: str, text: str) -> stub_module.Reply:
    """j1 and j2 prefer the reference (B) when the output is "7"; j3 always prefers A."""
    wrong = "3 + 3" in text
    return stub_module.Reply(texts=sc_text("B" if wrong and model in ("j1", "j2") else "A", 90))


@pytest.mark.slow  # promptfoo starts a fresh Python for each assertion: ~20 s on 2 cores
def test_the_promptfoo_cli_grades_through_judgefuse(tmp_path: Path) -> None:
    if not Path(PROMPTFOO).exists():
        pytest.skip(f"promptfoo CLI not installed at {PROMPTFOO} (bash scripts/install-test-deps)")
    work = tmp_path / "work"
    work.mkdir()
    (work / "promptfooconfig.yaml").write_text(CONFIG)
    shutil.copy(ROOT / "examples/promptfoo/judgefuse_grader.py", work / "judgefuse_grader.py")
    with live_gateway(tmp_path / "gateway") as live:
        live.script.by_question = judges_know_arithmetic
        env = {**os.environ, "PROMPTFOO_PYTHON": sys.executable, "JUDGEFUSE_URL": live.url,
               "JUDGEFUSE_API_KEY": API_KEY, "PROMPTFOO_DISABLE_TELEMETRY": "1",
               "PROMPTFOO_DISABLE_UPDATE": "1", "PROMPTFOO_DISABLE_SHARING": "1",
               "HOME": str(tmp_path), "PROMPTFOO_CONFIG_DIR": str(tmp_path / ".promptfoo")}
        done = subprocess.run(
            [PROMPTFOO, "eval", "-c", "promptfooconfig.yaml", "-o", "out.json", "--no-cache",
             "--no-progress-bar"], cwd=work, env=env, capture_output=True, text=True, timeout=240)
        assert live.judge_calls() == 2 * 3
    assert (work / "out.json").exists(), done.stdout[-2000:] + done.stderr[-2000:]
    results = {r["vars"]["answer"]: r for r in json.loads((work / "out.json").read_text())["results"]["results"]}
    right, wrong = results["4"]["gradingResult"], results["7"]["gradingResult"]
    assert right["pass"] is True and wrong["pass"] is False
    [graded] = wrong["componentResults"]
    verdict = graded["metadata"]["judgefuse"]
    assert verdict["choice"] == "B" and [v["choice"] for v in verdict["votes"]] == ["B", "B", "A"]
    assert graded["score"] == pytest.approx(verdict["p_a"]) and graded["score"] < 0.5  # P(output better)
    assert "j1: reference" in graded["reason"]
    assert done.returncode != 0  # promptfoo exits non-zero when an assertion fails


def test_the_documented_call_contract(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with live_gateway(tmp_path) as live:
        live.script.by_question = judges_know_arithmetic
        monkeypatch.setenv("JF_KEY", API_KEY)
        context = {"prompt": "What is 3 + 3?", "vars": {"expected": "6"},
                   "config": {"base_url": live.url, "api_key_env": "JF_KEY", "reference_var": "expected",
                              "threshold": 0.3}}
        result = get_assert("7", context)
        with pytest.raises(ValueError, match="reference_var"):
            get_assert("7", {**context, "config": {**context["config"], "reference_var": "missing"}})
    assert set(result) >= {"pass", "score", "reason"}
    assert result["metadata"]["judgefuse"]["choice"] == "B"
    assert result["score"] == pytest.approx(result["namedScores"]["judgefuse_p_output"])
    assert result["score"] < 0.5
    assert result["pass"] is (result["score"] >= 0.3)
    json.dumps(result)  # promptfoo reads it as JSON
