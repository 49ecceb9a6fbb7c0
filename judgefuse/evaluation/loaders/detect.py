"""``load(paths, format=None)``: one entry point for every source, with the format detected.

Detection, per path (all paths must agree):
* a folder: ``Dataset/`` or ``llmbar_decisions_compact.jsonl`` inside (or the folder is
  ``Dataset``) -> llmbar; ``*.calibration.jsonl`` inside -> toe; ``dataset=judgebench*.jsonl``
  inside or in ``outputs/`` -> judgebench; otherwise the ``*.jsonl`` files inside decide.
* a file, by name: ``llmbar_decisions_compact.jsonl`` / ``dataset.json`` -> llmbar,
  ``*.calibration.jsonl`` -> toe, ``dataset=judgebench*`` -> judgebench, ``*.csv`` -> csv
  (:mod:`.csv_pairs`); ``*.parquet`` by its first row's columns (:mod:`.parquet`: votes rows,
  or an export); else by the first
  record's keys: ``item`` + ``votes`` -> votes, ``pair_id`` + ``judgments``/``response_A`` ->
  judgebench, ``instruction`` + ``outputs`` + ``probs`` -> toe, ``subset`` + ``idx`` + ``base_llm`` +
  ``strategy`` -> llmbar.
Anything else is a DatasetError saying the format cannot be told (pass ``--format``); an empty
file or folder is called empty.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from judgefuse.evaluation.loaders.answers import UndefinedAnswers
from judgefuse.evaluation.loaders.csv_pairs import SUFFIX as CSV_SUFFIX
from judgefuse.evaluation.loaders.csv_pairs import load_csv
from judgefuse.evaluation.loaders.errors import DatasetError
from judgefuse.evaluation.loaders.jsonl import first_record
from judgefuse.evaluation.loaders.judgebench import load_judgebench_paths
from judgefuse.evaluation.loaders.llmbar import DECISIONS_FILE, llmbar_root, load_llmbar
from judgefuse.evaluation.loaders.parquet import SUFFIX as PARQUET_SUFFIX
from judgefuse.evaluation.loaders.parquet import is_parquet, iter_parquet
from judgefuse.evaluation.loaders.trust_or_escalate import SUFFIX as TOE_SUFFIX
from judgefuse.evaluation.loaders.trust_or_escalate import load_toe, toe_files
from judgefuse.evaluation.loaders.votes import read_parquet_votes, read_votes
from judgefuse.judges.types import JudgedItem

Format = Literal["judgebench", "llmbar", "toe", "votes", "csv"]
FORMATS: tuple[Format, ...] = ("judgebench", "llmbar", "toe", "votes", "csv")

PathsLike = str | Path | Sequence[str | Path]


def _as_paths(paths: PathsLike) -> list[Path]:
    if isinstance(paths, (str, Path)):
        return [Path(paths)]
    out = [Path(p) for p in paths]
    if not out:
        raise ValueError("no paths given")
    return out


def _by_keys(path: Path) -> Format | None:
    record = next((r for _, r in iter_parquet(path)), None) if is_parquet(path) else first_record(path)
    if record is None:
        return None
    keys = set(record)
    if {"item", "votes"} <= keys:
        return "votes"
    if "pair_id" in keys and ("judgments" in keys or "response_A" in keys):
        return "judgebench"
    if {"instruction", "outputs", "probs"} <= keys:
        return "toe"
    if {"subset", "idx", "base_llm", "strategy"} <= keys:
        return "llmbar"
    return None


def _is_empty(path: Path) -> bool:
    """No non-blank line in the file, no row in a Parquet file (or it cannot be read, which the loader will say)."""
    if is_parquet(path):
        return next(iter_parquet(path), None) is None
    try:
        with path.open("rb") as handle:
            return all(not line.strip() for line in handle)
    except OSError:
        return False


def _detect_file(path: Path) -> Format | None:
    name = path.name
    if name in (DECISIONS_FILE, "dataset.json"):
        return "llmbar"
    if name.endswith(TOE_SUFFIX):
        return "toe"
    if name.startswith("dataset=judgebench"):
        return "judgebench"
    if name.lower().endswith(CSV_SUFFIX):
        return "csv"
    return _by_keys(path)


def _detect_dir(path: Path) -> Format | None:
    if path.name == "Dataset" or (path / "Dataset").is_dir() or (path / DECISIONS_FILE).is_file():
        return "llmbar"
    if any(path.glob(f"*{TOE_SUFFIX}")):
        return "toe"
    if any(path.glob("dataset=judgebench*.jsonl")) or any(path.glob("outputs/dataset=judgebench*.jsonl")):
        return "judgebench"
    found = {_detect_file(p) for p in sorted([*path.glob("*.jsonl"), *path.glob(f"*{PARQUET_SUFFIX}")])}
    if not found and any(path.glob(f"*{CSV_SUFFIX}")):
        return "csv"
    return found.pop() if len(found) == 1 else None


def detect_format(paths: PathsLike) -> Format:
    """The format of ``paths`` (rules in the module docstring), or a DatasetError."""
    found: dict[Format, Path] = {}
    for path in _as_paths(paths):
        if not path.exists():
            raise DatasetError(path, "no such file or folder")
        fmt = _detect_dir(path) if path.is_dir() else _detect_file(path)
        if fmt is None:
            if path.is_file() and _is_empty(path):
                raise DatasetError(path, "empty file: no records to read")
            if path.is_dir() and not any(path.iterdir()):
                raise DatasetError(path, "empty folder: no data files in it")
            raise DatasetError(
                path,
                f"cannot tell the format (one of {', '.join(FORMATS)}) from the name or first record: "
                "pass --format (format= from Python)",
            )
        found.setdefault(fmt, path)
    if len(found) > 1:
        described = ", ".join(f"{p} is {f}" for f, p in found.items())
        raise DatasetError(None, f"paths of different formats: {described}")
    return next(iter(found))


def _votes_files(paths: list[Path], suffixes: tuple[str, ...] = (".jsonl", PARQUET_SUFFIX)) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(p for s in suffixes for p in path.glob(f"*{s}")) if path.is_dir() else [path])
    return files


votes_files = _votes_files
"""The votes files ``paths`` name (a folder's ``.jsonl`` and ``.parquet`` files, sorted): what
:func:`load` reads, public for the columnar reader (:mod:`.votes_columnar`)."""


def _read_votes_file(path: Path) -> list[JudgedItem]:
    return read_parquet_votes(path) if is_parquet(path) else read_votes(path)


def load(
    paths: PathsLike,
    *,
    format: Format | str | None = None,  # noqa: A002
    answers: UndefinedAnswers | None = None,
) -> list[JudgedItem]:
    """Judged items from files or folders of one source, in a stable order.

    ``format`` is one of :data:`FORMATS`; detected from the paths when omitted. Judge answers the
    format does not define become invalid votes and are recorded in ``answers`` (pass
    ``UndefinedAnswers(strict=True)`` to make them errors); broken records are always errors.
    """
    answers = answers if answers is not None else UndefinedAnswers()
    path_list = _as_paths(paths)
    fmt = detect_format(path_list) if format is None else format
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    if fmt == "judgebench":
        return load_judgebench_paths(path_list, answers=answers)
    if fmt == "llmbar":
        root, decisions = llmbar_root(path_list)
        return load_llmbar(root, decisions, answers=answers)
    if fmt == "toe":
        return load_toe(toe_files(path_list), answers=answers)
    items: list[JudgedItem] = []
    where: dict[str, Path] = {}
    for path in _votes_files(path_list, (CSV_SUFFIX,)) if fmt == "csv" else _votes_files(path_list):
        for judged in load_csv(path) if fmt == "csv" else _read_votes_file(path):
            if judged.item.id in where:
                raise DatasetError(path, f"item {judged.item.id!r} is also in {where[judged.item.id]}", field="item.id")
            where[judged.item.id] = path
            items.append(judged)
    return items


def timed_load(
    paths: PathsLike, *, format: Format | str | None = None, answers: UndefinedAnswers | None = None  # noqa: A002
) -> tuple[list[JudgedItem], float]:
    """:func:`load` and its wall-clock time in seconds."""
    started = time.perf_counter()
    items = load(paths, format=format, answers=answers)
    return items, time.perf_counter() - started
