"""``compare`` over arrays (judgefuse.evaluation.table_compare, issue 46) against ``compare_report``
over judged items, the reference: the JSON reports are the same text, so every number (views,
intervals, common pool, self-preference, ties) is equal to the bit. On every shared data set, on
the synthetic benchmark file (invalid votes, tie votes, tie labels), on a file whose items name
their answers' models (self-preference), with the intervals of a large comparison drawn over
cells on both paths (``LARGE_CELLS`` lowered so a small file takes that branch), and through the
command line. How far cells are from the item-level intervals: tests/calibration/test_paired_cells.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from judgefuse.calibration import comparison as calibration_comparison
from judgefuse.cli import main
from judgefuse.evaluation import candidate_aligned
from judgefuse.evaluation.compare_outputs import compare_json
from judgefuse.evaluation.comparison import CompareError, compare_report
from judgefuse.evaluation.loaders import load
from judgefuse.evaluation.loaders.votes_columnar import load_table
from judgefuse.evaluation.table_compare import ANSWER_MODEL_FIELDS, compare_table
from judgefuse.evaluation.vote_table import VoteTable

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_eval_scale  # noqa: E402


def assert_same_report(paths: list[Path], judge_1: str, judge_2: str, **options: Any) -> dict[str, Any]:
    """The columnar report's JSON is the per-item report's, character for character."""
    sources = [str(path) for path in paths]
    want = compare_json(compare_report(load(paths), judge_1, judge_2, **options), sources=sources)
    table = load_table(paths, metadata=ANSWER_MODEL_FIELDS)
    got = compare_json(compare_table(table, judge_1, judge_2, **options), sources=sources)
    assert got == want
    report: dict[str, Any] = json.loads(got)
    return report


@pytest.mark.parametrize(
    ("dataset", "judges"),
    [
        ("judgebench", ("reward_model:internlm2-20b-reward", "reward_model:internlm2-7b-reward")),
        ("llmbar", ("ChatGPT-0301/CoT", "ChatGPT-0301/Swap")),
        ("trust_or_escalate", ("gpt-4-turbo", "gpt-3.5-turbo")),
    ],
)
def test_shared_data(shared_data: Path, dataset: str, judges: tuple[str, str]) -> None:
    report = assert_same_report([shared_data / dataset], *judges, n_resamples=200, seed=3)
    assert report["common_pool"]["n"] > 0


def test_synthetic_file(tmp_path: Path) -> None:
    path = tmp_path / "votes.jsonl"
    bench_eval_scale.write(path, 3000, seed=7)
    report = assert_same_report([path], "judge-2", "judge-5", n_resamples=300, seed=1)
    assert any(t["n_tie_labels"] and t["n_tie_answers"] for t in report["ties"])


MODELS = ("gpt-4o", "claude-3-opus", "llama-3-70b", "my-own-model", None)
"""Answer models: three families named by the judges, one family nobody knows, and none."""


def named_models(n: int, seed: int) -> list[str]:
    """The synthetic file with judges of three families and items naming their answers' models
    (``model_a``/``model_b`` or ``response_model_a``/``response_model_b``, some neither)."""
    rename = {"judge-1": "openai/gpt-4o-mini", "judge-2": "claude-3-haiku", "judge-3": "llama-3-8b-judge"}
    lines = []
    for i, line in enumerate(bench_eval_scale.synthetic_lines(n, seed=seed)):
        record = json.loads(line)
        for vote in record["votes"]:
            vote["judge"] = rename.get(vote["judge"], vote["judge"])
        model_a, model_b = MODELS[i % 5], MODELS[(i // 5 + i) % 4]
        keys = ("model_a", "model_b") if i % 3 else ("response_model_a", "response_model_b")
        metadata: dict[str, Any] = {keys[0]: model_a, keys[1]: model_b}
        if i % 7 == 0:  # the first pair names one model only: the second pair decides
            metadata = {"model_a": model_a, "response_model_a": "gpt-4", "response_model_b": "claude-2"}
        elif i % 13 == 0:  # both pairs name two models: the first pair decides
            metadata = {
                "model_a": "gpt-4",
                "model_b": "llama-2",
                "response_model_a": "claude-2",
                "response_model_b": "gpt-4",
            }
        record["item"]["metadata"] = metadata
        if i % 17 == 0:  # unlabelled items count in the judges' order only
            record["item"].pop("label")
        if i % 11 == 0:  # a judge that did not vote on every item
            record["votes"] = [vote for vote in record["votes"] if vote["judge"] != "claude-3-haiku"]
        lines.append(json.dumps(record))
    return lines


def test_self_preference(tmp_path: Path) -> None:
    path = tmp_path / "votes.jsonl"
    path.write_text("\n".join(named_models(2000, seed=5)) + "\n")
    report = assert_same_report([path], "openai/gpt-4o-mini", "claude-3-haiku", n_resamples=200, seed=2)
    assert {row["family"] for row in report["self_preference"]} == {"openai", "anthropic", "meta"}
    assert report["common_pool"]["n"] < 2000  # the judge that skipped items narrows the pool


def test_large_comparisons_are_drawn_over_cells_on_both_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "votes.jsonl"
    path.write_text("\n".join(named_models(3000, seed=8)) + "\n")
    small = assert_same_report([path], "openai/gpt-4o-mini", "llama-3-8b-judge", n_resamples=100, seed=4)
    monkeypatch.setattr(calibration_comparison, "LARGE_CELLS", 10_000)
    monkeypatch.setattr(candidate_aligned, "LARGE_CELLS", 10_000)
    large = assert_same_report([path], "openai/gpt-4o-mini", "llama-3-8b-judge", n_resamples=100, seed=4)
    assert [v["ci95"] for v in large["views"]] != [v["ci95"] for v in small["views"]]  # the cells were drawn
    assert [v["score_1"] for v in large["views"]] == [v["score_1"] for v in small["views"]]


def test_refusals_name_the_judges_as_before(tmp_path: Path) -> None:
    path = tmp_path / "votes.jsonl"
    bench_eval_scale.write(path, 50, seed=1)
    table, items = load_table([path]), load([path])
    for judges in (("judge-1", "judge-9"), ("judge-3", "judge-3")):
        with pytest.raises(CompareError) as want:
            compare_report(items, *judges)
        with pytest.raises(CompareError) as got:
            compare_table(table, *judges)
        assert str(got.value) == str(want.value)


def test_no_labelled_item_in_common_is_refused_alike() -> None:
    items = load([Path(__file__).parent / "fixtures" / "ties_votes.jsonl"])
    unlabelled = [
        judged.model_copy(update={"item": judged.item.model_copy(update={"label": None})}) for judged in items
    ]
    names = sorted({vote.judge for judged in items for vote in judged.votes})
    with pytest.raises(CompareError) as want:
        compare_report(unlabelled, names[0], names[1])
    with pytest.raises(CompareError) as got:
        compare_table(VoteTable.from_items(unlabelled), names[0], names[1])
    assert str(got.value) == str(want.value)


def test_the_command_reports_what_the_reference_does(tmp_path: Path) -> None:
    path = tmp_path / "votes.jsonl"
    path.write_text("\n".join(named_models(600, seed=3)) + "\n")
    out = tmp_path / "compare.json"
    args = ["compare", str(path), "--judges", "claude-3-haiku", "judge-4", "--bootstrap", "100", "--seed", "6"]
    assert main([*args, "--json", str(out)]) == 0
    want = compare_report(load([path]), "claude-3-haiku", "judge-4", n_resamples=100, seed=6)
    assert out.read_text() == compare_json(want, sources=[str(path)])
