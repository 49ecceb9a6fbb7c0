"""Reading JSON Lines and JSON files record by record, with faults reported as DatasetError."""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from judgefuse.evaluation.loaders.errors import DatasetError

_MISSING = object()


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, record)`` for each non-blank line; each record must be an object."""
    path = Path(path)
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise DatasetError(path, f"cannot open: {exc.strerror or exc}") from exc
    with handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            yield number, parse_line(text, path, number)


def parse_line(text: str, path: str | Path, number: int | None) -> dict[str, Any]:
    """One JSON object from one line, or a DatasetError naming the line."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(path, f"malformed JSON: {exc.msg} (column {exc.colno})", line=number) from exc
    if not isinstance(record, dict):
        raise DatasetError(path, f"expected a JSON object, got {type(record).__name__}", line=number)
    return record


def read_json(path: str | Path) -> Any:
    """A whole JSON document."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DatasetError(path, f"cannot open: {exc.strerror or exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(path, f"malformed JSON: {exc.msg} (column {exc.colno})", line=exc.lineno) from exc


def first_record(path: Path) -> dict[str, Any] | None:
    """The first record of a JSONL file (None if it is empty or the first line is not an object)."""
    try:
        with path.open(encoding="utf-8") as handle:
            for text in handle:
                if text.strip():
                    try:
                        record = json.loads(text)
                    except json.JSONDecodeError:
                        return None
                    return record if isinstance(record, dict) else None
    except (OSError, UnicodeDecodeError):
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
