"""The columnar offline path (issue 46): a votes file streamed into arrays
(judgefuse.evaluation.loaders.votes_columnar) and evaluated over them (judgefuse.evaluation.table_eval),
against the judged-items path (``load`` + ``evaluate``), the reference.

* The reader: on every shared data set, the synthetic benchmark file and files with one line
  changed to hit each rule of the models (coercions the models make, every kind of fault, tie and
  invalid votes, position-swap games, signals, tie labels, blank lines, a cut or a whole last line,
  duplicate ids in a file and across files, UTF-8 and nesting faults, Parquet), the table equals the
  judged items' arrays, or both paths raise the same message.
* ``evaluate_table`` equals ``evaluate``: every row's scored arrays, metrics, intervals, ties,
  agreement, alpha and judge warnings.
* ``judgefuse eval`` takes the columnar path for columnar methods and gives the same JSON report.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from judgefuse.cli import main
from judgefuse.evaluation.loaders import DatasetError, load
from judgefuse.evaluation.loaders.votes_columnar import load_table
from judgefuse.evaluation.runner import EvaluationOptions, default_methods, evaluate
from judgefuse.evaluation.table_eval import columnar_methods, evaluate_table
from judgefuse.evaluation.vote_table import VoteTable
from judgefuse.judges.types import MAX_CALLS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_eval_scale  # noqa: E402

COLUMNAR = tuple(name for name in default_methods() if columnar_methods([name]))
VOTE_FIELDS = ("present", "valid", "says_a", "tie", "confidence", "p_a", "judge", "cost_usd", "calls",
               "vote_cost_usd", "vote_calls", "games")  # fmt: skip


def assert_same_table(got: VoteTable, want: VoteTable) -> None:
    assert list(got.items.ids) == list(want.items.ids)
    np.testing.assert_array_equal(got.items.outcome, want.items.outcome)
    np.testing.assert_array_equal(got.items.category_names(np.arange(got.n_items)),
                                  want.items.category_names(np.arange(want.n_items)))  # fmt: skip
    assert got.votes.judges == want.votes.judges
    for name in VOTE_FIELDS:
        np.testing.assert_array_equal(getattr(got.votes, name), getattr(want.votes, name), err_msg=name)
    assert got.votes.signals.keys() == want.votes.signals.keys()
    for key, values in want.votes.signals.items():
        np.testing.assert_array_equal(got.votes.signals[key], values, err_msg=key)


def assert_reads_alike(paths: list[Path]) -> None:
    """Both readers accept the files with equal arrays, or both refuse them with one message; the
    columnar reader alone and with each file's second half read by a forked child."""
    try:
        want = VoteTable.from_items(load(paths))
    except DatasetError as exc:
        for jobs in JOBS:
            with pytest.raises(DatasetError) as refused:
                load_table(paths, jobs=jobs)
            assert str(refused.value) == str(exc), jobs
        return
    for jobs in JOBS:
        assert_same_table(load_table(paths, jobs=jobs), want)


JOBS = (1, 2) if sys.platform.startswith("linux") else (1,)
"""One reader, and (where fork is the platform's) the second half of each file read by a child."""


@pytest.mark.parametrize("dataset", ["judgebench", "llmbar", "trust_or_escalate"])
def test_shared_data_reads_alike(shared_data: Path, dataset: str) -> None:
    assert_same_table(load_table([shared_data / dataset]), VoteTable.from_items(load([shared_data / dataset])))


def good_records(n: int = 40) -> list[dict[str, Any]]:
    return [json.loads(line) for line in bench_eval_scale.synthetic_lines(n, seed=3)]


def _vote(record: dict[str, Any], k: int = 0) -> dict[str, Any]:
    return record["votes"][k]


