"""A votes file streamed into arrays (:class:`~judgefuse.evaluation.vote_table.VoteTable`), with
no object per item.

Why: :func:`~.votes.read_votes` validates every line into a :class:`JudgedItem` (pydantic models
for the item and each vote): about 10 KB of memory and 50 us of CPU per item, so 10^6 items
would need ~10 GB before any work starts. Here each line is parsed (the same
:func:`~.jsonl.parse_line`: UTF-8 and nesting checked, ``file:line`` on a fault) and its record
checked by a strict fast path that accepts only what the models accept as they are (exact key
sets, exact types: a string, a bool, a number for a number field, values in range, the
consistency rules of a tie or invalid vote) and reads its values straight into column buffers;
any record the fast path does not take (a coercion the models would make, such as ``"0.7"`` for a
number, or a fault) goes through the models themselves, so the accepted data, the values and every
error message (``file:line: field '...': reason``, exit 2) are :func:`~.votes.read_votes`'s.
The tolerance is the same too: blank lines are skipped, a cut last line (no final newline, not a
whole item) is skipped with a warning and a note, a duplicate id is refused naming its first
line, an id in two files is refused naming the first file. Lines are read in blocks of
:data:`BLOCK_LINES`, each turned into compact arrays as it ends, so memory is the arrays
(about 60 bytes a vote) plus one block's Python objects.

Parquet files (the optional ``parquet`` extra) are read row by row the same way
(:func:`~.parquet.iter_parquet`: the record a row holds, a fault naming the row).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from judgefuse.evaluation.loaders.answers import UndefinedAnswers
from judgefuse.evaluation.loaders.detect import PathsLike, detect_format, load, votes_files
from judgefuse.evaluation.loaders.errors import DatasetError, from_validation
from judgefuse.evaluation.loaders.jsonl import decode_line, parse_line
from judgefuse.evaluation.loaders.parquet import is_parquet, iter_parquet
from judgefuse.evaluation.vote_table import ItemColumns, VoteTable, outcome_code
from judgefuse.fusion.columnar import LETTER_CODES, VoteColumns
from judgefuse.fusion.dawid_skene import vote_games
from judgefuse.json_input import MAX_DEPTH
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem

log = logging.getLogger(__name__)

__all__ = ["BLOCK_LINES", "load_table", "read_vote_table"]

BLOCK_LINES = 16384
"""Lines read into Python objects at once before they become arrays."""

_RECORD_KEYS = frozenset({"item", "votes"})
_ITEM_KEYS = frozenset(PairwiseItem.model_fields)
_VOTE_KEYS = frozenset(JudgeVote.model_fields)
_MODES = frozenset({"sc", "mp", "logprob", "recorded"})
_LABELS = frozenset({"A", "B", "tie", "both_bad"})
_TEXT_FIELDS = ("explanation", "raw")
_COUNT_FIELDS = ("prompt_tokens", "completion_tokens", "calls")

Vote = tuple[str, bool, bool, bool, float, float, float, int, int, int, dict[str, float]]
"""A vote as the columns take it: judge, valid, says A, tie, confidence (0 without a choice),
p_a (NaN without one), cost, calls, its two Dawid-Skene games (codes), signals."""
Item = tuple[str, int, str, list[Vote], dict[str, Any]]
"""An item as the columns take it: id, outcome code, category ("" for none), votes, metadata (the
builder keeps the fields it was asked for: :class:`~judgefuse.evaluation.vote_table.ItemColumns`'s
``metadata``)."""


def _unit(value: Any) -> bool:
    """A number in [0, 1] as the models take it as it is (an int or a float, not a bool)."""
    return type(value) in (float, int) and 0.0 <= value <= 1.0


def _non_negative(value: Any) -> bool:
    return type(value) in (float, int) and value >= 0.0


def _fast_vote(vote: Any) -> Vote | None:
    """The vote's values when the models would take it exactly as it is, else None."""
    if type(vote) is not dict or not _VOTE_KEYS.issuperset(vote):
        return None
    judge = vote.get("judge")
    mode = vote.get("mode")
    if type(judge) is not str or not judge or type(mode) is not str or mode not in _MODES:
        return None
    choice = vote.get("choice")
    tie = vote.get("tie", False)
    if type(tie) is not bool:
        return None
    if choice == "tie":
        choice, tie = None, True
    elif choice is not None and choice != "A" and choice != "B":
        return None
    confidence = vote.get("confidence")
    p_a = vote.get("p_a")
    error = vote.get("error")
    if (confidence is not None and not _unit(confidence)) or (p_a is not None and not _unit(p_a)):
        return None
    if error is not None and type(error) is not str:
        return None
    if tie:
        if choice is not None or confidence is not None or error is not None:
            return None
        if p_a is None:
            p_a = 0.5
        elif p_a != 0.5:
            return None
    if choice is None:
        if confidence is not None:
            return None
    elif confidence is None:
        return None
    elif p_a is None:
        p_a = confidence if choice == "A" else 1.0 - confidence
    for key in _TEXT_FIELDS:
        if key in vote and type(vote[key]) is not str:
            return None
    for key in _COUNT_FIELDS:
        if key in vote and (type(vote[key]) is not int or vote[key] < 0):
            return None
    cost = vote.get("cost_usd", 0.0)
    if not _non_negative(cost) or ("latency_s" in vote and not _non_negative(vote["latency_s"])):
        return None
    samples = vote.get("samples", ())
    signals = vote.get("signals", {})
    notes = vote.get("notes", ())
    if type(samples) not in (list, tuple) or any(s is not None and s != "A" and s != "B" for s in samples):
        return None
    if type(signals) is not dict or any(type(v) not in (float, int) or not math.isfinite(v) for v in signals.values()):
        return None
    if type(notes) not in (list, tuple) or any(type(note) is not str for note in notes):
        return None
    if samples or "position_inconsistent" in signals:
        games = vote_games(mode, samples, signals, choice)
    else:
        games = [choice] if choice is not None else []
    first = LETTER_CODES[games[0]] if games else 0
    second = LETTER_CODES[games[1]] if len(games) > 1 else 0
    return (
        judge, choice is not None, choice == "A", tie, float(confidence or 0.0),
        math.nan if p_a is None else float(p_a), float(cost), vote.get("calls", 0), first, second,
        {key: float(value) for key, value in signals.items()},
    )  # fmt: skip


