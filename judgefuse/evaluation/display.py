"""Fitting report tables into a terminal: short unique names, a legend, and a width search.

Judge names from real benchmarks are long and share prefixes (``reward_model:Skywork-Reward-...``
five times over; ``ChatGPT-0301/Rules+Metrics+Reference``), and a table squeezed by the terminal
cuts them to ``rewa…``: five rows that read the same. So names are shortened *before* layout,
to a length the width allows, and made unique; every shortened name is listed in a legend.
A table is then built in the most readable layout that fits (:func:`fit`), never cut by rich.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from rich import box
from rich.console import Console
from rich.table import Table

ELLIPSIS = "…"
MIN_NAME = 10
Layout = TypeVar("Layout")


def output_console(*, stderr: bool = False) -> Console:
    """The console reports print to: the terminal's width, else ``COLUMNS``, else 80.

    Rich already reads ``COLUMNS`` when it is set; piped output without it gets 80 columns, the
    width every table here is made to fit.
    """
    return Console(stderr=stderr, width=None if Console().is_terminal or os.environ.get("COLUMNS") else 80)


def _middle(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    keep = limit - 1
    head = (keep + 1) // 2
    return f"{text[:head]}{ELLIPSIS}{text[len(text) - (keep - head):]}"


def _shorten(name: str, limit: int, unique_tail: bool) -> str:
    """``name`` within ``limit``: a ``kind:model`` name keeps its model whole where it can.

    The model (after the last ':') is what tells judges apart: alone when no other name has the
    same model, else behind as much of the kind as fits (``no_rub…:Qwen3-1.7B``); a model longer
    than the limit loses its middle.
    """
    if len(name) <= limit:
        return name
    prefix, sep, tail = name.rpartition(":")
    if not sep:
        return _middle(name, limit)
    if unique_tail and len(tail) <= limit:
        return tail
    room = limit - len(tail) - 2  # the ellipsis and the colon
    if room >= 2:
        return f"{prefix[:room]}{ELLIPSIS}:{tail}"
    return _middle(tail if unique_tail else name, limit)


def short_names(names: Iterable[str], limit: int) -> dict[str, str]:
    """A display name of at most ``limit`` characters for each name, all different.

    Names that fit are kept as they are; longer ones are shortened by :func:`_shorten`. Names
    that would then read the same are cut elsewhere until they differ (:func:`_distinct_cut`).
    """
    limit = max(limit, MIN_NAME)
    ordered = list(dict.fromkeys(names))
    tails = Counter(name.rpartition(":")[2] for name in ordered)
    short = {name: _shorten(name, limit, tails[name.rpartition(":")[2]] == 1) for name in ordered}
    taken = {value for name, value in short.items() if value == name}  # unshortened names are fixed
    groups: dict[str, list[str]] = {}
    for name in ordered:
        groups.setdefault(short[name], []).append(name)
    for value, members in groups.items():
        clashing = [name for name in members if name != value]
        if len(members) < 2 or not clashing:
            continue
        for name in clashing:
            short[name] = _distinct_cut(name, limit, set(short.values()) | taken)
            taken.add(short[name])
    return short


def _distinct_cut(name: str, limit: int, used: set[str]) -> str:
    """A cut of ``name`` (or of its model part) within ``limit`` that no other row uses.

    Cuts keep as much of the start as possible and move the ellipsis left until the text differs
    (``internlm2-20b-rew…`` / ``internlm2-7b-rewa…``); a numbered suffix is the last resort.
    """
    texts = [name.rpartition(":")[2], name] if ":" in name else [name]
    keep = limit - 1
    for text in texts:
        for head in range(keep, 0, -1):
            candidate = f"{text[:head]}{ELLIPSIS}{text[len(text) - (keep - head):] if keep > head else ''}"
            if len(text) > limit and candidate not in used:
                return candidate
    number = 2
    while True:
        suffix = f"#{number}"
        candidate = _middle(name, limit - len(suffix)) + suffix
        if candidate not in used:
            return candidate
        number += 1


def legend(names: dict[str, str]) -> list[str]:
    """``short = full name`` for every shortened name, in row order."""
    return [f"{short} = {full}" for full, short in names.items() if short != full]


def compact_table(title: str | None = None, *, caption: str | None = None) -> Table:
    """A table with thin column rules and no outer frame: the most data per column of width."""
    return Table(
        title=title,
        title_justify="left",
        caption=caption,
        caption_justify="left",
        box=box.MINIMAL,
        show_edge=False,
        pad_edge=False,
    )


def natural_width(console: Console, table: Table) -> int:
    """How wide ``table`` is when nothing is wrapped or cut."""
    return console.measure(table, options=console.options.update(width=10_000)).maximum


def fit(console: Console, layouts: Sequence[Layout], build: Callable[[Layout], Table]) -> tuple[Table, Layout]:
    """The first layout (most readable first) whose table fits the console; else the last one."""
    for layout in layouts:
        table = build(layout)
        if natural_width(console, table) <= console.width:
            return table, layout
    return table, layout
