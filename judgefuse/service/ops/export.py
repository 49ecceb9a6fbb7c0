"""Stored verdicts as votes JSONL: the labelled live traffic, replayable offline.

One stored :class:`~judgefuse.service.storage.VerdictRecord` becomes one
:class:`~judgefuse.judges.types.JudgedItem` (our votes JSONL line, what ``judgefuse eval``,
``compare`` and ``tune`` read): the stored item with the record's label as its ``label``, the
judges' votes as stored, and what only the service knows under ``item.metadata["judgefuse"]``
(:data:`META_KEY`): verdict id, tenant, panel, times, the review stratum and inclusion
probability stamped at decision time (what a population estimate weighs a label by), the route
and the fused answer. A record stored without its item (``store_items`` off) has no question or
answers, so it cannot become a ``JudgedItem``: it is skipped and counted.

The file is written streaming (records are converted and written one by one as the storage
scan yields them: constant memory however many there are) into a temporary file beside the
target, fsynced and renamed over it at the end, so a reader never sees half an export and an
interrupted export leaves the previous file as it was.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from judgefuse.errors import InputError
from judgefuse.judges.types import TIE_LABELS, JudgedItem
from judgefuse.service.storage import DECIDED, RecordArchive, VerdictRecord

__all__ = ["META_KEY", "ExportInputError", "ExportReport", "export_records", "judged_item_of"]


class ExportInputError(InputError, ValueError):
    """An export asked for something that cannot be done (a format, a time window, a store)."""

META_KEY = "judgefuse"
"""The ``item.metadata`` key the export writes the service's fields under (replacing any
metadata of that name the request carried)."""

ExportFormat = Literal["jsonl", "parquet"]
PARQUET_EXTRA = "pip install 'judgefuse[parquet]' (pyarrow)"


@dataclass(frozen=True)
class ExportReport:
    """``written``: items in the file; ``skipped_no_item``: records stored without their item."""

    path: Path
    written: int
    skipped_no_item: int
    labelled: int


def judged_item_of(record: VerdictRecord, *, tenant_in_id: bool = False) -> JudgedItem | None:
    """The record as one votes-JSONL item, or None when it was stored without its item.
    ``tenant_in_id``: the item id is ``tenant/id`` (an export of several tenants, whose
    verdict ids may repeat; the JSONL readers refuse a repeated id)."""
    if record.item is None:
        return None
    verdict = record.verdict
    stamp = record.review
    meta: dict[str, Any] = {
        "verdict_id": record.id,
        "tenant": record.tenant,
        "panel": record.panel,
        "created_at": record.created_at,
        "labelled_at": record.labelled_at,
        "label_kind": record.label,
        "label_comment": record.label_comment,
        "stratum": None if stamp is None else stamp.stratum,
        "inclusion_probability": None if stamp is None else stamp.inclusion_probability,
        "audit_rate": None if stamp is None else stamp.audit_rate,
        "review_reason": None if stamp is None else stamp.reason,
        "route": verdict.route,
        "threshold": verdict.threshold,
        "threshold_version": record.threshold_version,
        "fused": {"method": verdict.method, "choice": verdict.choice,
                  "confidence": verdict.confidence, "p_a": verdict.p_a},
    }
    item = record.item.model_copy(update={
        "id": f"{record.tenant}/{record.item.id}" if tenant_in_id else record.item.id,
        # an item's label is a preference; a tie or both-bad label is the item's tie_label, which
        # the offline tools count apart from A/B (docs/offline-evaluation.md, 'Ties')
        "label": record.label if record.label in DECIDED else None if record.label else record.item.label,
        "tie_label": record.label if record.label in TIE_LABELS else None if record.label else record.item.tie_label,
        "metadata": {**record.item.metadata, META_KEY: meta},
    })
    return JudgedItem(item=item, votes=list(verdict.votes))


@contextlib.contextmanager
def _atomic_binary(target: Path) -> Iterator[IO[bytes]]:
    """A temporary file beside ``target``, renamed over it when the block ends cleanly
    (after flush and fsync); removed, leaving ``target`` untouched, when it raises."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(handle, 0o666 & ~umask)  # mkstemp's 0600 would make the export private
        with os.fdopen(handle, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


async def _items(
    records: AsyncIterator[VerdictRecord], tenant_in_id: bool, counts: dict[str, int],
) -> AsyncIterator[JudgedItem]:
    async for record in records:
        item = judged_item_of(record, tenant_in_id=tenant_in_id)
        if item is None:
            counts["skipped"] += 1
            continue
        counts["labelled"] += item.item.label is not None
        yield item


def check_format(fmt: ExportFormat) -> None:
    """Refuse a format this installation cannot write, before anything is opened."""
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ExportInputError(f"--format parquet needs pyarrow, which is not installed: "
                             f"{PARQUET_EXTRA}; or export jsonl") from None
    elif fmt != "jsonl":
        raise ExportInputError(f"--format must be jsonl or parquet, got {fmt!r}")


async def export_records(
    storage: RecordArchive,
    out: str | Path,
    *,
    tenant: str | None = None,
    panel: str | None = None,
    since: float | None = None,
    until: float | None = None,
    labelled_only: bool = False,
    fmt: ExportFormat = "jsonl",
    batch_size: int = 1000,
    progress: Callable[[int, int], None] | None = None,
) -> ExportReport:
    """Write the matching records of an open ``storage`` to ``out`` (module docstring);
    ``progress(written, skipped)`` is called every ``batch_size`` records and at the end."""
    check_format(fmt)
    target = Path(out)
    counts = {"written": 0, "skipped": 0, "labelled": 0}
    await storage.index_existing_records()
    records = storage.iter_records(tenant, panel=panel, since=since, until=until,
                                   labelled_only=labelled_only, batch_size=batch_size)
    items = _items(records, tenant is None, counts)
    with _atomic_binary(target) as handle:
        if fmt == "jsonl":
            async for item in items:
                handle.write(item.model_dump_json().encode("utf-8") + b"\n")
                counts["written"] += 1
                if progress is not None and counts["written"] % batch_size == 0:
                    progress(counts["written"], counts["skipped"])
        else:
            await _write_parquet(handle, items, counts, batch_size, progress)
    if progress is not None:
        progress(counts["written"], counts["skipped"])
    return ExportReport(path=target.resolve(), written=counts["written"],
                        skipped_no_item=counts["skipped"], labelled=counts["labelled"])


async def _write_parquet(
    handle: IO[bytes], items: AsyncIterator[JudgedItem], counts: dict[str, int], batch_size: int,
    progress: Callable[[int, int], None] | None,
) -> None:
    """Parquet, one row per item: the columns a query filters on, and the whole votes-JSONL
    line in ``judged_item`` (so the rows convert back to our JSONL losslessly)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([
        ("id", pa.string()), ("tenant", pa.string()), ("panel", pa.string()),
        ("created_at", pa.float64()), ("label", pa.string()), ("stratum", pa.string()),
        ("inclusion_probability", pa.float64()), ("judged_item", pa.string()),
    ])
    rows: list[dict[str, Any]] = []
    with pq.ParquetWriter(handle, schema) as writer:
        async for item in items:
            meta = item.item.metadata[META_KEY]
            rows.append({"id": item.item.id, "tenant": meta["tenant"], "panel": meta["panel"],
                         "created_at": meta["created_at"], "label": item.item.label,
                         "stratum": meta["stratum"],
                         "inclusion_probability": meta["inclusion_probability"],
                         "judged_item": item.model_dump_json()})
            counts["written"] += 1
            if len(rows) >= batch_size:
                writer.write_table(pa.Table.from_pylist(rows, schema=schema))
                rows.clear()
                if progress is not None:
                    progress(counts["written"], counts["skipped"])
        if rows:
            writer.write_table(pa.Table.from_pylist(rows, schema=schema))