CHANGES: dict[str, Any] = {
    "confidence as text": lambda r: _vote(r).update(choice="A", confidence="0.7"),
    "confidence above 1": lambda r: _vote(r).update(choice="A", confidence=1.5),
    "confidence an int": lambda r: _vote(r).update(choice="B", confidence=1),
    "confidence a bool": lambda r: _vote(r).update(choice="B", confidence=True),
    "confidence NaN": lambda r: _vote(r).update(choice="B", confidence=float("nan")),
    "no confidence": lambda r: (_vote(r).update(choice="A"), _vote(r).pop("confidence", None)),
    "confidence without a choice": lambda r: _vote(r).update(choice=None, confidence=0.8),
    "tie with a confidence": lambda r: _vote(r).update(choice="tie", confidence=0.8),
    "tie flag": lambda r: _vote(r).clear() or _vote(r).update(judge="judge-1", mode="sc", tie=True, p_a=0.5),
    "tie with p_a 0.3": lambda r: (
        _vote(r).clear() or _vote(r).update(judge="judge-1", mode="sc", choice="tie", p_a=0.3)
    ),
    "tie flag and a letter": lambda r: _vote(r).update(choice="A", confidence=0.7, tie=True),
    "tie flag as 1": lambda r: _vote(r).clear() or _vote(r).update(judge="judge-1", mode="sc", tie=1),
    "unknown letter": lambda r: _vote(r).update(choice="C", confidence=0.7),
    "unknown vote key": lambda r: _vote(r).update(colour="red"),
    "unknown item key": lambda r: r["item"].update(colour="red"),
    "unknown record key": lambda r: r.update(colour="red"),
    "no mode": lambda r: _vote(r).pop("mode"),
    "unknown mode": lambda r: _vote(r).update(mode="vibes"),
    "empty judge": lambda r: _vote(r).update(judge=""),
    "judge a number": lambda r: _vote(r).update(judge=7),
    "no item": lambda r: r.pop("item"),
    "no votes": lambda r: r.pop("votes"),
    "votes not a list": lambda r: r.update(votes={"judge": "x"}),
    "a vote not an object": lambda r: r["votes"].append("A"),
    "empty id": lambda r: r["item"].update(id=""),
    "id a number": lambda r: r["item"].update(id=12),
    "label both_bad": lambda r: r["item"].update(label="both_bad"),
    "label null": lambda r: r["item"].update(label=None),
    "unknown label": lambda r: r["item"].update(label="C"),
    "tie_label": lambda r: r["item"].update(label=None, tie_label="tie"),
    "label and tie_label": lambda r: r["item"].update(label="A", tie_label="tie"),
    "category null": lambda r: r["item"].update(category=None),
    "category a number": lambda r: r["item"].update(category=3),
    "metadata nested": lambda r: r["item"].update(metadata={"a": {"b": [1, 2, {"c": None}]}}),
    "metadata a list": lambda r: r["item"].update(metadata=[1]),
    "question text": lambda r: r["item"].update(question="which?", answer_a="x", answer_b="y"),
    "question null": lambda r: r["item"].update(question=None),
    "p_a on an invalid vote": lambda r: (
        _vote(r).clear() or _vote(r).update(judge="judge-1", mode="recorded", error="inconsistent", p_a=0.3)
    ),
    "p_a beside a confidence": lambda r: _vote(r).update(choice="A", confidence=0.7, p_a=0.65),
    "error on a valid vote": lambda r: _vote(r).update(choice="A", confidence=0.7, error="late"),
    "error a number": lambda r: _vote(r).update(error=3),
    "two games": lambda r: _vote(r).update(choice="A", confidence=0.7, samples=["A", "B"]),
    "one game and a gap": lambda r: _vote(r).update(choice="A", confidence=0.7, samples=[None, "B"]),
    "three samples": lambda r: _vote(r).update(choice="A", confidence=0.7, mode="mp", samples=["A", "B", "A"]),
    "a bad sample": lambda r: _vote(r).update(choice="A", confidence=0.7, samples=["C"]),
    "samples a dict": lambda r: _vote(r).update(samples={}),
    "swap signal": lambda r: _vote(r).update(choice="B", confidence=0.7, signals={"position_inconsistent": 1.0}),
    "consistent swap": lambda r: _vote(r).update(choice="B", confidence=0.7, signals={"position_inconsistent": 0}),
    "a margin": lambda r: _vote(r).update(signals={"margin": -2.5}),
    "a margin as text": lambda r: _vote(r).update(signals={"margin": "2"}),
    "a margin NaN": lambda r: _vote(r).update(signals={"margin": float("nan")}),
    "signals a list": lambda r: _vote(r).update(signals=[]),
    "notes": lambda r: _vote(r).update(notes=["fell back"]),
    "notes of numbers": lambda r: _vote(r).update(notes=[1]),
    "explanation null": lambda r: _vote(r).update(explanation=None),
    "calls negative": lambda r: _vote(r).update(calls=-1),
    "calls a float": lambda r: _vote(r).update(calls=2.0),
    "calls a bool": lambda r: _vote(r).update(calls=True),
    "calls at the bound": lambda r: _vote(r).update(calls=MAX_CALLS),
    "calls past the bound": lambda r: _vote(r).update(calls=MAX_CALLS + 1),
    "calls 2^63": lambda r: _vote(r).update(calls=2**63),
    "calls past 64 bits": lambda r: _vote(r).update(calls=2**64 + 1),
    "cost negative": lambda r: _vote(r).update(cost_usd=-0.1),
    "cost as text": lambda r: _vote(r).update(cost_usd="0.1"),
    "latency": lambda r: _vote(r).update(latency_s=0.25, prompt_tokens=10, completion_tokens=3),
    "latency negative": lambda r: _vote(r).update(latency_s=-1),
    "tokens a float": lambda r: _vote(r).update(prompt_tokens=1.5),
}