def _fast_item(record: Any) -> Item | None:
    """The record's values when the models would take it exactly as it is, else None."""
    if type(record) is not dict or not _RECORD_KEYS.issuperset(record):
        return None
    item = record.get("item")
    if type(item) is not dict or not _ITEM_KEYS.issuperset(item):
        return None
    item_id = item.get("id")
    if type(item_id) is not str or not item_id:
        return None
    for key in ("question", "answer_a", "answer_b"):
        if key in item and type(item[key]) is not str:
            return None
    label = item.get("label")
    category = item.get("category")
    if (label is not None and (type(label) is not str or label not in _LABELS)) or item.get("tie_label") is not None:
        return None
    if (category is not None and type(category) is not str) or type(item.get("metadata", {})) is not dict:
        return None
    votes = record.get("votes", [])
    if type(votes) is not list:
        return None
    out = []
    for vote in votes:
        parsed = _fast_vote(vote)
        if parsed is None:
            return None
        out.append(parsed)
    return item_id, outcome_code(label), category or "", out, item.get("metadata", _NO_METADATA)


def _from_model(judged: JudgedItem) -> Item:
    """The same values from a validated item (a record the fast path left to the models)."""
    votes: list[Vote] = []
    for vote in judged.votes:
        games = vote_games(vote.mode, vote.samples, vote.signals, vote.choice)
        votes.append((
            vote.judge, vote.choice is not None, vote.choice == "A", vote.tie,
            float(vote.confidence or 0.0) if vote.choice is not None else 0.0,
            math.nan if vote.p_a is None else vote.p_a, vote.cost_usd, vote.calls,
            LETTER_CODES[games[0]] if games else 0, LETTER_CODES[games[1]] if len(games) > 1 else 0,
            dict(vote.signals),
        ))  # fmt: skip
    return judged.item.id, outcome_code(judged.item.outcome), judged.item.category or "", votes, judged.item.metadata


