"""Every loader refuses a hostile line as a DatasetError naming file and line (issue 41): a line
of 100,000 nested brackets (``json.loads`` raised RecursionError) and bytes that are not UTF-8
(UnicodeDecodeError from wherever the file was decoded) escaped as tracebacks. Real files of
each format, with their second line replaced; the nesting bound is :mod:`judgefuse.json_input`'s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judgefuse.evaluation.loaders import DatasetError, load, read_votes
from judgefuse.evaluation.loaders.jsonl import read_json
from judgefuse.json_input import MAX_DEPTH, JSONTextError, parse_json, too_deep

BAD_LINES = {
    "deep": (b"[" * 100_000, "nested deeper than 128 levels of arrays and objects"),
    "deep in a field": (b'{"pair_id": "1", "x": ' + b"{" * 5_000 + b"}" * 5_000 + b"}",
                               "nested deeper than 128 levels"),
    "not utf-8": (b'{"id": "caf\xe9"}', "not UTF-8 text (invalid continuation byte"),
}


def _with_bad_second_line(source: Path, target: Path, bad: bytes) -> Path:
    lines = source.read_bytes().splitlines()[:3]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"\n".join([lines[0], bad, lines[2]]) + b"\n")
    return target


def _sources(shared_data: Path, tmp_path: Path) -> dict[str, tuple[Path, Path]]:
    judgebench = next((shared_data / "judgebench" / "outputs").glob("*judge_name=arena_hard*.jsonl"))
    llmbar = tmp_path / "llmbar"
    llmbar.mkdir()
    (llmbar / "Dataset").symlink_to(shared_data / "llmbar" / "Dataset")
    return {
        "toe": (shared_data / "trust_or_escalate" / "gpt-4-turbo.calibration.jsonl",
                tmp_path / "toe" / "gpt-4-turbo.calibration.jsonl"),
        "judgebench": (judgebench, tmp_path / "jb" / judgebench.name),
        "llmbar": (shared_data / "llmbar" / "llmbar_decisions_compact.jsonl", llmbar / "llmbar_decisions_compact.jsonl"),
        "votes": (Path(__file__).parent / "fixtures" / "ties_votes.jsonl", tmp_path / "votes" / "votes.jsonl"),
    }


@pytest.mark.parametrize("bad", list(BAD_LINES))
@pytest.mark.parametrize("fmt", ["toe", "judgebench", "llmbar", "votes"])
def test_every_jsonl_loader_names_the_hostile_line(fmt: str, bad: str, shared_data: Path, tmp_path: Path) -> None:
    raw, reason = BAD_LINES[bad]
    source, target = _sources(shared_data, tmp_path)[fmt]
    path = _with_bad_second_line(source, target, raw)
    with pytest.raises(DatasetError) as caught:
        load(path.parent if fmt == "llmbar" else path, format=fmt)
    assert (caught.value.path, caught.value.line) == (path, 2)
    assert str(caught.value).startswith(f"{path}:2: {reason}")


def test_a_whole_json_file_names_the_line_of_its_fault(tmp_path: Path) -> None:
    path = tmp_path / "dataset.json"
    path.write_bytes(b'[\n {"input": "ok"},\n {"input": "\xff"}\n]\n')
    with pytest.raises(DatasetError, match=r"dataset.json:3: not UTF-8 text"):
        read_json(path)
    path.write_bytes(b'[\n {"input": "ok"},\n ' + b"[" * 1000 + b"\n]\n")
    with pytest.raises(DatasetError, match="nested deeper than 128"):
        read_json(path)


def test_a_deep_votes_line_cut_by_a_crash_is_skipped_as_a_cut_line(tmp_path: Path) -> None:
    fixture = Path(__file__).parent / "fixtures" / "ties_votes.jsonl"
    path = tmp_path / "votes.jsonl"
    path.write_bytes(fixture.read_bytes() + b"[" * 100_000)  # no final newline: a cut last line
    notes: list[str] = []
    assert len(read_votes(path, notes=notes)) == len(fixture.read_bytes().splitlines())
    assert "skipped a cut last line" in notes[0] and "nested deeper" in notes[0]


def test_the_bound_counts_structure_not_text() -> None:
    at_bound = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_json(at_bound) is not None and not too_deep(at_bound)
    assert too_deep("[" + at_bound + "]")
    brackets_in_text = json.dumps({"code": "[" * 10_000, "escaped": '\\"[[[' * 100})
    assert not too_deep(brackets_in_text) and parse_json(brackets_in_text)["code"] == "[" * 10_000
    with pytest.raises(JSONTextError, match="nested deeper than 128 levels") as caught:
        parse_json("{" * 200_000)
    assert isinstance(caught.value, ValueError)