@pytest.mark.parametrize("at", [17, 32], ids=["first half", "second half"])
@pytest.mark.parametrize("change", list(CHANGES))
def test_each_rule_of_the_models(tmp_path: Path, change: str, at: int) -> None:
    records = good_records()
    bad = copy.deepcopy(records[at])
    CHANGES[change](bad)
    records[at] = bad
    path = tmp_path / "votes.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    assert_reads_alike([path])


def test_a_count_past_the_bound_is_a_file_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ``calls`` above 2^63 (an int64 overflow in either reader's arrays once) is refused at its
    line with exit status 2 and one message, on the columnar path and the judged items' path."""
    records = good_records(10)
    records[6]["votes"][1]["calls"] = 2**63 + 5
    path = tmp_path / "votes.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    messages = []
    for methods in ([], ["--methods", "auto"]):  # auto has no columnar form: the judged items' path
        assert main(["eval", str(path), "--quiet", *methods]) == 2
        messages.append(capsys.readouterr().err.strip())
    want = f"judgefuse eval: error: {path}:7: field 'votes[1].calls': must be <= {MAX_CALLS} (got {2**63 + 5})"
    assert messages == [want, want]


LINES: dict[str, list[bytes]] = {
    "blank lines": [b"", b"   "],
    "not an object": [b"[1, 2]"],
    "malformed": [b'{"item": {"id": "x"'],
    "not UTF-8": [b'{"item": {"id": "\xff"}, "votes": []}'],
    "too deep": [b'{"item": {"id": "deep", "metadata": ' + b"[" * 200 + b"]" * 200 + b"}}"],
    "too deep in an object": [b'{"item": {"id": "deep", "metadata": {"a": ' + b"[" * 200 + b"]" * 200 + b"}}}"],
    "deep but within the bound": [b'{"item": {"id": "deep", "metadata": {"a": ' + b"[" * 100 + b"]" * 100 + b"}}}"],
    # what the standard library's decoder and orjson (the reader's fast path) read apart or only one reads
    "NaN": [b'{"item": {"id": "nan"}, "votes": [{"judge": "j", "mode": "sc", "choice": "A", "confidence": NaN}]}'],
    "Infinity": [b'{"item": {"id": "inf"}, "votes": [{"judge": "j", "mode": "sc", "cost_usd": Infinity}]}'],
    "1e400": [b'{"item": {"id": "big"}, "votes": [{"judge": "j", "mode": "sc", "latency_s": 1e400}]}'],
    "an integer past 64 bits": [
        b'{"item": {"id": "big"}, "votes": [{"judge": "j", "mode": "sc", "cost_usd": 123456789012345678901234567890,'
        b' "signals": {"margin": -18446744073709551617}}]}'
    ],
    "a count past 64 bits": [b'{"item": {"id": "big"}, "votes": [{"judge": "j", "mode": "sc", "calls": 1e30}]}'],
    "a lone surrogate": [b'{"item": {"id": "s\\ud800"}, "votes": [{"judge": "j", "mode": "sc", "raw": "\\udc00"}]}'],
    "a surrogate pair": [b'{"item": {"id": "s\\ud83d\\ude00"}, "votes": []}'],
    "UTF-8 text": ['{"item": {"id": "caf\u00e9", "category": "\u00fcber"}, "votes": []}'.encode()],
    "an encoded surrogate": [b'{"item": {"id": "\xed\xa0\x80"}, "votes": []}'],
    "a duplicate key": [b'{"item": {"id": "d", "label": "A", "label": "B"}, "votes": [], "votes": []}'],
    "spaces and a carriage return": [b'  {"item": {"id": "cr"}, "votes": []}  \r'],
    "a control character": [b'{"item": {"id": "t\tab"}, "votes": []}'],
    "a byte order mark": [b'\xef\xbb\xbf{"item": {"id": "bom"}, "votes": []}'],
    "two objects": [b'{"item": {"id": "x1"}, "votes": []}{"item": {"id": "x2"}, "votes": []}'],
}


@pytest.mark.parametrize("lines", list(LINES))
def test_lines_the_parser_refuses_or_skips(tmp_path: Path, lines: str) -> None:
    records = [json.dumps(record).encode() for record in good_records()]
    path = tmp_path / "votes.jsonl"
    path.write_bytes(b"\n".join(records[:9] + LINES[lines] + records[9:]) + b"\n")
    assert_reads_alike([path])
    path.write_bytes(b"\n".join(records + LINES[lines]))  # the last line, without a final newline
    assert_reads_alike([path])


METADATA_VALUES: list[Any] = ["model-x", 7, -3, 2**64 - 1, 2**70, -(2**63) - 1, 1.5, 1e20, 1.5e19, True, None, "",
                               {"a": [1, 2]}, [2**70], "model-x"]  # fmt: skip


@pytest.mark.parametrize("kept", [["system"], ["system", "other"], []])
def test_metadata_kept_as_the_models_read_it(tmp_path: Path, kept: list[str]) -> None:
    """The metadata a reader keeps (winrate's systems) holds each value as the standard library's
    decoder reads it: an integer past 64 bits stays an integer, equal values of different types
    stay apart."""
    records = good_records(len(METADATA_VALUES) + 5)
    for record, value in zip(records, METADATA_VALUES, strict=False):
        record["item"]["metadata"] = {"system": value, "other": "model-y"}
    path = tmp_path / "votes.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    got = load_table([path], metadata=kept).items.metadata
    want = VoteTable.from_items(load([path]), metadata=kept).items.metadata
    assert list(got) == kept
    for name in kept:
        assert [(type(v), v) for v in got[name]] == [(type(v), v) for v in want[name]]
    assert [(type(v), v) for v in got.get("system", [])][: len(METADATA_VALUES)] == (
        [(type(v), v) for v in METADATA_VALUES] if "system" in kept else []
    )


def test_an_earlier_fault_is_reported_before_a_later_one(tmp_path: Path) -> None:
    records = good_records()
    records[5]["votes"][0]["confidence"] = 2.0
    lines = [json.dumps(record).encode() for record in records]
    lines[30] = b"{broken"
    path = tmp_path / "votes.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert_reads_alike([path])
    with pytest.raises(DatasetError, match=r"votes.jsonl:6: field 'votes\[0\].confidence'"):
        load_table([path])


def test_the_last_line(tmp_path: Path) -> None:
    lines = [json.dumps(record) for record in good_records()]
    whole = tmp_path / "whole.jsonl"
    whole.write_text("\n".join(lines))  # no final newline: a whole item, kept
    assert_reads_alike([whole])
    assert load_table([whole]).n_items == len(lines)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines)[:-25])  # cut by a crash: skipped, with a note
    notes: list[str] = []
    from judgefuse.evaluation.loaders.votes_columnar import read_vote_table

    assert read_vote_table([cut], notes=notes).n_items == len(lines) - 1
    assert notes and "skipped a cut last line" in notes[0]
    assert_reads_alike([cut])
    for jobs in JOBS[1:]:  # the child reads the last line: its note reaches the parent
        notes_of_two: list[str] = []
        assert read_vote_table([cut], notes=notes_of_two, jobs=jobs).n_items == len(lines) - 1
        assert notes_of_two == notes