def _item(record: dict[str, Any], path: Path, number: int) -> Item:
    fast = _fast_item(record)
    if fast is not None:
        return fast
    try:
        return _from_model(JudgedItem.model_validate(record))
    except ValidationError as exc:
        raise from_validation(exc, path, number) from exc


_EMPTY: tuple[()] = ()
_NO_SIGNALS: dict[str, float] = {}
_NO_METADATA: dict[str, Any] = {}


def _types(values: list[Any]) -> set[type]:
    return set(map(type, values))


def _fast_block(records: list[Any]) -> dict[str, Any] | None:
    """A block of records' values as columns when the models would take every record exactly as
    it is (the checks of :func:`_fast_item`, made on each field's column at once), else None."""
    if _types(records) != {dict} or not all(map(_RECORD_KEYS.issuperset, records)):
        return None
    items = [record.get("item") for record in records]
    if _types(items) != {dict} or not all(map(_ITEM_KEYS.issuperset, items)):
        return None
    ids = [item.get("id") for item in items]
    if _types(ids) != {str} or not all(ids):
        return None
    item_keys = set().union(*items)
    for key in ("question", "answer_a", "answer_b"):
        if key in item_keys and _types([item.get(key, "") for item in items]) != {str}:
            return None
    labels = [item.get("label") for item in items]
    categories = [item.get("category") for item in items]
    try:
        if not set(labels) <= _LABEL_VALUES:
            return None
    except TypeError:  # an unhashable label
        return None
    if "tie_label" in item_keys and any(item.get("tie_label") is not None for item in items):
        return None
    if not _types(categories) <= {str, type(None)}:
        return None
    if "metadata" in item_keys and _types([item.get("metadata", _NO_SIGNALS) for item in items]) != {dict}:
        return None
    lists = [record.get("votes", []) for record in records]
    if not _types(lists) <= {list}:
        return None
    votes = list(chain.from_iterable(lists))
    if votes and (_types(votes) != {dict} or not all(map(_VOTE_KEYS.issuperset, votes))):
        return None
    columns = _vote_columns(votes)
    if columns is None:
        return None
    columns["ids"] = ids
    columns["outcome"] = [_CODES[label] for label in labels]
    columns["category"] = [category or "" for category in categories]
    columns["n_votes"] = list(map(len, lists))
    columns["metadata"] = [item.get("metadata", _NO_METADATA) for item in items]
    return columns


_LABEL_VALUES = frozenset({None, "A", "B", "tie", "both_bad"})
_CHOICES = frozenset({None, "A", "B", "tie"})
_CODES = {None: 0, "A": 1, "B": 2, "tie": 3, "both_bad": 4}
_NUMBER = {float, int}
_MAYBE_NUMBER = {float, int, type(None)}


