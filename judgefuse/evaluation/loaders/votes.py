"""Votes JSONL in our own schema: one ``JudgedItem.model_dump_json()`` per line.

Writing (:class:`VotesWriter`) is append-only and crash-safe: each finished item is serialised
whole first (so a half item is never written), then appended as one line with a single write,
flushed and fsynced before :meth:`VotesWriter.write` returns, so a crash loses no finished line.
Opening a file whose last line was cut by a crash (no final newline) cuts that partial line off
first, so the next line is not glued onto it.

Reading (:func:`read_votes`) refuses a malformed line with a DatasetError naming file, line and
field, except a cut **last** line (no final newline and not a whole item: a crash mid-write),
which is skipped with a warning logged and added to ``notes``. An item id seen twice is refused.
:func:`done_ids` gives the ids already written, for resuming a run.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from pydantic import ValidationError

from judgefuse.evaluation.loaders.errors import DatasetError, from_validation
from judgefuse.evaluation.loaders.jsonl import decode_line, parse_line, paused_gc
from judgefuse.evaluation.loaders.parquet import iter_parquet
from judgefuse.judges.types import JudgedItem

log = logging.getLogger(__name__)


def _parse(text: str, path: Path, line: int | None) -> JudgedItem:
    record = parse_line(text, path, line)
    try:
        return JudgedItem.model_validate(record)
    except ValidationError as exc:
        raise from_validation(exc, path, line) from exc


def read_votes(path: str | Path, *, notes: list[str] | None = None) -> list[JudgedItem]:
    """Every item of a votes file, in file order.

    A cut last line is skipped: the note saying so is logged at WARNING and appended to ``notes``
    when a list is given. A missing file is an error (use :func:`done_ids` to probe for resuming).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DatasetError(path, f"cannot open: {exc.strerror or exc}") from exc
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline; else a line cut by a crash (or unterminated)
    items: list[JudgedItem] = []
    first_line: dict[str, int] = {}
    with paused_gc():
        for number, raw in enumerate(lines, start=1):
            text = decode_line(raw, path, number)
            if text.strip():
                _add(items, first_line, _parse(text, path, number), path, number)
        if tail.strip():
            number = len(lines) + 1
            try:
                item = _parse(decode_line(tail, path, number), path, number)
            except DatasetError as exc:
                note = f"{path}:{number}: skipped a cut last line ({len(tail)} bytes, no final newline): {exc.reason}"
                log.warning(note)
                if notes is not None:
                    notes.append(note)
            else:
                _add(items, first_line, item, path, number)
    return items


def read_parquet_votes(path: str | Path) -> list[JudgedItem]:
    """Every item of a votes file in Parquet (one votes record a row, or an export's ``judged_item``
    column; :mod:`.parquet`), in row order; a fault names the row."""
    path = Path(path)
    items: list[JudgedItem] = []
    first_line: dict[str, int] = {}
    for number, record in iter_parquet(path):
        try:
            item = JudgedItem.model_validate(record)
        except ValidationError as exc:
            raise from_validation(exc, path, number) from exc
        _add(items, first_line, item, path, number)
    return items


def _add(items: list[JudgedItem], first_line: dict[str, int], item: JudgedItem, path: Path, number: int) -> None:
    if item.item.id in first_line:
        raise DatasetError(
            path, f"duplicate item id {item.item.id!r} (first at line {first_line[item.item.id]})", line=number, field="item.id"
        )
    first_line[item.item.id] = number
    items.append(item)


def done_ids(path: str | Path, *, notes: list[str] | None = None) -> set[str]:
    """Ids of the items already in a votes file (empty when the file does not exist yet)."""
    path = Path(path)
    if not path.exists():
        return set()
    return {judged.item.id for judged in read_votes(path, notes=notes)}


def _repair_tail(path: Path) -> str | None:
    """Make the file end with a newline before appending; return a note when it changed anything.

    A last line without a final newline is either a whole item (kept: a newline is added) or a line
    cut by a crash (truncated away, so the next line is not glued onto it).
    """
    with path.open("rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return None
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return None
        end, block, keep = size, 1 << 16, 0
        while end > 0:  # walk back to the last newline, in blocks
            start = max(0, end - block)
            handle.seek(start)
            at = handle.read(end - start).rfind(b"\n")
            if at >= 0:
                keep = start + at + 1
                break
            end = start
        handle.seek(keep)
        tail = handle.read()
        try:
            _parse(decode_line(tail, path, None), path, None)
        except DatasetError:
            handle.truncate(keep)
            note = f"{path}: cut {size - keep} bytes of a partial last line left by an interrupted write"
        else:
            handle.seek(size)
            handle.write(b"\n")
            note = f"{path}: the last line had no final newline (a whole item): newline added"
        handle.flush()
        os.fsync(handle.fileno())
        return note


class VotesWriter:
    """Append-only writer of a votes file: one line per finished item, flushed and fsynced.

    Use as a context manager. ``notes`` records what was repaired on open (a cut last line).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.notes: list[str] = []
        created = not self.path.exists()
        if not created:
            note = _repair_tail(self.path)
            if note:
                log.warning(note)
                self.notes.append(note)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = self.path.open("ab", buffering=0)
        if created:
            _fsync_dir(self.path.parent)
        self.written = 0

    def write(self, judged: JudgedItem) -> None:
        """Append one finished item; returns once the line is on disk."""
        if self._handle.closed:
            raise ValueError(f"{self.path}: the writer is closed")
        if not isinstance(judged, JudgedItem):
            judged = JudgedItem.model_validate(judged)
        data = judged.model_dump_json().encode("utf-8") + b"\n"  # whole line built before any byte is written
        fd = self._handle.fileno()
        before = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException:
            # A failed or interrupted write (disk full, signal) must not leave half an item behind.
            try:
                os.ftruncate(fd, before)
            except OSError:  # pragma: no cover - nothing more can be done; read_votes skips a cut tail
                pass
            raise
        self.written += 1

    def write_all(self, items: Iterable[JudgedItem]) -> None:
        """Append several items, each made durable before the next."""
        for judged in items:
            self.write(judged)

    def close(self) -> None:
        """Close the file (every written line is already on disk)."""
        self._handle.close()

    def __enter__(self) -> VotesWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _fsync_dir(folder: Path) -> None:
    """Make a new file's directory entry durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