@pytest.mark.parametrize(("first", "again"), [(3, 20), (3, 35), (30, 35), (3, 12)])
def test_duplicate_ids(tmp_path: Path, first: int, again: int) -> None:
    records = good_records()
    records[again]["item"]["id"] = records[first]["item"]["id"]
    path = tmp_path / "votes.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    assert_reads_alike([path])
    records[38]["votes"][0]["confidence"] = 3.0  # a later fault in the second half: the duplicate is first
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    assert_reads_alike([path])


def test_an_id_in_two_files(tmp_path: Path) -> None:
    one, two = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    records = good_records()
    one.write_text("".join(json.dumps(record) + "\n" for record in records[:25]))
    two.write_text("".join(json.dumps(record) + "\n" for record in records[20:]))
    assert_reads_alike([one, two])
    two.write_text("".join(json.dumps(record) + "\n" for record in records[25:]))
    assert_reads_alike([one, two])  # two files, no id in both: one table


def test_names_first_seen_in_a_files_second_half(tmp_path: Path) -> None:
    """Judges, categories and signals that appear only after the middle of the file get the codes
    one reader gives them (the child's codes renumbered into the parent's)."""
    records = good_records()
    for record in records[22:]:  # (the file's middle byte is on line 20 or 21)
        record["item"]["category"] = "new-" + record["item"]["category"]
        for vote in record["votes"]:
            vote["judge"] = vote["judge"].replace("judge-1", "judge-9")  # the child's first judge
            if "confidence" in vote:
                vote["signals"] = {"margin": vote["confidence"] - 0.5}
    records[30]["votes"][0]["samples"] = ["A", "B", None]
    records[2]["votes"][0]["signals"] = {"gap": 0.25}  # the first half's signal: "margin" is the second key
    path = tmp_path / "votes.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    assert_reads_alike([path])


