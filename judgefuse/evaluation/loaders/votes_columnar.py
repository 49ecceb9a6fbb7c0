"""A votes file streamed into arrays (:class:`~judgefuse.evaluation.vote_table.VoteTable`), with
no object per item.

Why: :func:`~.votes.read_votes` validates every line into a :class:`JudgedItem` (pydantic models
for the item and each vote): about 10 KB of memory and 50 us of CPU per item, so 10^6 items
would need ~10 GB before any work starts. Here a block of lines is parsed by orjson and its
records checked a field at a time by a strict fast path that accepts only what the models accept
as they are (exact key sets, exact types: a string, a bool, a number for a number field, values
in range, the consistency rules of a tie or invalid vote) and reads their values straight into
arrays; a block with anything else (a line orjson does not read, a coercion the models would
make, such as ``"0.7"`` for a number, or a fault) is parsed again line by line as before (the
same :func:`~.jsonl.parse_line`: UTF-8 and nesting checked, ``file:line`` on a fault), each
record through the fast path or the models themselves, so the accepted data, the values and every
error message (``file:line: field '...': reason``, exit 2) are :func:`~.votes.read_votes`'s.
The tolerance is the same too: blank lines are skipped, a cut last line (no final newline, not a
whole item) is skipped with a warning and a note, a duplicate id is refused naming its first
line, an id in two files is refused naming the first file. Lines are read in blocks of
:data:`BLOCK_LINES`, each turned into compact arrays as it ends, so memory is the arrays
(about 60 bytes a vote) plus one block's Python objects.

A large JSONL file on a machine with a second core is read in two: its second half by a forked
child meanwhile (:func:`_read_jsonl_halves`; the same table, faults and notes as one reader's).

Parquet files (the optional ``parquet`` extra) are read row by row the same way
(:func:`~.parquet.iter_parquet`: the record a row holds, a fault naming the row).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, compress, islice, repeat
from operator import add, is_not, itemgetter
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson
from numpy.typing import NDArray
from pydantic import ValidationError

from judgefuse.evaluation.forked_rows import ForkedRows, fork_helps
from judgefuse.evaluation.loaders.answers import UndefinedAnswers
from judgefuse.evaluation.loaders.detect import PathsLike, detect_format, load, votes_files
from judgefuse.evaluation.loaders.errors import DatasetError, from_validation
from judgefuse.evaluation.loaders.jsonl import decode_line, parse_line, paused_gc
from judgefuse.evaluation.loaders.parquet import is_parquet, iter_parquet
from judgefuse.evaluation.vote_table import ItemColumns, VoteTable, outcome_code
from judgefuse.fusion.columnar import LETTER_CODES, VoteColumns
from judgefuse.fusion.dawid_skene import vote_games
from judgefuse.json_input import MAX_DEPTH
from judgefuse.judges.types import MAX_CALLS, JudgedItem, JudgeVote, PairwiseItem

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
    if vote.get("calls", 0) > MAX_CALLS:  # the models refuse it, naming the line
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


def _item(record: dict[str, Any], path: Path, number: int, *, fast: bool = True) -> Item:
    """The record's values, by :func:`_fast_item` when ``fast`` and it takes the record, else
    through the models (a fault: their message, naming the line)."""
    quick = _fast_item(record) if fast else None
    if quick is not None:
        return quick
    try:
        return _from_model(JudgedItem.model_validate(record))
    except ValidationError as exc:
        raise from_validation(exc, path, number) from exc


_EMPTY: tuple[()] = ()
_NO_SIGNALS: dict[str, float] = {}
_NO_METADATA: dict[str, Any] = {}
_NO_VOTES: list[Any] = []
_get = dict.get


def _types(values: list[Any]) -> set[type]:
    return set(map(type, values))


def _column(rows: list[dict[str, Any]], key: str, default: Any = None) -> list[Any]:
    """``[row.get(key, default) for row in rows]``, the loop in C (a block's records are checked a
    field at a time: half the read's time was these loops written in Python)."""
    return list(map(_get, rows, repeat(key), repeat(default)))


def _given(values: list[Any]) -> NDArray[np.bool_]:
    """Which values are not None."""
    return np.fromiter(map(is_not, values, repeat(None)), dtype=bool, count=len(values))


def _floats(values: list[Any]) -> NDArray[np.float64] | None:
    """Numbers (ints or floats, None read as NaN) as floats; None for an int too large for a float."""
    try:
        return np.asarray(values, dtype=float)
    except OverflowError:
        return None


def _non_negative_floats(values: list[Any]) -> NDArray[np.float64] | None:
    """Numbers (ints or floats, not bools) >= 0 as floats, else None (a NaN, a string, an int too
    large for a float)."""
    if not _types(values) <= _NUMBER:
        return None
    array = _floats(values)
    return array if array is not None and bool((array >= 0.0).all()) else None


def _fast_block(records: list[Any]) -> dict[str, Any] | None:
    """A block of records' values as columns when the models would take every record exactly as
    it is (the checks of :func:`_fast_item`, made on each field's column at once), else None."""
    if _types(records) != {dict} or not all(map(_RECORD_KEYS.issuperset, records)):
        return None
    items = _column(records, "item")
    if _types(items) != {dict} or not all(map(_ITEM_KEYS.issuperset, items)):
        return None
    ids = _column(items, "id")
    if _types(ids) != {str} or not all(ids):
        return None
    item_keys = set().union(*items)
    for key in ("question", "answer_a", "answer_b"):
        if key in item_keys and _types(_column(items, key, "")) != {str}:
            return None
    labels = _column(items, "label") if "label" in item_keys else [None] * len(items)
    categories = _column(items, "category") if "category" in item_keys else [None] * len(items)
    try:
        if not set(labels) <= _LABEL_VALUES:
            return None
    except TypeError:  # an unhashable label
        return None
    if "tie_label" in item_keys and any(map(is_not, _column(items, "tie_label"), repeat(None))):
        return None
    if not _types(categories) <= {str, type(None)}:
        return None
    metadata = _column(items, "metadata", _NO_METADATA) if "metadata" in item_keys else [_NO_METADATA] * len(items)
    if "metadata" in item_keys and _types(metadata) != {dict}:
        return None
    lists = _column(records, "votes", _NO_VOTES)
    if not _types(lists) <= {list}:
        return None
    votes = list(chain.from_iterable(lists))
    if votes and (_types(votes) != {dict} or not all(map(_VOTE_KEYS.issuperset, votes))):
        return None
    columns = _vote_columns(votes)
    if columns is None:
        return None
    columns["ids"] = ids
    columns["outcome"] = list(map(_CODES.__getitem__, labels))
    columns["category"] = categories
    columns["n_votes"] = list(map(len, lists))
    columns["metadata"] = metadata
    return columns


_LABEL_VALUES = frozenset({None, "A", "B", "tie", "both_bad"})
_CHOICES = frozenset({None, "A", "B", "tie"})
_CHOICE_CODES = {None: 0, "A": 1, "B": 2, "tie": 3}
_CODES = {None: 0, "A": 1, "B": 2, "tie": 3, "both_bad": 4}
_NUMBER = {float, int}
_MAYBE_NUMBER = {float, int, type(None)}


def _vote_columns(votes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The votes' columns (:meth:`_Builder.close_block`'s), or None where a vote needs the models."""
    n = len(votes)
    keys = set().union(*votes) if votes else set()
    judges = _column(votes, "judge")
    modes = _column(votes, "mode")
    if votes and (_types(judges) != {str} or not all(judges) or _types(modes) != {str} or not set(modes) <= _MODES):
        return None
    choices = _column(votes, "choice") if "choice" in keys else [None] * n
    try:
        if not set(choices) <= _CHOICES:
            return None
    except TypeError:
        return None
    ties = _column(votes, "tie", False) if "tie" in keys else [False] * n
    confidence = _column(votes, "confidence") if "confidence" in keys else [None] * n
    p_a = _column(votes, "p_a") if "p_a" in keys else [None] * n
    errors = _column(votes, "error") if "error" in keys else [None] * n
    if (
        not _types(ties) <= {bool}
        or not _types(confidence) <= _MAYBE_NUMBER
        or not _types(p_a) <= _MAYBE_NUMBER
        or not _types(errors) <= {str, type(None)}
    ):
        return None
    for key in _TEXT_FIELDS:
        if key in keys and _types(_column(votes, key, "")) != {str}:
            return None
    calls = _column(votes, "calls", 0) if "calls" in keys else [0] * n
    for key in _COUNT_FIELDS:
        values = calls if key == "calls" else _column(votes, key, 0) if key in keys else []
        if values and (_types(values) != {int} or min(values) < 0):
            return None
    if calls and max(calls) > MAX_CALLS:
        return None
    cost = _column(votes, "cost_usd", 0.0) if "cost_usd" in keys else [0.0] * n
    cost_array = _non_negative_floats(cost)
    if cost_array is None or ("latency_s" in keys and _non_negative_floats(_column(votes, "latency_s", 0.0)) is None):
        return None
    given_conf = _given(confidence)
    given_p = _given(p_a)
    conf = _floats(confidence)
    prob = _floats(p_a)
    if conf is None or prob is None:
        return None
    conf[~given_conf] = 0.0
    if (
        not (((conf >= 0.0) & (conf <= 1.0)) | ~given_conf).all()
        or not (((prob >= 0.0) & (prob <= 1.0)) | ~given_p).all()
    ):
        return None  # (a NaN given fails too)
    code = np.fromiter(map(_CHOICE_CODES.__getitem__, choices), dtype=np.int8, count=n)
    letter = (code == 1) | (code == 2)
    says_a = code == 1
    tie = (code == 3) | np.asarray(ties, dtype=bool)
    error = _given(errors)
    # the models' consistency rules (JudgeVote._consistent): anything else goes to them
    if (tie & (letter | given_conf | error | (given_p & (prob != 0.5)))).any():
        return None
    if (~letter & given_conf).any() or (letter & ~given_conf).any():
        return None
    prob = np.where(given_p, prob, np.where(tie, 0.5, np.where(letter, np.where(says_a, conf, 1.0 - conf), math.nan)))
    game_1 = np.where(letter, np.where(says_a, LETTER_CODES["A"], LETTER_CODES["B"]), 0).astype(np.int8)
    game_2 = np.zeros(n, dtype=np.int8)
    signals: list[tuple[int, str, float]] = []
    special: set[int] = set()
    for key, kind in (("samples", list), ("signals", dict), ("notes", list)):
        if key in keys:
            values = _column(votes, key, kind())
            if _types(values) != {kind}:
                return None
            special.update(compress(range(n), values))  # the votes where it is not empty
    for at in sorted(special):
        vote = votes[at]
        samples, found, notes = vote.get("samples", _EMPTY), vote.get("signals", _NO_SIGNALS), vote.get("notes", _EMPTY)
        if (
            any(s is not None and s != "A" and s != "B" for s in samples)
            or any(type(v) not in _NUMBER or not math.isfinite(v) for v in found.values())
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
        "cost": cost_array, "calls": np.asarray(calls, dtype=np.int64), "game_1": game_1,
        "game_2": game_2, "signals": signals,
    }  # fmt: skip


_SHAREABLE = frozenset({str, int, float, bool})
"""Metadata values the builder shares between items (hashable scalars; anything else is kept as it is)."""

_ARRAYS = ("judge", "valid", "says_a", "tie", "confidence", "p_a", "cost", "calls", "game_1", "game_2")
"""A block's vote columns, in the order of a :data:`Vote`'s values."""


def _codes(names: list[str | None], codes: dict[str, int]) -> NDArray[np.int32]:
    """Each name's code in ``codes``, a new name given the next code in order of first appearance
    (None is ``""``)."""
    lookup = {name: codes.setdefault("" if name is None else name, len(codes)) for name in dict.fromkeys(names)}
    return np.fromiter(map(lookup.__getitem__, names), dtype=np.int32, count=len(names))


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
            column = _column(list(found), name)
            if _types(column) == {str}:  # the common case (systems' names), one lookup per distinct value
                first = {value: shared.setdefault((str, value), value) for value in dict.fromkeys(column)}
                values.extend(map(first.__getitem__, column))
                continue
            for value in column:
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
        arrays = {name: block[name] for name in _ARRAYS[1:]}
        arrays["judge"] = _codes(block["judge_names"], self.judges)
        arrays["n_votes"] = np.asarray(block["n_votes"], dtype=np.int64)
        self._signals(
            arrays, [(at, self.keys.setdefault(key, len(self.keys)), value) for at, key, value in block["signals"]]
        )
        self.blocks.append(arrays)
        self.outcome.append(np.asarray(block["outcome"], dtype=np.int8))
        self.category.append(_codes(block["category"], self.categories))

    def absorb(self, later: _Builder) -> None:
        """Append the items another builder read from the lines after these (the second half of a
        file): its codes renumbered into this builder's, new names coded in their order of first
        appearance there, as if this builder had read its lines too."""
        self.close_block()
        later.close_block()
        judges = np.asarray([self.judges.setdefault(name, len(self.judges)) for name in later.judges], dtype=np.int32)
        keys = np.asarray([self.keys.setdefault(key, len(self.keys)) for key in later.keys], dtype=np.int64)
        categories = [self.categories.setdefault(name, len(self.categories)) for name in later.categories]
        for block in later.blocks:
            block["judge"] = judges[block["judge"]] if block["judge"].size else block["judge"]
            block["signal_key"] = keys[block["signal_key"]] if block["signal_key"].size else block["signal_key"]
        self.blocks.extend(later.blocks)
        self.outcome.extend(later.outcome)
        self.category.extend(np.asarray(categories, dtype=np.int32)[codes] for codes in later.category)
        self.ids.extend(later.ids)
        for name, values in self.metadata.items():
            values.extend(later.metadata[name])

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
        targets: tuple[np.ndarray, ...] = (
            judge, valid, says_a, tie, confidence, p_a, vote_cost, vote_calls, games[:, :, 0], games[:, :, 1],
        )  # fmt: skip
        start = 0
        for block in self.blocks:
            counts = block["n_votes"]
            if counts.size and bool((counts == k).all()):  # every item has k votes: its rows, in order
                full = slice(start, start + counts.size)
                for target, name in zip(targets, _ARRAYS, strict=True):
                    target[full] = block[name].reshape(counts.size, k)
                present[full] = True
                where = block["signal_vote"]
                signal_rows, signal_slots = start + where // k, where % k
            else:
                rows = start + np.repeat(np.arange(counts.size), counts)
                firsts = np.cumsum(counts) - counts
                slots = np.arange(rows.size) - np.repeat(firsts, counts)
                for target, name in zip(targets, _ARRAYS, strict=True):
                    target[rows, slots] = block[name]
                present[rows, slots] = True
                signal_rows, signal_slots = rows[block["signal_vote"]], slots[block["signal_vote"]]
            for key_index in np.unique(block["signal_key"]).tolist():
                mine = block["signal_key"] == key_index
                signals[names[key_index]][signal_rows[mine], signal_slots[mine]] = block["signal_value"][mine]
            start += counts.size
        self.blocks = []
        cost = columns.cost_usd
        for s in range(k):  # each item's votes added in order, as the per-item sum adds them
            cost[:] = np.where(present[:, s], cost + vote_cost[:, s], cost)
        columns.calls[:] = vote_calls.sum(axis=1)
        outcome = np.concatenate(self.outcome) if self.outcome else np.zeros(0, dtype=np.int8)
        category = np.concatenate(self.category) if self.category else np.zeros(0, dtype=np.int32)
        return VoteTable(ItemColumns(self.ids, outcome, category, tuple(self.categories), self.metadata), columns)


def _read_jsonl(
    path: Path,
    builder: _Builder,
    first_line: dict[str, int],
    notes: list[str] | None,
    *,
    start: int = 0,
    end: int | None = None,
    first: int = 1,
) -> None:
    """Every line of a JSONL votes file into ``builder``, :data:`BLOCK_LINES` lines at a time,
    faults raised in line order as :func:`~.votes.read_votes` raises them (blank lines skipped, a
    cut last line skipped with a note). ``start`` and ``end``: the bytes read (each the start of a
    line; ``end`` None for the file's end), ``first`` the number of the line at ``start``."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise DatasetError(path, f"cannot open: {exc.strerror or exc}") from exc
    with handle:
        handle.seek(start)
        source = handle if end is None else _lines_before(handle, end - start)
        while lines := list(islice(source, BLOCK_LINES)):
            numbers = range(first, first + len(lines))
            first += len(lines)
            last = lines[-1]
            if not last.endswith(b"\n"):  # the file's last line, without a final newline: whole, or cut by a crash
                lines.pop()
            block = list(zip(numbers, lines, strict=False))  # (one line fewer without the last)
            if any(map(bytes.isspace, lines)):  # blank lines (a line here is never empty: it has its newline)
                block = [(number, raw) for number, raw in block if not raw.isspace()]
            _add_lines(block, path, builder, first_line)
            if not last.endswith(b"\n"):
                if last.strip():
                    _read_tail(last, numbers[-1], path, builder, first_line, notes)
                break


def _lines_before(handle: BinaryIO, size: int) -> Iterator[bytes]:
    """The handle's lines in its next ``size`` bytes (which end with a line)."""
    for line in handle:
        yield line
        size -= len(line)
        if size <= 0:
            return


SPLIT_MIN_BYTES = 64 * 2**20
"""A JSONL file from which its second half is read in a forked child (:func:`_read_jsonl_halves`)."""

_SECOND_HALF = "second half"


@dataclass
class _Half:
    """What the child read of a file's second half: its items, their lines, its notes."""

    builder: _Builder
    first_line: dict[str, int]
    notes: list[str]


def _read_jsonl_halves(
    path: Path, builder: _Builder, first_line: dict[str, int], notes: list[str] | None, jobs: int | None
) -> None:
    """:func:`_read_jsonl`, a large file's second half read by a forked child meanwhile
    (:mod:`~judgefuse.evaluation.forked_rows`; about half the wall time on two cores).

    The same table, faults and notes as one reader's: the halves' arrays are joined in order,
    with the child's judge, category and signal codes renumbered in order of first appearance;
    where the child met anything but clean lines (a fault: it raised) or an id of the first
    half, this process reads the second half itself, after the first, so the fault raised is
    the first in line order with one reader's message."""
    split = _split_offset(path, jobs)
    if split is None:
        _read_jsonl(path, builder, first_line, notes)
        return

    def second_half(_name: str) -> _Half:
        half, lines, found = _Builder(tuple(builder.metadata)), dict[str, int](), list[str]()
        _read_jsonl(path, half, lines, found, start=split, first=_count_lines(path, split) + 1)
        half.close_block()
        return _Half(half, lines, found)

    with ForkedRows([_SECOND_HALF], second_half) as child:
        _read_jsonl(path, builder, first_line, notes, end=split)
        got = child.from_child(_SECOND_HALF)
    if got is None or not first_line.keys().isdisjoint(got[0].first_line):
        _read_jsonl(path, builder, first_line, notes, start=split, first=_count_lines(path, split) + 1)
        return
    half = got[0]
    builder.absorb(half.builder)
    first_line.update(half.first_line)
    for note in half.notes:  # the child logs nothing
        log.warning(note)
        if notes is not None:
            notes.append(note)


def _split_offset(path: Path, jobs: int | None) -> int | None:
    """Where a file's second half starts (the line after its middle byte), when it is read in two
    (:func:`~judgefuse.evaluation.forked_rows.fork_helps`, :data:`SPLIT_MIN_BYTES`); else None."""
    try:
        size = path.stat().st_size
        if not fork_helps(size >= SPLIT_MIN_BYTES, jobs) or size < 2:
            return None
        with path.open("rb") as handle:
            handle.seek(size // 2)
            handle.readline()
            split = handle.tell()
    except OSError:
        return None  # one reader says what is wrong with the file
    return split if split < size else None


def _count_lines(path: Path, end: int) -> int:
    """The lines in a file's first ``end`` bytes (which end with a line)."""
    count = 0
    with path.open("rb") as handle:
        while end > 0 and (chunk := handle.read(min(end, 2**24))):
            count += chunk.count(b"\n")
            end -= len(chunk)
    return count


def _add_lines(block: list[tuple[int, bytes]], path: Path, builder: _Builder, first_line: dict[str, int]) -> None:
    """A block of lines (line number, bytes with the final newline) into ``builder``.

    The common case at once: every line UTF-8 text that is one JSON object of few brackets, read
    by orjson (a third of the time of the standard library's decoder, and without its per-call
    overhead), every record as the models would take it (:func:`_fast_block`), no id repeated,
    and the metadata kept the same values either decoder gives. Anything else (a fault, a record
    the models coerce or refuse, a NaN, a number the two decoders read apart: orjson reads an
    integer past 64 bits as a float) reads the block again with :func:`_parse`, the standard
    library's decoder, line by line as before: the same values, and every fault and message, in
    line order."""
    if not block:
        return
    lines = [raw for _, raw in block]
    records = _quick_records(lines)
    if records is not None:
        columns = _fast_block(records)
        if (
            columns is not None
            and _same_metadata(columns["metadata"], builder.metadata)
            and (_flat_metadata(columns["metadata"]) or _few_brackets(lines))
            and _claim_ids(columns["ids"], block, first_line)
        ):
            builder.add_block(columns)
            return
    parsed: list[tuple[int, Any]] = []
    models_only: set[int] = set()
    for number, raw in block:
        try:
            parsed.append((number, _parse(raw[:-1], path, number)))
        except DatasetError:
            _add_block(parsed, path, builder, first_line, models_only)  # a fault on an earlier line is reported first
            raise
        if not _orjson_reads(raw):
            models_only.add(number)
    _add_block(parsed, path, builder, first_line, models_only)


def _orjson_reads(line: bytes) -> bool:
    """Whether orjson reads the line. One it refuses that the standard library reads (a NaN or an
    Infinity, a number past a float's range, a lone surrogate escape) goes to the models: the fast
    paths take only what both decoders read (the models refuse a lone surrogate in a string)."""
    try:
        orjson.loads(line if line.isascii() else line.decode())
    except ValueError:
        return False
    return True


def _quick_records(lines: list[bytes]) -> list[Any] | None:
    """Each line's JSON value read by orjson, or None when a line is not UTF-8 (as Python decodes
    it) or is not one JSON value orjson reads. (Nesting: see :func:`_flat_metadata`.)"""
    try:
        if all(map(bytes.isascii, lines)):
            return list(map(orjson.loads, lines))
        return list(map(orjson.loads, map(bytes.decode, lines)))
    except ValueError:  # orjson.JSONDecodeError and UnicodeDecodeError are both ValueErrors
        return None


def _flat_metadata(found: list[dict[str, Any]]) -> bool:
    """Whether no item's metadata holds an array or an object. A record :func:`_fast_block` takes
    nests deeper than four levels only inside its metadata (every other field is a scalar, a list
    of scalars or an object of numbers), so then no line nests past :data:`MAX_DEPTH` and its
    brackets need no counting."""
    return not _types(list(chain.from_iterable(map(dict.values, found)))) & {list, dict}


def _few_brackets(lines: list[bytes]) -> bool:
    """Whether no line has more brackets than the nesting bound (:func:`~.jsonl.parse_line`'s first check)."""
    brackets = map(add, map(bytes.count, lines, repeat(b"[")), map(bytes.count, lines, repeat(b"{")))
    return max(brackets, default=0) <= MAX_DEPTH


_EXACT_METADATA = frozenset({str, int, bool, type(None)})


def _same_metadata(found: list[dict[str, Any]], names: Iterable[str]) -> bool:
    """Whether the metadata fields kept (``names``) hold values both decoders read alike: strings,
    integers, booleans, null, and floats below 2^63 (an integer literal past 64 bits is a float to
    orjson); a list or an object is left to the standard library's decoder too."""
    for name in names:
        values = _column(found, name)
        kinds = _types(values)
        if not kinds <= _EXACT_METADATA | {float}:
            return False
        if float in kinds and not all(abs(value) < 2.0**63 for value in values if type(value) is float):
            return False
    return True


def _claim_ids(ids: list[str], block: Sequence[tuple[int, Any]], first_line: dict[str, int]) -> bool:
    """Record the block's ids at their lines when none of them was seen before, in this block or
    an earlier one; else change nothing and say so."""
    if any(map(first_line.__contains__, ids)):
        return False
    unique = len(first_line)
    first_line.update(zip(ids, map(itemgetter(0), block), strict=True))
    if len(first_line) == unique + len(block):
        return True
    for item_id in ids:  # a repeated id within the block: undo
        first_line.pop(item_id, None)
    return False


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
        item = _item(parse_line(decode_line(raw, path, number), path, number), path, number, fast=_orjson_reads(raw))
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


def _add_block(
    block: list[tuple[int, Any]],
    path: Path,
    builder: _Builder,
    first_line: dict[str, int],
    models_only: Collection[int] = (),
) -> None:
    """Records (line number, parsed record) into ``builder``: as columns at once when every
    record is as the models would take it and no id repeats, else one by one through
    :func:`_item` (a fault raised for the first bad line); the lines ``models_only`` names go
    through the models."""
    if not block:
        return
    columns = None if models_only else _fast_block([record for _, record in block])
    if columns is not None and _claim_ids(columns["ids"], block, first_line):
        builder.add_block(columns)
        return
    for number, record in block:
        item = _item(record, path, number, fast=number not in models_only)
        _check_id(item[0], number, path, first_line)
        builder.add(item)


def read_vote_table(
    paths: Sequence[str | Path],
    *,
    notes: list[str] | None = None,
    metadata: Sequence[str] = (),
    jobs: int | None = None,
) -> VoteTable:
    """The items of votes files (JSONL or Parquet, by suffix) in order, as arrays (module
    docstring), with the ``metadata`` fields named; every fault a :class:`DatasetError` as
    :func:`~.detect.load` raises it. ``jobs``: 1 reads in this process alone; 2 or more reads
    each JSONL file's second half in a forked child; None does so for a large file on a machine
    with a second core (:func:`_read_jsonl_halves`: the same table)."""
    builder = _Builder(metadata)
    where: dict[str, Path] = {}
    with paused_gc():  # the parsed records form no cycles: the collector's passes over them were a tenth of the read
        for path in (Path(p) for p in paths):
            _read_file(path, builder, where, notes, jobs)
    table = builder.table()
    del builder
    release_freed_memory()
    return table


def _read_file(
    path: Path, builder: _Builder, where: dict[str, Path], notes: list[str] | None, jobs: int | None
) -> None:
    """One votes file into ``builder``; ``where`` holds the file each id of the earlier files is in."""
    first_line: dict[str, int] = {}
    if is_parquet(path):
        for number, record in iter_parquet(path):
            item = _item(record, path, number)
            _check_id(item[0], number, path, first_line)
            builder.add(item)
    else:
        _read_jsonl_halves(path, builder, first_line, notes, jobs)
    for item_id in first_line:  # an id in an earlier file: load() checks after the file is read
        if item_id in where:
            raise DatasetError(path, f"item {item_id!r} is also in {where[item_id]}", field="item.id")
    where.update(dict.fromkeys(first_line, path))


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
    jobs: int | None = None,
) -> VoteTable:
    """:func:`~.detect.load` as a table, with the items' ``metadata`` fields named: votes files
    streamed (:func:`read_vote_table`, ``jobs`` as there), every other format loaded as judged
    items and made into arrays."""
    path_list = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    fmt = detect_format(path_list) if format is None else format
    if fmt != "votes":
        return VoteTable.from_items(load(path_list, format=fmt, answers=answers), metadata=metadata)
    return read_vote_table(votes_files(path_list), metadata=metadata, jobs=jobs)