def _vote_columns(votes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The votes' columns (:meth:`_Builder.close_block`'s), or None where a vote needs the models."""
    keys = set().union(*votes) if votes else set()
    judges = [vote.get("judge") for vote in votes]
    modes = [vote.get("mode") for vote in votes]
    if votes and (_types(judges) != {str} or not all(judges) or _types(modes) != {str} or not set(modes) <= _MODES):
        return None
    choices = [vote.get("choice") for vote in votes]
    try:
        if not set(choices) <= _CHOICES:
            return None
    except TypeError:
        return None
    ties = [vote.get("tie", False) for vote in votes] if "tie" in keys else [False] * len(votes)
    confidence = [vote.get("confidence") for vote in votes]
    p_a = [vote.get("p_a") for vote in votes] if "p_a" in keys else [None] * len(votes)
    errors = [vote.get("error") for vote in votes] if "error" in keys else [None] * len(votes)
    if (
        not _types(ties) <= {bool}
        or not _types(confidence) <= _MAYBE_NUMBER
        or not _types(p_a) <= _MAYBE_NUMBER
        or not _types(errors) <= {str, type(None)}
    ):
        return None
    for key in _TEXT_FIELDS:
        if key in keys and _types([vote.get(key, "") for vote in votes]) != {str}:
            return None
    calls = [vote.get("calls", 0) for vote in votes] if "calls" in keys else [0] * len(votes)
    for key in _COUNT_FIELDS:
        values = calls if key == "calls" else [vote.get(key, 0) for vote in votes] if key in keys else []
        if values and (_types(values) != {int} or min(values) < 0):
            return None
    cost = [vote.get("cost_usd", 0.0) for vote in votes] if "cost_usd" in keys else [0.0] * len(votes)
    for values in (cost, [vote.get("latency_s", 0.0) for vote in votes] if "latency_s" in keys else []):
        if values and (not _types(values) <= _NUMBER or not (np.asarray(values, dtype=float) >= 0.0).all()):
            return None  # (a NaN fails too)
    n = len(votes)
    given_conf = np.asarray([c is not None for c in confidence], dtype=bool)
    given_p = np.asarray([v is not None for v in p_a], dtype=bool)
    conf = np.asarray([0.0 if c is None else c for c in confidence], dtype=float)
    prob = np.asarray([math.nan if v is None else v for v in p_a], dtype=float)
    if (
        not (((conf >= 0.0) & (conf <= 1.0)) | ~given_conf).all()
        or not (((prob >= 0.0) & (prob <= 1.0)) | ~given_p).all()
    ):
        return None
    letter = np.asarray([c == "A" or c == "B" for c in choices], dtype=bool)
    says_a = np.asarray([c == "A" for c in choices], dtype=bool)
    tie = np.asarray([c == "tie" for c in choices], dtype=bool) | np.asarray(ties, dtype=bool)
    error = np.asarray([e is not None for e in errors], dtype=bool)
    # the models' consistency rules (JudgeVote._consistent): anything else goes to them
    if (tie & (letter | given_conf | error | (given_p & (prob != 0.5)))).any():
        return None
    if (~letter & given_conf).any() or (letter & ~given_conf).any():
        return None
    prob = np.where(given_p, prob, np.where(tie, 0.5, np.where(letter, np.where(says_a, conf, 1.0 - conf), math.nan)))
    game_1 = np.where(letter, np.where(says_a, LETTER_CODES["A"], LETTER_CODES["B"]), 0).astype(np.int8)
    game_2 = np.zeros(n, dtype=np.int8)
    signals: list[tuple[int, str, float]] = []
    for key, kind in (("samples", list), ("signals", dict), ("notes", list)):
        if key in keys and _types([vote.get(key, kind()) for vote in votes]) != {kind}:
            return None
    special = [at for at, vote in enumerate(votes) if vote.get("samples") or vote.get("signals") or vote.get("notes")]
    for at in special:
        vote = votes[at]
        samples, found, notes = vote.get("samples", _EMPTY), vote.get("signals", _NO_SIGNALS), vote.get("notes", _EMPTY)
        if (
            type(samples) is not list
            or any(s is not None and s != "A" and s != "B" for s in samples)
            or type(found) is not dict
            or any(type(v) not in _NUMBER or not math.isfinite(v) for v in found.values())
            or type(notes) is not list
            or any(type(note) is not str for note in notes)
        ):
            return None
        choice = choices[at] if letter[at] else None
        games = vote_games(str(modes[at]), samples, found, choice)
        game_1[at] = LETTER_CODES[games[0]] if games else 0
        game_2[at] = LETTER_CODES[games[1]] if len(games) > 1 else 0
        signals.extend((at, key, float(value)) for key, value in found.items())
    return {
        "judge_names": judges, "valid": letter, "says_a": says_a, "tie": tie, "confidence": conf, "p_a": prob,
        "cost": np.asarray(cost, dtype=float), "calls": np.asarray(calls, dtype=np.int64), "game_1": game_1,
        "game_2": game_2, "signals": signals,
    }  # fmt: skip


_SHAREABLE = frozenset({str, int, float, bool})
"""Metadata values the builder shares between items (hashable scalars; anything else is kept as it is)."""

_ARRAYS = ("judge", "valid", "says_a", "tie", "confidence", "p_a", "cost", "calls", "game_1", "game_2")
"""A block's vote columns, in the order of a :data:`Vote`'s values."""


class _Builder:
    """Items appended one by one, turned into arrays a block at a time, then into a table; of
    each item's metadata, the fields ``metadata`` names (values shared where equal: a field
    naming one of a few systems costs a reference per item)."""

    def __init__(self, metadata: Sequence[str] = ()) -> None:
        self.metadata: dict[str, list[Any]] = {name: [] for name in metadata}
        self._shared: dict[tuple[type, Any], Any] = {}
        self.ids: list[str] = []
        self.outcome: list[np.ndarray] = []
        self.category: list[np.ndarray] = []
        self.categories: dict[str, int] = {"": 0}
        self.judges: dict[str, int] = {}
        self.keys: dict[str, int] = {}
        self.blocks: list[dict[str, np.ndarray]] = []
        self._reset()

    def _reset(self) -> None:
        self.block_outcome: list[int] = []
        self.block_category: list[int] = []
        self.n_votes: list[int] = []
        self.flat: list[Vote] = []
        self.signals: list[tuple[int, int, float]] = []

    def _keep_metadata(self, found: Sequence[dict[str, Any]]) -> None:
        shared = self._shared
        for name, values in self.metadata.items():
            for value in (metadata.get(name) for metadata in found):
                if type(value) in _SHAREABLE:  # keyed by type too: 1, 1.0 and True are equal keys
                    value = shared.setdefault((type(value), value), value)
                values.append(value)

    def add(self, item: Item) -> None:
        item_id, outcome, category, votes, metadata = item
        if self.metadata:
            self._keep_metadata((metadata,))
        self.ids.append(item_id)
        self.block_outcome.append(outcome)
        self.block_category.append(self.categories.setdefault(category, len(self.categories)))
        self.n_votes.append(len(votes))
        self.flat.extend(votes)
        if len(self.block_outcome) >= BLOCK_LINES:
            self.close_block()

    def add_block(self, block: dict[str, Any]) -> None:
        """A block's columns from :func:`_fast_block` (items added one by one go first)."""
        self.close_block()
        if self.metadata:
            self._keep_metadata(block["metadata"])
        self.ids.extend(block["ids"])
        judges = self.judges
        arrays = {name: block[name] for name in _ARRAYS[1:]}
        arrays["judge"] = np.asarray(
            [judges.setdefault(name, len(judges)) for name in block["judge_names"]], dtype=np.int32
        )  # in order of first appearance
        arrays["n_votes"] = np.asarray(block["n_votes"], dtype=np.int64)
        self._signals(
            arrays, [(at, self.keys.setdefault(key, len(self.keys)), value) for at, key, value in block["signals"]]
        )
        self.blocks.append(arrays)
        self.outcome.append(np.asarray(block["outcome"], dtype=np.int8))
        categories = self.categories
        self.category.append(
            np.asarray([categories.setdefault(name, len(categories)) for name in block["category"]], dtype=np.int32)
        )

    @staticmethod
    def _signals(block: dict[str, np.ndarray], found: list[tuple[int, int, float]]) -> None:
        signals = np.asarray(found, dtype=float).reshape(-1, 3)
        block["signal_vote"], block["signal_key"], block["signal_value"] = (
            signals[:, 0].astype(np.int64), signals[:, 1].astype(np.int64), signals[:, 2],
        )  # fmt: skip

    def close_block(self) -> None:
        if not self.block_outcome:
            return
        columns: list[Any] = list(zip(*self.flat, strict=True)) if self.flat else [()] * 11
        judges = self.judges
        columns[0] = [judges.setdefault(name, len(judges)) for name in columns[0]]  # in order of first appearance
        for at, vote in enumerate(self.flat):
            if vote[10]:
                for key, value in vote[10].items():
                    self.signals.append((at, self.keys.setdefault(key, len(self.keys)), value))
        dtypes = (np.int32, bool, bool, bool, float, float, float, np.int64, np.int8, np.int8)
        block = {
            name: np.asarray(values, dtype=dtype) for name, values, dtype in zip(_ARRAYS, columns, dtypes, strict=False)
        }
        block["n_votes"] = np.asarray(self.n_votes, dtype=np.int64)
        self._signals(block, self.signals)
        self.blocks.append(block)
        self.outcome.append(np.asarray(self.block_outcome, dtype=np.int8))
        self.category.append(np.asarray(self.block_category, dtype=np.int32))
        self._reset()

    def table(self) -> VoteTable:
        self.close_block()
        n = len(self.ids)
        k = max((int(block["n_votes"].max(initial=0)) for block in self.blocks), default=0)
        columns = VoteColumns.empty(n, k, tuple(self.judges), tuple(self.keys))
        present, valid, says_a, tie, confidence, p_a = (
            columns.present, columns.valid, columns.says_a, columns.tie, columns.confidence, columns.p_a,
        )  # fmt: skip
        judge, vote_cost, vote_calls, games = columns.judge, columns.vote_cost_usd, columns.vote_calls, columns.games
        signals = columns.signals
        names = list(self.keys)
        start = 0
        for block in self.blocks:
            counts = block["n_votes"]
            rows = start + np.repeat(np.arange(counts.size), counts)
            firsts = np.cumsum(counts) - counts
            slots = np.arange(rows.size) - np.repeat(firsts, counts)
            present[rows, slots] = True
            valid[rows, slots] = block["valid"]
            says_a[rows, slots] = block["says_a"]
            tie[rows, slots] = block["tie"]
            confidence[rows, slots] = block["confidence"]
            p_a[rows, slots] = block["p_a"]
            judge[rows, slots] = block["judge"]
            vote_cost[rows, slots] = block["cost"]
            vote_calls[rows, slots] = block["calls"]
            games[rows, slots, 0] = block["game_1"]
            games[rows, slots, 1] = block["game_2"]
            where = block["signal_vote"]
            for key_index in np.unique(block["signal_key"]).tolist():
                mine = block["signal_key"] == key_index
                signals[names[key_index]][rows[where[mine]], slots[where[mine]]] = block["signal_value"][mine]
            start += counts.size
        self.blocks = []
        cost = columns.cost_usd
        for s in range(k):  # each item's votes added in order, as the per-item sum adds them
            cost[:] = np.where(present[:, s], cost + vote_cost[:, s], cost)
        columns.calls[:] = vote_calls.sum(axis=1)
        outcome = np.concatenate(self.outcome) if self.outcome else np.zeros(0, dtype=np.int8)
        category = np.concatenate(self.category) if self.category else np.zeros(0, dtype=np.int32)
        return VoteTable(ItemColumns(self.ids, outcome, category, tuple(self.categories), self.metadata), columns)


