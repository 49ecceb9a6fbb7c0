"""Judged items as arrays: what the offline tools read of a votes file, without an object per item.

A :class:`VoteTable` is the items' own columns (:class:`ItemColumns`: id, outcome, category) beside
their votes' (:class:`~judgefuse.fusion.columnar.VoteColumns`: items x slots). It is what
:func:`~judgefuse.evaluation.loaders.vote_table.read_vote_table` streams a votes file into and what
:func:`~judgefuse.evaluation.table_eval.evaluate_table` scores; :meth:`VoteTable.from_items` makes
one from judged items (every loader's output), which is how the two paths are compared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from judgefuse.fusion.columnar import Ints, VoteColumns
from judgefuse.judges.types import JudgedItem

__all__ = ["OUTCOMES", "ItemColumns", "VoteTable", "outcome_code"]

OUTCOMES: tuple[str | None, ...] = (None, "A", "B", "tie", "both_bad")
"""What an item's :attr:`ItemColumns.outcome` code means (its label: A or B, or a tie label)."""
UNLABELLED, LABEL_A, LABEL_B, LABEL_TIE, LABEL_BOTH_BAD = range(5)
_CODES = {value: code for code, value in enumerate(OUTCOMES)}


def outcome_code(outcome: str | None) -> int:
    """The code of a label as :attr:`~judgefuse.judges.types.PairwiseItem.outcome` gives it."""
    return _CODES[outcome]


@dataclass(frozen=True)
class ItemColumns:
    """Per item: its id, its outcome code (:data:`OUTCOMES`), its category (``category[i]``
    indexes ``categories``, whose first entry ``""`` stands for no category) and the metadata
    fields the reader was asked for (``metadata[name][i]``: the item's value, None without one;
    ``winrate`` reads the systems' names there)."""

    ids: Sequence[str]
    outcome: NDArray[np.int8]
    category: NDArray[np.int32]
    categories: tuple[str, ...]
    metadata: Mapping[str, Sequence[Any]] = field(default_factory=dict)

    @property
    def n_items(self) -> int:
        return int(self.outcome.size)

    @property
    def decided(self) -> NDArray[np.bool_]:
        """Items labelled A or B."""
        return (self.outcome == LABEL_A) | (self.outcome == LABEL_B)

    @property
    def label_a(self) -> NDArray[np.bool_]:
        return np.asarray(self.outcome == LABEL_A, dtype=bool)

    def outcomes(self, rows: Ints | None = None) -> list[str | None]:
        """The outcomes of ``rows`` (every item) as strings."""
        codes = self.outcome if rows is None else self.outcome[rows]
        return [OUTCOMES[code] for code in codes.tolist()]

    def category_names(self, rows: Ints) -> NDArray[np.str_]:
        """The category of each item at ``rows`` ("" where it has none)."""
        names = np.asarray(self.categories, dtype=str)
        return names[self.category[rows]] if rows.size else np.asarray([], dtype=str)

    @cached_property
    def decided_rows(self) -> Ints:
        """The positions of the items labelled A or B (one array, shared by every method's row)."""
        return np.flatnonzero(self.decided)

    @cached_property
    def decided_categories(self) -> NDArray[np.str_]:
        """:meth:`category_names` of :attr:`decided_rows` (one array, shared by every method's row:
        24 MB a row at 10^6 items)."""
        return self.category_names(self.decided_rows)

    def take(self, rows: Ints) -> ItemColumns:
        index = np.asarray(rows, dtype=np.int64)
        ids, picked = self.ids, index.tolist()
        metadata = {name: [values[i] for i in picked] for name, values in self.metadata.items()}
        return ItemColumns([ids[i] for i in picked], self.outcome[index], self.category[index], self.categories, metadata)

    @classmethod
    def from_items(cls, items: Sequence[JudgedItem], metadata: Sequence[str] = ()) -> ItemColumns:
        categories: dict[str, int] = {"": 0}
        category = np.asarray(
            [categories.setdefault(judged.item.category or "", len(categories)) for judged in items], dtype=np.int32
        )
        outcome = np.asarray([_CODES[judged.item.outcome] for judged in items], dtype=np.int8)
        fields = {name: [judged.item.metadata.get(name) for judged in items] for name in metadata}
        return cls([judged.item.id for judged in items], outcome, category, tuple(categories), fields)


@dataclass(frozen=True)
class VoteTable:
    """Judged items as arrays: the items' columns and their votes' (module docstring)."""

    items: ItemColumns
    votes: VoteColumns

    @property
    def n_items(self) -> int:
        return self.items.n_items

    def take(self, rows: Ints | Sequence[int]) -> VoteTable:
        index = np.asarray(rows, dtype=np.int64)
        return VoteTable(self.items.take(index), self.votes.take(index))

    def head(self, n: int) -> VoteTable:
        """The first ``n`` items (``eval --limit``)."""
        return self.take(np.arange(min(n, self.n_items)))

    @classmethod
    def from_items(cls, items: Sequence[JudgedItem], metadata: Sequence[str] = ()) -> VoteTable:
        return cls(
            ItemColumns.from_items(items, metadata), VoteColumns.from_batches([judged.votes for judged in items])
        )
