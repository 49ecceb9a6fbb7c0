"""A CSV file of pairs, with labels (ties included) and, optionally, recorded judge votes.

One row per pair, a header naming the columns (case and surrounding spaces ignored; the first
name of each alias list is the documented one, docs/offline-evaluation.md, 'CSV input'):

* ``question`` (or ``instruction``, ``prompt``), ``answer_a`` (``response_a``, ``output_1``),
  ``answer_b`` (``response_b``, ``output_2``): required columns (a cell may be empty).
* ``id``: optional; rows without one are ``row-<line>``. An id seen twice is an error.
* ``label``: optional; ``A``, ``B``, ``tie``, ``both_bad`` (also ``A>B``, ``B>A``, ``A=B``, any
  case); an empty cell is an unlabelled pair. A tie is kept as a tie (``PairwiseItem.tie_label``).
* ``category``: optional.
* ``vote:<judge>``: that judge's answer, ``A``, ``B`` or ``tie``; ``none`` for a vote that gave no
  usable answer (an invalid vote); an empty cell means the judge did not see the pair. A letter
  needs the judge's confidence: a ``confidence:<judge>`` column (confidence in its own choice,
  in [0, 1]) or a ``p_a:<judge>`` column (probability that A is better), as in a votes JSONL line.

Every fault is a :class:`DatasetError` naming the file, the line (the header is line 1) and the
column: an unknown column, a missing required column, an unknown label or vote, a number out of
range, a letter without a confidence. Nothing is guessed. The CSV dialect is Excel's (comma,
double quotes, a UTF-8 byte order mark is skipped), so quoted cells may span lines.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judgefuse.evaluation.loaders.errors import DatasetError, from_validation
from judgefuse.evaluation.loaders.jsonl import as_float, read_text
from judgefuse.judges.types import JudgedItem, JudgeVote, Letter, Outcome, PairwiseItem, TieLabel

SUFFIX = ".csv"
ALIASES: dict[str, tuple[str, ...]] = {
    "question": ("question", "instruction", "prompt"),
    "answer_a": ("answer_a", "response_a", "output_1"),
    "answer_b": ("answer_b", "response_b", "output_2"),
}
OPTIONAL = ("id", "label", "category")
LABELS: dict[str, Letter | TieLabel] = {
    "a": "A", "b": "B", "tie": "tie", "both_bad": "both_bad", "a>b": "A", "b>a": "B", "a=b": "tie"
}
VOTES: dict[str, Outcome] = {"a": "A", "b": "B", "tie": "tie", "a>b": "A", "b>a": "B", "a=b": "tie"}
VOTE_PREFIXES = ("vote:", "confidence:", "p_a:")
NO_ANSWER = "none"


class _Columns:
    """Which header column holds what (module docstring), checked once."""

    def __init__(self, header: list[str], path: Path) -> None:
        names = [name.strip() for name in header]
        lowered = [name.lower() for name in names]
        self.index: dict[str, int] = {}
        self.judges: dict[str, dict[str, int]] = {}
        for position, (name, low) in enumerate(zip(names, lowered, strict=True)):
            key = next((canonical for canonical, aliases in ALIASES.items() if low in aliases), None)
            key = key or (low if low in OPTIONAL else None)
            prefix = next((p for p in VOTE_PREFIXES if low.startswith(p)), None)
            if key is not None:
                if key in self.index:
                    raise DatasetError(path, f"a second {key} column", line=1, field=name)
                self.index[key] = position
            elif prefix is not None and name[len(prefix):].strip():
                judge = name[len(prefix):].strip()
                self.judges.setdefault(judge, {})[prefix[:-1]] = position
            else:
                expected = ", ".join([*ALIASES, *OPTIONAL, "vote:<judge>", "confidence:<judge>", "p_a:<judge>"])
                raise DatasetError(path, f"unknown column (expected {expected})", line=1, field=name or f"#{position + 1}")
        for key, aliases in ALIASES.items():
            if key not in self.index:
                raise DatasetError(path, f"required column is missing (one of {', '.join(aliases)})", line=1, field=key)
        for judge, parts in self.judges.items():
            if "vote" not in parts:
                raise DatasetError(path, f"no vote:{judge} column for it", line=1, field=names[next(iter(parts.values()))])
        self.names = names


def _rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """The rows with the line each ends on; the file is decoded whole first (:func:`read_text`),
    so bytes that are not UTF-8 are refused naming their line."""
    text = read_text(path).removeprefix("\ufeff")  # the BOM a spreadsheet may write (utf-8-sig)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        for row in reader:
            yield reader.line_num, row
    except csv.Error as exc:
        raise DatasetError(path, f"malformed CSV: {exc}", line=reader.line_num) from exc


def _text(row: list[str], position: int | None) -> str:
    """A cell as written (question and answers keep their whitespace)."""
    return row[position] if position is not None and position < len(row) else ""


def _cell(row: list[str], position: int | None) -> str:
    return _text(row, position).strip()


def _vote(judge: str, row: list[str], parts: Mapping[str, int], names: list[str], path: Path, line: int) -> JudgeVote | None:
    field = names[parts["vote"]]
    said = _cell(row, parts["vote"])
    if not said:
        return None
    if said.lower() == NO_ANSWER:
        return JudgeVote.invalid(judge, "recorded", "no usable answer (CSV: none)")
    outcome = VOTES.get(said.lower())
    if outcome is None:
        raise DatasetError(path, f"unknown vote {said!r} (expected A, B, tie, none or empty)", line=line, field=field)
    if outcome == "tie":
        return JudgeVote.tied(judge, "recorded")
    numbers: dict[str, Any] = {}
    for kind in ("confidence", "p_a"):
        text = _cell(row, parts.get(kind))
        if text:
            value = as_float(text, path, line, names[parts[kind]])
            if not 0.0 <= value <= 1.0:
                raise DatasetError(path, f"must be in [0, 1] (got {text})", line=line, field=names[parts[kind]])
            numbers[kind] = value
    if "confidence" not in numbers:
        if "p_a" not in numbers:
            raise DatasetError(
                path, f"a vote for {outcome} needs confidence:{judge} or p_a:{judge} on its row", line=line, field=field
            )
        numbers["confidence"] = numbers["p_a"] if outcome == "A" else 1.0 - numbers["p_a"]
    return JudgeVote(judge=judge, mode="recorded", choice=outcome, **numbers)


def load_csv(path: str | Path) -> list[JudgedItem]:
    """Judged items (votes only where the file has vote columns) from a CSV file, in row order."""
    path = Path(path)
    rows = _rows(path)
    first = next(rows, None)
    if first is None:
        raise DatasetError(path, "empty file: no header and no rows")
    columns = _Columns(first[1], path)
    items: list[JudgedItem] = []
    first_line: dict[str, int] = {}
    for line, row in rows:
        if not any(cell.strip() for cell in row):
            continue
        if len(row) > len(columns.names):
            raise DatasetError(path, f"{len(row)} cells for {len(columns.names)} columns", line=line)
        label_text = _cell(row, columns.index.get("label"))
        label = LABELS.get(label_text.lower()) if label_text else None
        if label_text and label is None:
            raise DatasetError(
                path, f"unknown label {label_text!r} (expected A, B, tie, both_bad or empty)", line=line,
                field=columns.names[columns.index["label"]],
            )
        item_id = _cell(row, columns.index.get("id")) or f"row-{line}"
        if item_id in first_line:
            raise DatasetError(path, f"duplicate id {item_id!r} (first at line {first_line[item_id]})", line=line, field="id")
        first_line[item_id] = line
        try:
            item = PairwiseItem.model_validate(dict(
                id=item_id,
                question=_text(row, columns.index["question"]),
                answer_a=_text(row, columns.index["answer_a"]),
                answer_b=_text(row, columns.index["answer_b"]),
                label=label,
                category=_cell(row, columns.index.get("category")) or None,
            ))
            votes = [
                vote
                for judge, parts in columns.judges.items()
                if (vote := _vote(judge, row, parts, columns.names, path, line)) is not None
            ]
        except ValidationError as exc:
            raise from_validation(exc, path, line) from exc
        items.append(JudgedItem(item=item, votes=votes))
    return items