def _jsonl_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise DatasetError(path, f"cannot open: {exc.strerror or exc}") from exc
    with handle:
        yield from enumerate(handle, start=1)


def _read_jsonl(path: Path, builder: _Builder, first_line: dict[str, int], notes: list[str] | None) -> None:
    """Every line of a JSONL votes file into ``builder``, faults raised in line order as
    :func:`~.votes.read_votes` raises them (a cut last line skipped)."""
    block: list[tuple[int, Any]] = []
    for number, raw in _jsonl_lines(path):
        if not raw.endswith(b"\n"):  # the last line, without a final newline: whole, or cut by a crash
            _add_block(block, path, builder, first_line)
            block = []
            if raw.strip():
                _read_tail(raw, number, path, builder, first_line, notes)
            break
        try:
            if raw.strip():
                block.append((number, _parse(raw[:-1], path, number)))
        except DatasetError:
            _add_block(block, path, builder, first_line)  # a fault on an earlier line is reported first
            raise
        if len(block) >= BLOCK_LINES:
            _add_block(block, path, builder, first_line)
            block = []
    _add_block(block, path, builder, first_line)


_DECODER = json.JSONDecoder()


def _parse(raw: bytes, path: Path, number: int) -> dict[str, Any]:
    """One line's record, as :func:`~.jsonl.parse_line` reads it. The common case without its
    per-call overhead (a third of the read at 10^5 lines): UTF-8 text that is one JSON object
    from its first character to its last, with few brackets; anything else (leading space, a
    non-object, a fault, a line with more brackets than the nesting bound) is read by
    ``parse_line`` itself, so its value or its error is that function's."""
    try:
        text = raw.decode("utf-8")
        if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
            record, end = _DECODER.raw_decode(text)
            if end == len(text) and type(record) is dict:
                return record
    except (UnicodeDecodeError, ValueError, RecursionError):
        pass
    return parse_line(decode_line(raw, path, number), path, number)