def test_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many blocks, one of them with a record the models coerce (read line by line), one not."""
    from judgefuse.evaluation.loaders import votes_columnar

    monkeypatch.setattr(votes_columnar, "BLOCK_LINES", 7)
    records = good_records(60)
    records[30]["votes"][1]["confidence"] = str(records[30]["votes"][1].get("confidence", "0.6"))
    path = tmp_path / "votes.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    assert_reads_alike([path])


def test_parquet(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    records = good_records()
    path = tmp_path / "votes.parquet"
    pq.write_table(pa.Table.from_pylist(records), path, row_group_size=7)
    assert_reads_alike([path])
    records[11]["votes"][0]["confidence"] = 3.0
    pq.write_table(pa.Table.from_pylist(records), path, row_group_size=7)
    assert_reads_alike([path])


def assert_same_evaluation(got: Any, want: Any) -> None:
    assert [r.row.name for r in got.rows] == [r.row.name for r in want.rows]
    for mine, ref in zip(got.rows, want.rows, strict=True):
        assert mine.metrics == pytest.approx(ref.metrics, abs=0, nan_ok=True), mine.row.name
        for name in ("confidence", "correct", "choices", "item_index", "categories"):
            np.testing.assert_array_equal(getattr(mine.row, name), getattr(ref.row, name), err_msg=name)
        assert (mine.row.n_invalid, mine.row.n_ties, mine.row.calls, mine.row.cost_usd) == (
            ref.row.n_invalid, ref.row.n_ties, ref.row.calls, ref.row.cost_usd)  # fmt: skip
        assert mine.intervals == ref.intervals
        assert mine.per_category.keys() == ref.per_category.keys()
        for category, values in ref.per_category.items():
            assert mine.per_category[category] == pytest.approx(values, abs=0, nan_ok=True), category
        assert mine.reliability == ref.reliability
        assert mine.helped_harmed == ref.helped_harmed
    for name in ("n_items", "n_labelled", "skipped_methods", "ties", "agreement", "judges_alpha", "judge_warnings"):
        assert getattr(got, name) == getattr(want, name), name


@pytest.mark.parametrize("dataset", ["judgebench", "llmbar", "trust_or_escalate"])
def test_evaluate_table_equals_evaluate_on_shared_data(shared_data: Path, dataset: str) -> None:
    methods = COLUMNAR if dataset != "llmbar" else tuple(m for m in COLUMNAR if "stack" not in m)
    options = EvaluationOptions(methods=methods, n_bootstrap=200)
    items = load([shared_data / dataset])
    assert_same_evaluation(evaluate_table(load_table([shared_data / dataset]), options=options),
                           evaluate(items, options=options))  # fmt: skip


def test_evaluate_table_equals_evaluate_on_the_synthetic_file(tmp_path: Path) -> None:
    path = tmp_path / "votes.jsonl"
    bench_eval_scale.write(path, 3000, seed=7)
    options = EvaluationOptions(methods=COLUMNAR, n_bootstrap=200, seed=3)
    got = evaluate_table(load_table([path]), options=options)
    assert got.has_ties
    assert_same_evaluation(got, evaluate(load([path]), options=options))


@pytest.mark.parametrize("dataset", ["synthetic", "trust_or_escalate"])
def test_stacking_rows_fitted_in_a_forked_child_equal_the_rows_fitted_here(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dataset: str
) -> None:
    from judgefuse.evaluation import forked_rows, table_eval

    if not forked_rows.fork_helps(False, 2):
        pytest.skip("fork is Linux's")
    path = shared_data / dataset
    if dataset == "synthetic":
        path = tmp_path / "votes.jsonl"
        bench_eval_scale.write(path, 3000, seed=5)
    forked: list[str] = []
    computed_here: list[str] = []

    class Watched(forked_rows.ForkedRows[Any]):
        """Records the rows asked of the child, and any the parent had to compute itself."""

        def __init__(self, names: list[str], compute: Any) -> None:
            super().__init__(names, compute)
            forked.extend(names)

            def here(name: str) -> Any:
                computed_here.append(name)
                return compute(name)

            self._compute = here

    monkeypatch.setattr(table_eval, "ForkedRows", Watched)
    options = EvaluationOptions(methods=COLUMNAR, n_bootstrap=200, seed=4)
    got = evaluate_table(load_table([path]), options=options, jobs=2)
    assert forked == [name for name in COLUMNAR if "stacked" in name] and computed_here == []
    assert_same_evaluation(got, evaluate_table(load_table([path]), options=options, jobs=1))


@pytest.mark.parametrize("refused", [None, "offset_stacked"])
def test_rows_drawn_over_cells_get_their_intervals_at_their_places_in_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refused: str | None
) -> None:
    """A large row's resamples are seeded by its place in the report. With a child fitting the
    stacking rows, the parent draws its own rows' intervals meanwhile, at the places they will have
    if no stacking row is skipped; a skipped one (here refused for want of labels) moves every later
    row up one place, and those are drawn again where they are: the report is one process's."""
    from judgefuse.calibration import bootstrap
    from judgefuse.evaluation import forked_rows, table_eval
    from judgefuse.fusion import NotEnoughLabels

    if not forked_rows.fork_helps(False, 2):
        pytest.skip("fork is Linux's")
    monkeypatch.setattr(bootstrap, "LARGE_CELLS", 1_000)  # every row here is drawn over cells
    fuse_columnar = table_eval.fuse_columnar

    def fuse(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == refused:
            raise NotEnoughLabels(f"{name} refused by the test")
        return fuse_columnar(name, *args, **kwargs)

    monkeypatch.setattr(table_eval, "fuse_columnar", fuse)
    path = tmp_path / "votes.jsonl"
    bench_eval_scale.write(path, 1500, seed=6)
    options = EvaluationOptions(methods=COLUMNAR, n_bootstrap=200, seed=5)
    got = evaluate_table(load_table([path]), options=options, jobs=2)
    assert list(got.skipped_methods) == ([refused] if refused else [])
    assert_same_evaluation(got, evaluate_table(load_table([path]), options=options, jobs=1))


def test_a_method_without_a_columnar_form_is_refused() -> None:
    assert not columnar_methods(["auto"]) and columnar_methods(["majority", "stacked"])
    table = VoteTable.from_items(load([Path(__file__).parent / "fixtures" / "ties_votes.jsonl"]))
    with pytest.raises(ValueError, match="no columnar form for auto"):
        evaluate_table(table, options=EvaluationOptions(methods=("majority", "auto")))


def test_the_command_takes_the_columnar_path_with_the_same_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from judgefuse.evaluation import commands

    path = tmp_path / "votes.jsonl"
    bench_eval_scale.write(path, 800, seed=2)
    args = ["eval", str(path), "--methods", "majority", "dawid_skene", "majority+platt", "--bootstrap", "50", "--quiet"]
    assert main([*args, "--json", str(tmp_path / "table.json")]) == 0
    taken: list[bool] = []
    monkeypatch.setattr(commands, "_columnar", lambda parsed: taken.append(False) or False)
    assert main([*args, "--json", str(tmp_path / "items.json")]) == 0
    assert taken == [False]
    assert json.loads((tmp_path / "table.json").read_text()) == json.loads((tmp_path / "items.json").read_text())


def test_the_commands_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--jobs 2`` (the file's second half read, the stacking rows fitted, in a forked child)
    writes the report ``--jobs 1`` writes; ``--jobs 0`` is refused naming the flag."""
    path = tmp_path / "votes.jsonl"
    bench_eval_scale.write(path, 600, seed=4)
    args = ["eval", str(path), "--methods", "majority", "stacked", "offset_stacked", "--bootstrap", "50", "--quiet"]
    reports = []
    for jobs in JOBS:
        assert main([*args, "--jobs", str(jobs), "--json", str(tmp_path / f"jobs_{jobs}.json")]) == 0
        reports.append(json.loads((tmp_path / f"jobs_{jobs}.json").read_text()))
    assert all(report == reports[0] for report in reports)
    assert main([*args, "--jobs", "0"]) == 2
    assert "argument --jobs: must be an integer >= 1 (got 0)" in capsys.readouterr().err


@pytest.mark.parametrize("dataset", ["judgebench", "llmbar", "trust_or_escalate", None])
def test_panel_structure_from_the_arrays(shared_data: Path, tmp_path: Path, dataset: str | None) -> None:
    from judgefuse.evaluation.panel_structure import panel_structure, panel_structure_of_table

    path = shared_data / dataset if dataset else tmp_path / "votes.jsonl"
    if dataset is None:
        bench_eval_scale.write(path, 2000, seed=9)
    items = load([path])
    want = panel_structure([judged for judged in items if judged.item.label is not None])
    assert panel_structure_of_table(load_table([path])) == want


@pytest.mark.parametrize(
    "who", [{"judge": "judge-2"}, {"method": "majority"}, {"method": "majority+isotonic"}, {"method": "stacked"}]
)
def test_tune_over_the_table_equals_tune_over_items(tmp_path: Path, who: dict[str, str]) -> None:
    from judgefuse.evaluation.tune_command import columnar_tune, tune_items

    path = tmp_path / "votes.jsonl"
    bench_eval_scale.write(path, 1500, seed=4)
    assert columnar_tune(who.get("method"), who.get("judge"))
    got = tune_items(load_table([path]), n_folds=4, seed=2, **who)
    want = tune_items(load([path]), n_folds=4, seed=2, **who)
    for name in ("confidence", "correct", "choices", "item_index"):
        np.testing.assert_array_equal(getattr(got.row, name), getattr(want.row, name))
    assert got.report == want.report
    assert not columnar_tune("dawid_skene", None) and not columnar_tune("auto", None)
