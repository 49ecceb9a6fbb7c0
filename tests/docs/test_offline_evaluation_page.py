"""docs/offline-evaluation.md runs as written (issue 47, item 5): every ``judgefuse ...`` line of
the page's ``sh`` blocks, read from the Markdown (a line that does not start with ``judgefuse``
continues the one above; a ``# ...`` comment is dropped), is run from the repository root and
must exit 0 and print what the page's text around it claims.

* The page's first block is a synopsis (``PATH...``, ``[--flag ...]``): each of its lines is
  checked against the command's ``--help``, every ``--flag`` and every ``a|b`` alternative it
  names being there.
* The other commands run as written, with one substitution (``SHARED``): the page reads the
  shared data at ``../shared/data`` from the repository root (its "Data" section), and the test
  gives those arguments the ``shared_data`` fixture's folder instead (the same folder unless
  ``JUDGEFUSE_SHARED_DATA`` moves it). ``COLUMNS`` is set wide so the tables print unshortened
  names.
* A command that needs the network, a key or the reader's own server is in ``SKIPPED`` with the
  reason. A command the page gains that is neither checked nor skipped fails the test.

What a run must print is read from the page, next to its command: the numbers of the
Trust-or-Escalate and JudgeBench ``compare`` examples, the JudgeBench pool table, and the fusion
methods ``eval`` scores."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from jf_test_support.markdown import fenced

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "offline-evaluation.md"
SHARED = "../shared/data/"  # how the page names the shared data, from the repository root
SYNOPSIS_HEADING = "Offline evaluation"  # the page's first block: usage lines, not commands

SKIPPED = {
    "judgefuse eval DATA --fuser openai/gpt-4o-mini --methods majority stacked fuser": "calls OpenAI (the network and OPENAI_API_KEY); DATA stands for the reader's file",
    "judgefuse eval DATA --fuser my-model --fuser-api-base http://127.0.0.1:8080/v1 --limit 50": "needs the reader's own OpenAI-compatible server serving my-model on 127.0.0.1:8080; DATA "
    "stands for the reader's file",
}


def page_commands() -> list[tuple[str, str]]:
    """``(heading, command line)`` of every ``judgefuse`` line in the page's ``sh`` blocks."""
    found: list[tuple[str, str]] = []
    for heading, language, code in fenced(PAGE):
        if language != "sh":
            continue
        for raw in code.splitlines():
            line = raw.split(" #")[0].strip()
            if line.startswith("judgefuse "):
                found.append((heading, line))
            elif line:
                assert found and found[-1][0] == heading, f"{line!r} continues no judgefuse line"
                found[-1] = (heading, f"{found[-1][1]} {line}")
    return found


def prose_after(command: str) -> str:
    """The page's text from ``command``'s block to the next ``sh`` block or heading."""
    text = PAGE.read_text(encoding="utf-8")
    after = text[text.index(command) + len(command) :]
    after = after[after.index("```") + 3 :]
    end = re.search(r"^```sh$|^#", after, flags=re.M)
    return after[: end.start() if end else len(after)]


