"""The examples of the Python pages run as written: each page's ```python blocks, in order, in
one fresh interpreter, against a live gateway on loopback (``JUDGEFUSE_URL``,
``JUDGEFUSE_API_KEY``); the promptfoo page's config through the real promptfoo CLI."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from jf_test_support.live_gateway import API_KEY, LiveGateway, live_gateway

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PROMPTFOO = os.environ.get("JUDGEFUSE_PROMPTFOO") or str(ROOT / ".tools/promptfoo/node_modules/.bin/promptfoo")


def blocks(page: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", (DOCS / page).read_text(), re.S | re.M)


def run_page(page: str, live: LiveGateway, workdir: Path, timeout: float = 240) -> str:
    code = "\n".join(blocks(page, "python"))
    env = {**os.environ, "JUDGEFUSE_URL": live.url, "JUDGEFUSE_API_KEY": API_KEY,
           "DEEPEVAL_TELEMETRY_OPT_OUT": "YES", "DEEPEVAL_CACHE_FOLDER": str(workdir / ".deepeval"),
           "HOME": str(workdir)}
    done = subprocess.run([sys.executable, "-c", code], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"{page}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_the_python_client_page_runs(tmp_path: Path) -> None:
    with live_gateway(tmp_path / "gateway") as live:
        out = run_page("python-client.md", live, tmp_path)
        calls = live.judge_calls()
    lines = out.splitlines()
    assert lines[0].split()[1:] == ["A", "1.0", "human_review"]  # id, choice, confidence, route
    assert "labelled" in lines and "('body.panel'" in out and "404" in out
    assert "100 0 300" in lines  # the batch: 100 verdicts, 3 judge calls each
    assert sum(1 for line in lines if re.fullmatch(r"\d+ [AB] [\d.]+", line)) == 20  # judge_pairs
    assert (tmp_path / "run.jsonl").read_text().count("\n") == 20
    assert calls >= 3 * (1 + 1 + 100 + 20 + 5 + 1)


@pytest.mark.slow  # importing inspect_ai
def test_the_inspect_page_runs(tmp_path: Path) -> None:
    pytest.importorskip("inspect_ai")
    with live_gateway(tmp_path / "gateway") as live:
        out = run_page("integrations/inspect.md", live, tmp_path)
        assert live.judge_calls() == 2 * 3
    assert out.splitlines()[0].startswith("success ")
    assert len([line for line in out.splitlines() if line.startswith(("1 ", "2 "))]) == 2


@pytest.mark.slow  # importing deepeval
def test_the_deepeval_page_runs(tmp_path: Path) -> None:
    if importlib.util.find_spec("deepeval") is None:  # not imported here: it makes ./.deepeval
        pytest.skip("deepeval not installed")
    with live_gateway(tmp_path / "gateway") as live:
        out = run_page("integrations/deepeval.md", live, tmp_path)
        assert live.judge_calls() == 3 * 3
    lines = out.splitlines()
    assert lines[0].split()[0] == "model-small"  # the stub judges always answer A
    assert lines[-1].startswith("judgefuse (reference) ")


@pytest.mark.slow  # promptfoo starts a fresh Python for each assertion
def test_the_promptfoo_page_config_runs_in_the_cli(tmp_path: Path) -> None:
    if not Path(PROMPTFOO).exists():
        pytest.skip(f"promptfoo CLI not installed at {PROMPTFOO} (bash scripts/install-test-deps)")
    [grader] = blocks("integrations/promptfoo.md", "python")
    [config] = blocks("integrations/promptfoo.md", "yaml")
    (tmp_path / "judgefuse_grader.py").write_text(grader)
    (tmp_path / "promptfooconfig.yaml").write_text(config)
    with live_gateway(tmp_path / "gateway") as live:
        env = {**os.environ, "PROMPTFOO_PYTHON": sys.executable, "JUDGEFUSE_URL": live.url,
               "JUDGEFUSE_API_KEY": API_KEY, "PROMPTFOO_DISABLE_TELEMETRY": "1",
               "PROMPTFOO_DISABLE_UPDATE": "1", "PROMPTFOO_DISABLE_SHARING": "1", "HOME": str(tmp_path)}
        subprocess.run([PROMPTFOO, "eval", "-c", "promptfooconfig.yaml", "--providers", "echo", "-o", "out.json",
                        "--no-cache", "--no-progress-bar"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=240)
        assert live.judge_calls() == 2 * 3
    results = json.loads((tmp_path / "out.json").read_text())["results"]["results"]
    assert len(results) == 2
    for result in results:
        [graded] = result["gradingResult"]["componentResults"]
        assert len(graded["metadata"]["judgefuse"]["verdict_id"]) == 32


def test_the_promptfoo_page_shows_the_example_grader_file() -> None:
    [grader] = blocks("integrations/promptfoo.md", "python")
    assert grader.strip() in (ROOT / "examples/promptfoo/judgefuse_grader.py").read_text()


def test_the_readme_python_example_runs(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    [code] = [b for b in re.findall(r"^```python\n(.*?)^```", readme, re.S | re.M) if "judgefuse.client" in b]
    with live_gateway(tmp_path / "gateway") as live:
        code = code.replace('"http://localhost:8000"', repr(live.url)).replace("api_key=None", f"api_key={API_KEY!r}")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "A 1.0 human_review" and any(line.startswith("method:majority:fused 1 ") for line in lines)
