"""Reading JSON Lines and JSON files record by record, with faults reported as DatasetError.

Every line goes through :mod:`judgefuse.json_input` (UTF-8 checked, nesting bounded), so a
line of bytes that are not UTF-8 or of 100,000 brackets is ``file:line: reason`` and exit 2 like
any other bad record, not a traceback. Files are read as bytes and split at ``\n``
(the JSON Lines separator), so the line a decoding fault is on is known.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from judgefuse.evaluation.loaders.errors import DatasetError
from judgefuse.json_input import JSONTextError, decode_utf8, parse_json, too_deep

_MISSING = object()


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, record)`` for each non-blank line; each record must be an object."""
    path = Path(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise DatasetError(path, f"cannot open: {exc.strerror or exc}") from exc
    with handle:
        for number, raw in enumerate(handle, start=1):
            text = decode_line(raw, path, number)
            if not text.strip():
                continue
            yield number, parse_line(text, path, number)


def decode_line(raw: bytes, path: str | Path, number: int | None) -> str:
    """One line's bytes as UTF-8 text, or a DatasetError naming the line."""
    try:
        return decode_utf8(raw)
    except JSONTextError as exc:
        raise DatasetError(path, exc.reason, line=number) from exc


def parse_line(text: str, path: str | Path, number: int | None) -> dict[str, Any]:
    """One JSON object from one line, or a DatasetError naming the line."""
    try:
        record = parse_json(text)
    except JSONTextError as exc:
        raise DatasetError(path, exc.reason, line=number) from exc
    if not isinstance(record, dict):
        raise DatasetError(path, f"expected a JSON object, got {type(record).__name__}", line=number)
    return record


def read_text(path: str | Path) -> str:
    """A whole file as UTF-8 text, or a DatasetError naming the line of the first bad byte."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DatasetError(path, f"cannot open: {exc.strerror or exc}") from exc
    try:
        return decode_utf8(raw)
    except JSONTextError as exc:
        raise DatasetError(path, exc.reason, line=exc.line) from exc


def read_json(path: str | Path) -> Any:
    """A whole JSON document."""
    text = read_text(path)
    try:
        return parse_json(text)
    except JSONTextError as exc:
        raise DatasetError(path, exc.reason, line=exc.line) from exc


def first_record(path: Path) -> dict[str, Any] | None:
    """The first record of a JSONL file (None if it is empty, cannot be opened, or the first
    line is not a JSON object). A first line that is not UTF-8 or nests too deep is no record
    of any format: a DatasetError naming it, so the user is not sent to pass ``--format``."""
    try:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                text = decode_line(raw, path, number)
                if text.strip():
                    try:
                        return parse_line(text, path, number)
                    except DatasetError:
                        if too_deep(text):
                            raise
                        return None
    except OSError:
        return None
    return None


def require(record: Mapping[str, Any], key: str, path: Path | None, line: int | None, *, field: str | None = None) -> Any:
    """``record[key]``, or a DatasetError saying the key is missing."""
    value = record.get(key, _MISSING)
    if value is _MISSING:
        raise DatasetError(path, "required key is missing", line=line, field=field or key)
    return value


def as_text(value: Any, path: Path, line: int | None, field: str) -> str:
    """A string field (None reads as empty)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DatasetError(path, f"must be a string (got {type(value).__name__})", line=line, field=field)
    return value


def as_float(value: Any, path: Path, line: int | None, field: str) -> float:
    """A finite number, also accepted as a numeric string ("0.9")."""
    if isinstance(value, bool):
        raise DatasetError(path, f"must be a number (got {value!r})", line=line, field=field)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise DatasetError(path, f"must be a number (got {value!r})", line=line, field=field) from None
    if not math.isfinite(number):
        raise DatasetError(path, f"must be finite (got {value!r})", line=line, field=field)
    return number


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while tens of thousands of objects are built.

    None of them form reference cycles, yet each allocation burst triggers full collections
    that scan every object built so far (about 40% of LLMBar's load time). The previous state
    is restored on exit.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def member(value: Any, table: Any) -> bool:
    """``value in table`` for a JSON value: False for unhashable values and for booleans (1 == True)."""
    if isinstance(value, bool):
        return False
    try:
        return value in table
    except TypeError:
        return False
