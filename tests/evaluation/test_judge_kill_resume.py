"""``judgefuse judge`` and ``judgefuse eval`` killed with SIGKILL (no cleanup runs) as real
processes: the judge run resumes without losing or duplicating an item, and a killed report
never leaves a partial JSON/HTML file at the target path.

The scripted OpenAI stub and the commands run as subprocesses; the process helpers are those of
``tests/service/system/test_crash.py`` (loaded by path).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

from jf_test_support import crash_harness as C

from judgefuse.evaluation.judge_command import plural
from judgefuse.evaluation.loaders import VotesWriter, read_votes
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem

N_ITEMS = 40


def _pairs(tmp: Path) -> Path:
    path = tmp / "pairs.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for i in range(N_ITEMS):
            handle.write(
                json.dumps(
                    {
                        "pair_id": f"p{i:02d}",
                        "source": "mmlu-pro-math",
                        "question": f"question {i}",
                        "response_A": f"answer a{i}",
                        "response_B": f"answer b{i}",
                        "label": "A>B" if i % 2 else "B>A",
                    }
                )
                + "\n"
            )
    return path


def _panel(tmp: Path, url: str) -> Path:
    path = tmp / "p.yaml"
    judges = "".join(
        textwrap.dedent(f"""\
        - name: {j}
          model: openai/{j}
          backend: direct
          api_base: {url}
          timeout_s: 10
          retries: {{attempts: 1, base_delay_s: 0, max_delay_s: 0}}
        """)
        for j in ("j1", "j2")
    )
    path.write_text("name: two\nfusion: majority\njudges:\n" + textwrap.indent(judges, "  "), encoding="utf-8")
    return path


def _whole_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "judgefuse.cli", *args]


async def test_judge_killed_mid_run_resumes_without_duplicates(tmp_path):
    stub, url = await C.start_stub(tmp_path, delay_s=0.1)
    pairs, out = _pairs(tmp_path), tmp_path / "votes.jsonl"
    with C.killing(stub) as procs:
        panel = _panel(tmp_path, url)
        argv = _cli("judge", str(pairs), "--out", str(out), "--panel", str(panel), "--concurrency", "4", "--quiet")
        run = C.Child(argv, tmp_path / "judge-1.log", env=C.child_env(), cwd=tmp_path)
        procs.append(run)
        deadline = time.monotonic() + 45
        while _whole_lines(out) < 6:
            assert run.alive(), f"judge finished before the kill\n{run.tail()}"
            assert time.monotonic() < deadline, f"no progress\n{run.tail()}"
            await asyncio.sleep(0.01)
        os.kill(run.pid, signal.SIGKILL)
        run.kill()
        assert run.proc.returncode == -signal.SIGKILL

        notes: list[str] = []
        survived = read_votes(out, notes=notes)  # parses: every whole line is a whole item
        done = len(survived)
        assert 6 <= done < N_ITEMS, done
        assert len({j.item.id for j in survived}) == done

        rerun = await asyncio.to_thread(
            subprocess.run,
            argv,
            env=C.child_env(),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=90,
        )
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert f"judged {plural(N_ITEMS - done, 'item')} ({done} already done, skipped)" in rerun.stdout, rerun.stdout
    lines = [line for line in out.read_text(encoding="utf-8").split("\n") if line.strip()]
    ids = Counter(json.loads(line)["item"]["id"] for line in lines)
    assert sorted(ids) == [f"p{i:02d}" for i in range(N_ITEMS)]
    assert set(ids.values()) == {1}, [k for k, v in ids.items() if v > 1]
    judged = read_votes(out)
    assert len(judged) == N_ITEMS
    assert all(len(j.votes) == 2 and all(v.valid for v in j.votes) for j in judged)
    print(
        f"judge SIGKILL after {done}/{N_ITEMS} items ({len(notes)} cut lines repaired); the rerun judged "
        f"{N_ITEMS - done}; {N_ITEMS} items, each exactly once"
    )


def _kill_on_temp_file(proc: subprocess.Popen[bytes], folder: Path, timeout: float) -> str | None:
    """SIGKILL ``proc`` as soon as a report's temporary file appears in ``folder``; the name
    seen, or None when the process finished first."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        for name in os.listdir(folder):
            if name.endswith(".tmp"):
                os.kill(proc.pid, signal.SIGKILL)
                return name
        time.sleep(0.0005)
    return None


def _complete_or_absent(path: Path) -> str:
    if not path.exists():
        return "absent"
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        json.loads(text)  # a cut JSON file would not parse
    else:
        assert text.rstrip().endswith("</html>"), text[-200:]
    return "complete"


def _write_votes(path: Path, n: int = 120) -> None:
    """A votes file of three judges (written directly: this test is about the report's write)."""
    with VotesWriter(path) as writer:
        for i in range(n):
            label = "A" if i % 2 else "B"
            votes = []
            for j in range(3):
                right = (i + j) % 4 != 0
                choice = label if right else ("B" if label == "A" else "A")
                confidence = 0.55 + ((i * 7 + j * 13) % 45) / 100
                p_a = confidence if choice == "A" else 1.0 - confidence
                votes.append(JudgeVote(judge=f"j{j}", mode="sc", choice=choice, confidence=confidence, p_a=p_a))
            item = PairwiseItem(
                id=f"p{i:03d}",
                question=f"q{i}",
                answer_a="a",
                answer_b="b",
                label=label,
                category=("math", "coding")[i % 2],
            )
            writer.write(JudgedItem(item=item, votes=votes))


def test_eval_killed_while_writing_reports_leaves_no_partial_file(tmp_path):
    votes = tmp_path / "votes.jsonl"
    _write_votes(votes)
    reports = tmp_path / "reports"
    reports.mkdir()
    json_out, html_out = reports / "r.json", reports / "r.html"
    argv = _cli(
        "eval",
        str(votes),
        "--json",
        str(json_out),
        "--html",
        str(html_out),
        "--quiet",
        "--bootstrap",
        "50",
        "--folds",
        "2",
    )
    log = (tmp_path / "eval.log").open("wb")
    try:
        proc = subprocess.Popen(argv, env=C.child_env(), cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
        try:
            seen = _kill_on_temp_file(proc, reports, 60.0)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=15)
    finally:
        log.close()
    output = (tmp_path / "eval.log").read_text(encoding="utf-8", errors="replace")
    if seen is None:
        assert proc.returncode == 0, output  # finished before a temp file was seen: both reports whole
    states = {p.name: _complete_or_absent(p) for p in (json_out, html_out)}
    leftovers = sorted(p.name for p in reports.iterdir() if p.name.endswith(".tmp"))
    print(
        f"eval SIGKILL {'on seeing ' + seen if seen else 'not landed (finished first)'}: reports {states}, "
        f"temporary files left {leftovers}"
    )
    assert all(name.startswith((".r.json.", ".r.html.")) for name in leftovers)