def _read_tail(
    raw: bytes, number: int, path: Path, builder: _Builder, first_line: dict[str, int], notes: list[str] | None
) -> None:
    try:
        item = _item(parse_line(decode_line(raw, path, number), path, number), path, number)
    except DatasetError as exc:
        note = f"{path}:{number}: skipped a cut last line ({len(raw)} bytes, no final newline): {exc.reason}"
        log.warning(note)
        if notes is not None:
            notes.append(note)
        return
    _check_id(item[0], number, path, first_line)
    builder.add(item)


def _check_id(item_id: str, number: int, path: Path, first_line: dict[str, int]) -> None:
    if item_id in first_line:
        raise DatasetError(
            path, f"duplicate item id {item_id!r} (first at line {first_line[item_id]})", line=number, field="item.id"
        )
    first_line[item_id] = number


def _add_block(block: list[tuple[int, Any]], path: Path, builder: _Builder, first_line: dict[str, int]) -> None:
    """Records (line number, parsed record) into ``builder``: as columns at once when every
    record is as the models would take it and no id repeats, else one by one through
    :func:`_item` (a fault raised for the first bad line)."""
    if not block:
        return
    columns = _fast_block([record for _, record in block])
    if columns is not None and not any(item_id in first_line for item_id in columns["ids"]):
        unique = len(first_line)
        first_line.update((item_id, number) for item_id, (number, _) in zip(columns["ids"], block, strict=True))
        if len(first_line) == unique + len(block):
            builder.add_block(columns)
            return
        for item_id, _ in zip(columns["ids"], block, strict=True):  # a repeated id: undo, and go line by line
            first_line.pop(item_id, None)
    for number, record in block:
        item = _item(record, path, number)
        _check_id(item[0], number, path, first_line)
        builder.add(item)


