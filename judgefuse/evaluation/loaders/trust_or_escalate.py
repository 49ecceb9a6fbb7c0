"""Trust-or-Escalate recorded judgments -> ``list[JudgedItem]``.

Inputs: ``<judge>.calibration.jsonl`` files (``gpt-4-turbo``, ``gpt-3.5-turbo``,
``mistral-7b-instruct``), the same human-labelled pairs in the same order in each:
``{"instruction", "outputs": [o1, o2], "preferences": {"human": 1 | 2}, "probs": [p(o1), p(o2)]}``.
The files must align line by line (same count, same instruction and outputs on every line, same
label); otherwise a DatasetError names the first line that differs. Instructions repeat (494
distinct of 500), so items are keyed by position: id ``toe/<n>`` (0-based), no category.

Rule: ``probs`` are the exponentiated logprobs of the two answer letters and do not sum to 1;
``p_a = probs[0] / (probs[0] + probs[1])``, the softmax over the two letters (the logprob confidence
of "Overconfidence in LLM-as-a-Judge"), and the vote follows from it (:meth:`JudgeVote.from_p_a`: A above 0.5, B below,
exactly 0.5 is a tie vote; ``[0, 0]`` is an undefined answer, an invalid vote). Signal ``log_odds = ln probs[0] - ln probs[1]`` when both are
positive. Label A iff ``preferences.human == 1``. Judge name = file name without
``.calibration.jsonl``; votes in the order the files are given (a folder: sorted by name).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judgefuse.evaluation.loaders.answers import UndefinedAnswers
from judgefuse.evaluation.loaders.errors import DatasetError, from_validation
from judgefuse.evaluation.loaders.jsonl import as_float, as_text, iter_jsonl, member, paused_gc, require
from judgefuse.judges.types import JudgedItem, JudgeVote, Letter, PairwiseItem

SUFFIX = ".calibration.jsonl"
_HUMAN: dict[Any, Letter] = {1: "A", 2: "B", "1": "A", "2": "B"}


def judge_name(path: str | Path) -> str:
    """``gpt-4-turbo`` from ``.../gpt-4-turbo.calibration.jsonl``."""
    name = Path(path).name
    return name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name.removesuffix(".jsonl")


def _probs(record: dict[str, Any], path: Path, line: int) -> tuple[float, float]:
    probs = require(record, "probs", path, line)
    if not isinstance(probs, list) or len(probs) != 2:
        raise DatasetError(path, f"must be a list of two probabilities (got {probs!r})", line=line, field="probs")
    p1, p2 = (as_float(p, path, line, f"probs[{i}]") for i, p in enumerate(probs))
    for i, p in enumerate((p1, p2)):
        if not 0.0 <= p <= 1.0:
            raise DatasetError(path, f"must be in [0, 1] (got {p:g})", line=line, field=f"probs[{i}]")
    return p1, p2


def _read(path: Path) -> list[tuple[int, dict[str, Any], Letter, tuple[str, str]]]:
    rows = []
    for line, record in iter_jsonl(path):
        as_text(require(record, "instruction", path, line), path, line, "instruction")
        outputs = require(record, "outputs", path, line)
        if not isinstance(outputs, list) or len(outputs) != 2 or not all(isinstance(o, str) for o in outputs):
            raise DatasetError(path, "must be a list of two strings", line=line, field="outputs")
        preferences = require(record, "preferences", path, line)
        if not isinstance(preferences, dict) or "human" not in preferences:
            raise DatasetError(path, "required key is missing", line=line, field="preferences.human")
        human = preferences["human"]
        if not member(human, _HUMAN):
            raise DatasetError(path, f"unknown label {human!r} (expected 1 or 2)", line=line, field="preferences.human")
        rows.append((line, record, _HUMAN[human], (outputs[0], outputs[1])))
    if not rows:
        raise DatasetError(path, "no records in the file")
    return rows


def load_toe(paths: Sequence[str | Path], *, answers: UndefinedAnswers | None = None) -> list[JudgedItem]:
    """The Trust-or-Escalate items with one vote per file (rule in the module docstring).

    ``probs`` of ``[0, 0]`` (no mass on either letter) is an undefined answer: an invalid vote,
    recorded in ``answers`` (lenient when omitted; ``UndefinedAnswers(strict=True)`` makes it an error).
    """
    files = [Path(p) for p in paths]
    if not files:
        raise ValueError("load_toe needs at least one .calibration.jsonl file")
    with paused_gc():
        return _load(files, answers or UndefinedAnswers())


def _load(files: list[Path], answers: UndefinedAnswers) -> list[JudgedItem]:
    names = [judge_name(p) for p in files]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise DatasetError(files[i], f"judge {name!r} is already loaded from {files[names.index(name)]}")
    tables = [_read(p) for p in files]
    reference, ref_path = tables[0], files[0]
    for path, table in zip(files[1:], tables[1:], strict=True):
        if len(table) != len(reference):
            raise DatasetError(
                path, f"files do not align: {len(table)} records here, {len(reference)} in {ref_path}"
            )
        for (line, record, label, outputs), (_, ref_record, ref_label, ref_outputs) in zip(table, reference, strict=True):
            if record["instruction"] != ref_record["instruction"]:
                raise DatasetError(
                    path, f"files do not align: the instruction differs from {ref_path}", line=line, field="instruction"
                )
            if outputs != ref_outputs:
                raise DatasetError(path, f"files do not align: the outputs differ from {ref_path}", line=line, field="outputs")
            if label != ref_label:
                raise DatasetError(path, f"the human label differs from {ref_path}", line=line, field="preferences.human")
    items = []
    for n, (line, record, label, outputs) in enumerate(reference):
        votes = []
        for path, name, table in zip(files, names, tables, strict=True):
            row_line, row, _, _ = table[n]
            p1, p2 = _probs(row, path, row_line)
            signals = {"log_odds": math.log(p1) - math.log(p2)} if p1 > 0 and p2 > 0 else {}
            raw = json.dumps([p1, p2])
            try:
                if p1 + p2 <= 0.0:  # the judge put no mass on either letter: its answer, not a broken record
                    reason = answers.add(path, row_line, "probs", name, [p1, p2], expected="at least one positive probability").reason
                    votes.append(JudgeVote.invalid(name, "recorded", reason, raw=raw, notes=[reason]))
                    continue
                votes.append(JudgeVote.from_p_a(name, "recorded", p1 / (p1 + p2), signals=signals, raw=raw))
            except ValidationError as exc:
                raise from_validation(exc, path, row_line) from exc
        item = PairwiseItem(
            id=f"toe/{n}",
            question=record["instruction"],
            answer_a=outputs[0],
            answer_b=outputs[1],
            label=label,
            metadata={"index": n, "line": line},
        )
        items.append(JudgedItem(item=item, votes=votes))
    return items


def toe_files(paths: Sequence[str | Path]) -> list[Path]:
    """The calibration files among ``paths`` (a folder: its ``*.calibration.jsonl``, sorted)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(path.glob(f"*{SUFFIX}"))
            if not found:
                raise DatasetError(path, f"no *{SUFFIX} files in this folder")
            files.extend(found)
        else:
            files.append(path)
    return files