def run(argv: list[str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    program = Path(sys.executable).with_name(argv[0])  # the environment the page activates
    return subprocess.run(
        [str(program), *argv[1:]], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def rows(output: str, first_cell: str) -> list[list[str]]:
    """The cells of the output's table rows (``│``-separated) whose first cell is ``first_cell``
    (``""`` for any)."""
    found = []
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.split("│")]
        if len(cells) > 1 and (not first_cell or cells[0] == first_cell):
            found.append(cells)
    return found


def view_row(output: str, metric: str, view: str) -> list[str]:
    """``[n, judge 1, judge 2, difference, order]`` of ``compare``'s row for a metric and view."""
    [row] = [cells[2:] for cells in rows(output, metric) if cells[1] == view]
    return row


NUMBER = r"[-+]?\d+(?:\.\d+)?"
INTERVAL = rf"{NUMBER} \[{NUMBER}, {NUMBER}\]"


def check_toe_compare(command: str, output: str) -> None:
    claim = re.search(
        rf"the only flip is (\w+), ({NUMBER}) against ({NUMBER}) \(raw difference\s+"
        rf"({INTERVAL})\):\s+reported as no reversal",
        " ".join(prose_after(command).split()),
    )
    assert claim, "the page's claim under the Trust-or-Escalate command was not found"
    metric, first, second, difference = claim.groups()
    assert view_row(output, metric, "raw")[1:4] == [first, second, difference]
    flips = [cells for cells in rows(output, "") if cells[-1].endswith("flips")]
    assert flips and {cells[0] for cells in flips} == {metric}, "the only flip is the page's metric"
    assert "ranking reversal: no" in output


def check_judgebench_compare(command: str, output: str) -> None:
    prose = " ".join(prose_after(command).split())
    claim = re.search(
        rf"all (\w+) judges voted on all (\d+) items.*?ECE ({NUMBER})% against "
        rf"({NUMBER})%, a difference of ({INTERVAL})",
        prose,
    )
    assert claim, "the page's claim under the JudgeBench command was not found"
    judges, items, first, second, difference = claim.groups()
    words = {"ten": "10"}
    assert f"{items} labelled items all {words.get(judges, judges)} judges voted on" in output
    assert "candidate-aligned rows equal the raw ones" in prose
    for metric in ("ECE %", "Brier"):
        raw = view_row(output, metric, "raw")
        assert view_row(output, metric, "candidate-aligned") == [str(int(raw[0]) * 2), *raw[1:]]
    assert view_row(output, "ECE %", "raw")[1:4] == [first, second, difference]
    table = re.findall(r"\| ([^|]+?) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", prose)
    assert len(table) >= 5, "the page's pool table was not found"
    pool = {cells[0]: [cells[2], cells[4], cells[5]] for cells in rows(output, "") if len(cells) == 6}
    for judge, accuracy, ca_ece, ca_brier in table:
        assert pool.get(judge) == [accuracy, ca_ece, ca_brier], judge
    assert "the judges' tie votes make the table appear" in " ".join(PAGE.read_text(encoding="utf-8").split())
    assert re.search(r"^ties\b", output, flags=re.M), "the ties table"


def check_eval(command: str, output: str) -> None:
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    listed = re.search(r"Scores every judge and every fusion method \((.*?)\)", text)
    assert listed, "the page's list of eval's fusion methods was not found"
    methods = re.findall(r"`(\w+)`", listed.group(1))
    assert len(methods) >= 7
    named = {cells[0] for cells in rows(output, "")}
    assert set(methods) <= named, f"rows missing: {set(methods) - named}"


CHECKS: dict[str, Callable[[str, str], None]] = {
    "judgefuse compare ../shared/data/trust_or_escalate/ --judges gpt-4-turbo gpt-3.5-turbo": check_toe_compare,
    "judgefuse compare ../shared/data/judgebench/ --judges reward_model:internlm2-20b-reward "
    "reward_model:internlm2-7b-reward": check_judgebench_compare,
    "judgefuse eval benchmarks/results/local_panel_llmbar_natural100.jsonl": check_eval,
}


def short(line: str) -> str:
    return " ".join(line.split()[1:4])


COMMANDS = page_commands()
RUN = [(heading, line) for heading, line in COMMANDS if heading != SYNOPSIS_HEADING]


def test_every_command_on_the_page_is_checked_or_skipped_with_a_reason() -> None:
    synopsis = [line for heading, line in COMMANDS if heading == SYNOPSIS_HEADING]
    assert len(synopsis) >= 7, "the page's synopsis block was not found"
    assert {line for _heading, line in RUN} == set(CHECKS) | set(SKIPPED)


@pytest.mark.parametrize("line", [line for heading, line in COMMANDS if heading == SYNOPSIS_HEADING], ids=short)
def test_the_synopsis_names_what_the_command_takes(line: str) -> None:
    argv = shlex.split(line.replace("(", " ").replace(")", " "))
    done = run([argv[0], argv[1], "--help"], timeout=120)
    assert done.returncode == 0, done.stderr
    helped = set(re.findall(r"[\w-]+", done.stdout))
    for token in argv[2:]:
        token = token.strip("[]")
        names = [token] if token.startswith("--") else token.split("|") if "|" in token else []
        for name in names:
            if name:
                assert name in helped, f"{line}: {name} is not in {argv[1]} --help"


@pytest.mark.parametrize("line", [line for _heading, line in RUN], ids=short)
def test_the_command_runs_as_the_page_says(line: str, shared_data: Path) -> None:
    if line in SKIPPED:
        pytest.skip(SKIPPED[line])
    argv = [str(shared_data) + "/" + arg[len(SHARED) :] if arg.startswith(SHARED) else arg for arg in shlex.split(line)]
    done = run(argv)
    assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    CHECKS[line](line, done.stdout)