def read_vote_table(
    paths: Sequence[str | Path], *, notes: list[str] | None = None, metadata: Sequence[str] = ()
) -> VoteTable:
    """The items of votes files (JSONL or Parquet, by suffix) in order, as arrays (module
    docstring), with the ``metadata`` fields named; every fault a :class:`DatasetError` as
    :func:`~.detect.load` raises it."""
    builder = _Builder(metadata)
    where: dict[str, Path] = {}
    for path in (Path(p) for p in paths):
        first_line: dict[str, int] = {}
        if is_parquet(path):
            for number, record in iter_parquet(path):
                item = _item(record, path, number)
                _check_id(item[0], number, path, first_line)
                builder.add(item)
        else:
            _read_jsonl(path, builder, first_line, notes)
        for item_id in first_line:  # an id in an earlier file: load() checks after the file is read
            if item_id in where:
                raise DatasetError(path, f"item {item_id!r} is also in {where[item_id]}", field="item.id")
        where.update(dict.fromkeys(first_line, path))
    table = builder.table()
    del builder
    release_freed_memory()
    return table


def release_freed_memory() -> None:
    """Hand the heap's freed pages back to the system (glibc's ``malloc_trim``; nothing elsewhere):
    the parsed lines' Python objects are gone, but glibc keeps their pages, and they would count
    in the process's memory for the rest of the run (about 300 MB at 10^6 items)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def load_table(
    paths: PathsLike,
    *,
    format: str | None = None,
    answers: UndefinedAnswers | None = None,  # noqa: A002
    metadata: Sequence[str] = (),
) -> VoteTable:
    """:func:`~.detect.load` as a table, with the items' ``metadata`` fields named: votes files
    streamed (:func:`read_vote_table`), every other format loaded as judged items and made into
    arrays."""
    path_list = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    fmt = detect_format(path_list) if format is None else format
    if fmt != "votes":
        return VoteTable.from_items(load(path_list, format=fmt, answers=answers), metadata=metadata)
    return read_vote_table(votes_files(path_list), metadata=metadata)
