"""Documentation numbers and examples checked against what the code gives.

They moved from the README to the documentation pages (docs/); each check reads its page:

* docs/results.md: the live local-panel table is what the committed votes files give: every
  row of the section "A local panel, live" is recomputed by benchmarks/local_panel_table.py from
  benchmarks/results/ and compared cell by cell.
* docs/offline-evaluation.md: the votes-file and pairs-file example lines (the ```jsonl blocks)
  load through the loaders `judgefuse eval` and `judgefuse judge` use, and `judgefuse eval`
  scores the votes example.
* docs/panels.md: the cascade example's numbers are what the `judgefuse tune --cascade` command
  printed beside them gives (and with `--delta-split per_stage` added, for the sentence that
  names it).
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from local_panel_table import table  # noqa: E402

from judgefuse.cli import main  # noqa: E402
from judgefuse.evaluation.judge_command import read_pairs  # noqa: E402
from judgefuse.evaluation.loaders.votes import read_votes  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs"
RESULTS_PAGE = DOCS / "results.md"  # the live local-panel table
FORMATS_PAGE = DOCS / "offline-evaluation.md"  # the votes and pairs JSONL examples
CASCADE_PAGE = DOCS / "panels.md"  # the cascade example and its command
JUDGES = {"qwen-logprob-plain", "qwen-sc-plain", "smollm2-logprob-delimited"}


def rows(markdown: str) -> dict[str, list[str]]:
    """First word of each table row's name -> its cells after the name (first occurrence wins)."""
    out: dict[str, list[str]] = {}
    for line in markdown.splitlines():
        if not line.startswith("| ") or line.startswith("| judge or method") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        name = cells[0].split()[0]
        key = f"{name} 50" if re.search(r"\b(first|same) 50\b", cells[0]) else name
        out.setdefault(key, cells[1:])
    return out


def page_text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def test_results_page_table_is_recomputed_from_the_committed_votes() -> None:
    results = page_text(RESULTS_PAGE)
    section = results[results.index("### A local panel, live"):]
    section = section[: section.index("\n## ")]
    printed = rows(section)
    computed = rows(table(read_votes(RESULTS / "local_panel_llmbar_natural100.jsonl"), JUDGES,
                          read_votes(RESULTS / "local_fuser_llmbar_natural50.jsonl"), []))
    assert len(printed) >= 12
    for name, cells in printed.items():
        assert computed[name] == cells, name


def fenced_lines(markdown: str, info: str) -> list[str]:
    """The non-empty lines of every fenced block opened with ```info."""
    return [
        line
        for block in re.findall(rf"^```{re.escape(info)}\n(.*?)^```$", markdown, flags=re.M | re.S)
        for line in block.splitlines()
        if line.strip()
    ]


def test_docs_votes_and_pairs_examples_load_through_the_real_loaders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = fenced_lines(page_text(FORMATS_PAGE), "jsonl")
    votes_lines = [line for line in lines if "item" in json.loads(line)]
    pairs_lines = [line for line in lines if "item" not in json.loads(line)]
    assert len(votes_lines) == 1 and len(pairs_lines) == 1, lines

    votes_file = tmp_path / "votes.jsonl"
    votes_file.write_text(votes_lines[0] + "\n", encoding="utf-8")
    (judged,) = read_votes(votes_file)
    assert judged.item.label == "A"
    assert [vote.valid for vote in judged.votes] == [True, True, False]
    assert main(["eval", str(votes_file), "--quiet", "--bootstrap", "50"]) == 0
    assert "1 items, 1 labelled" in capsys.readouterr().out

    pairs_file = tmp_path / "pairs.jsonl"
    pairs_file.write_text(pairs_lines[0] + "\n", encoding="utf-8")
    (item,) = read_pairs(pairs_file)  # what `judgefuse judge pairs.jsonl` reads its input with
    assert item.id == judged.item.id and item.label == "A"
    assert (item.question, item.answer_a, item.answer_b) == (
        judged.item.question, judged.item.answer_a, judged.item.answer_b
    )


def _cascade(argv: list[str], out: Path) -> dict:
    assert main([*argv, "--json", str(out)]) == 0
    return json.loads(out.read_text(encoding="utf-8"))


def _accepts(report: dict) -> str:
    first = report["stages"][0]["report"]
    run = report["calibration"]
    return (
        f"accepts {100 * run['coverage']:.1f}% ({first['n_accepted']} of {run['n']}) at "
        f"{100 * first['precision']:.1f}% precision (lower bound {100 * first['lower_bound']:.1f}%)"
    )


def test_docs_cascade_numbers_come_from_the_command_it_prints(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = " ".join(page_text(CASCADE_PAGE).split())  # markdown reflows: compare with whitespace collapsed
    bullet = text[text.index("* **Cascades**"):]
    bullet = bullet[: bullet.index(" * ", 1)]
    (command,) = re.findall(r"`(judgefuse tune \.\./shared/data/trust_or_escalate --cascade [^`]+)`", bullet)
    argv = [arg.replace("../shared/data", str(shared_data)) for arg in shlex.split(command)[1:]]
    assert "--delta-split" not in argv  # the printed command runs the default split

    default = _cascade(argv, tmp_path / "bonferroni.json")
    assert default["delta_split"] == "bonferroni"
    assert [stage["n_accepted"] for stage in default["stages"]][1:] == [0, 0]
    escalated = default["stages"][1]["n_reached"]
    assert f"{_accepts(default)}, the other two stages accept none of the {escalated} it escalates" in bullet
    assert f"{default['calibration']['calls_per_item']:.2f} calls per item instead of 3" in bullet

    per_stage = _cascade([*argv, "--delta-split", "per_stage"], tmp_path / "per_stage.json")
    assert per_stage["delta_split"] == "per_stage"
    sentence = bullet[bullet.index("With `--delta-split per_stage` added"):]
    assert _accepts(per_stage).replace("accepts", "it accepts") in sentence
    assert f"{per_stage['calibration']['calls_per_item']:.2f} calls per item" in sentence
    capsys.readouterr()


def test_readme_links_point_at_files_in_the_repository() -> None:
    """The README is a short entry point into docs/: every relative link it makes must resolve
    (the site build checks links between pages, not the README's)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [t for t in targets if "://" not in t]
    assert any(t.startswith("docs/") for t in local), local
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, missing
