"""A litellm judge keeps voting after litellm was first imported inside an earlier test.

litellm's ``__init__`` installs warning filters for its own pydantic types (a TypedDict item
with the ``ReadOnly`` qualifier makes pydantic warn). pytest restores the filters after every
test, so on a worker where litellm is first imported inside a test those filters are gone for
every later test; under the suite's ``error`` filter a module litellm imports lazily on its
request path then fails to import on every call, and each litellm judge on that worker voted
"unclassified litellm error UserWarning" (a CI run: 10 tests on one worker). The suite's
``filterwarnings`` carries litellm's filters; this runs the two tests in that order in a fresh
pytest process under the project's own configuration."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FIRST = textwrap.dedent("""
    import sys

    def test_litellm_is_first_imported_inside_a_test():
        assert "litellm" not in sys.modules
        from judgefuse.judges.transport.litellm_client import import_litellm

        import_litellm()
""")

SECOND = textwrap.dedent("""
    import json

    from jf_test_support.openai_stub import Reply, StubServer

    from judgefuse.judges.config import JudgeConfig
    from judgefuse.judges.judge import Judge
    from judgefuse.judges.types import PairwiseItem

    REPLY = json.dumps({"selected_output": "Output (b)", "confidence_score": 70, "explanation": "5 is wrong"})

    async def test_a_later_litellm_judge_still_votes():
        server = await StubServer(default=Reply(texts=REPLY)).start()
        judge = Judge(JudgeConfig(name="j1", model="openai/stub", backend="litellm", api_base=server.url,
                                  mode="sc", timeout_s=60.0, retries={"attempts": 1}))
        try:
            votes = [await judge.vote(PairwiseItem(id=f"q{i}", question="2+2?", answer_a="5", answer_b="4"))
                     for i in range(2)]
        finally:
            await judge.aclose()
            await server.stop()
        assert [(v.choice, v.confidence, v.error) for v in votes] == [("B", 0.7, None)] * 2
        assert len(server.requests) == 2
""")


def test_a_litellm_judge_votes_after_litellm_was_imported_inside_an_earlier_test(tmp_path: Path) -> None:
    (tmp_path / "test_1_first_import.py").write_text(FIRST)
    (tmp_path / "test_2_later_call.py").write_text(SECOND)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-c",
            str(ROOT / "pyproject.toml"),
            "--rootdir",
            str(ROOT),
            str(tmp_path / "test_1_first_import.py"),
            str(tmp_path / "test_2_later_call.py"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout
