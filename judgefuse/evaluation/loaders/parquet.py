"""Reading Parquet files row by row, as records shaped like the JSONL lines our loaders read.

A ``.parquet`` file holds the same records as its JSONL twin, one row a record, columns as keys
(nested columns such as a chat's list of ``{"role", "content"}`` come out as lists of dicts), so
every reader that takes ``(number, record)`` pairs from :func:`~.jsonl.iter_jsonl` takes them
from :func:`iter_parquet` unchanged: the Hugging Face preference layout (``chosen`` /
``rejected``), our pairs and votes records. A row of ``judgefuse export --format parquet`` carries
the whole votes record as JSON text in ``judged_item``; that record is what is yielded.

A null cell is read as an absent key (at any depth): a Parquet schema is one for all rows, so
a key that only some JSONL lines have becomes a column (or struct field) that is null in the
others, and a null must mean what the missing key meant in JSONL.

The number given with each record, and in every DatasetError, is the 1-based row. Rows are
read in batches (``ParquetFile.iter_batches``) so memory stays bounded by a batch, not the file.
pyarrow is the optional ``parquet`` extra, imported only when a Parquet file is read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from judgefuse.evaluation.loaders.errors import DatasetError
from judgefuse.evaluation.loaders.jsonl import iter_jsonl, parse_line

SUFFIX = ".parquet"
PARQUET_EXTRA = "pip install 'judgefuse[parquet]' (pyarrow)"
EXPORT_COLUMN = "judged_item"
BATCH_ROWS = 1024


def is_parquet(path: str | Path) -> bool:
    return Path(path).suffix.lower() == SUFFIX


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def iter_parquet(path: str | Path, *, batch_rows: int = BATCH_ROWS) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(row number, record)`` for each row (module docstring), or raise a DatasetError
    naming the file: pyarrow missing, not a Parquet file, or an export row whose JSON is broken."""
    path = Path(path)
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DatasetError(path, f"reading Parquet needs pyarrow, which is not installed: {PARQUET_EXTRA}") from None
    try:
        handle = pq.ParquetFile(path)
    except (OSError, ValueError) as exc:  # a missing file; ArrowInvalid (a ValueError) for a non-Parquet one
        raise DatasetError(path, f"cannot read as Parquet: {exc}") from exc
    number = 0
    with handle:
        for batch in handle.iter_batches(batch_size=batch_rows):
            for record in batch.to_pylist():
                number += 1
                exported = record.get(EXPORT_COLUMN)
                if isinstance(exported, str):
                    yield number, parse_line(exported, path, number)
                else:
                    yield number, _without_nulls(record)


def iter_records(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Records of a JSONL file (by line) or a Parquet file (by row), chosen by the suffix."""
    return iter_parquet(path) if is_parquet(path) else iter_jsonl(path)
