"""The most confident disagreements with the labels, for ``GET /v1/calibration``, read from the
stored labelled verdicts only when a label has changed since the last read.

The list comes from the newest :data:`DISAGREEMENT_SCAN` labelled verdicts of a panel: a bounded
read, but one that parses up to 500 records with their votes, on a route dashboards poll. Between
two labels the list cannot change except by time (the window, applied here on every call to the
cached misses, not by the read), so the misses of the last read are kept per (tenant, panel)
with the panel's **label version** (docs/design.md, 'The review loop'):

* how many of its verdicts carry an A/B label (``count_labelled``: a new label, an undo, a
  relabel to or from ``tie`` / ``both_bad``, retention dropping labelled verdicts);
* the fields of its method accumulators and of the methods' agreement counters with the labels
  (every label, relabel and undo moves them in the same atomic step that writes the label; the
  agreement fields count each fused answer against each label, so a relabel A -> B moves them
  even when the count stays).

Those are a few small counter reads, on every backend and in every replica (another process's
label changes them too). A read that is needed takes a place of the report gate and sorts in a
worker thread (:mod:`.reports`); a reused one takes neither. A read is also redone after :data:`MAX_AGE_S`, so the one change the
counters cannot see (two relabels between polls that exactly cancel, same method, answer,
confidence bin and opposite labels) shows within that time.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from judgefuse.judges.types import LETTERS
from judgefuse.service.ledger import panel_prefix, parse_key
from judgefuse.service.storage import LabelLedger, VerdictRecord

if TYPE_CHECKING:
    from judgefuse.service.estimates.reports import Reports

__all__ = ["DISAGREEMENT_SCAN", "MAX_AGE_S", "DisagreementCache", "label_version"]

DISAGREEMENT_SCAN = 500
"""How many of the newest labelled verdicts ``/v1/calibration`` reads for its disagreement list
(older misses are in the console's verdict list, filter ``wrong``)."""
MAX_AGE_S = 60.0
"""The longest a read is reused even when the label version has not moved (module docstring)."""
REPORT = "disagreements"
"""The report's name in the gate's counters (:mod:`.reports`)."""
MAX_ENTRIES = 1024
"""(tenant, panel) pairs kept; the least recently asked goes first."""

Miss = tuple[str, str, str, float, str, float]
"""(id, method, choice, confidence, label, created_at) of one disagreement."""


async def label_version(storage: LabelLedger, tenant: str, panel: str) -> tuple[object, ...]:
    """What changes whenever a labelled verdict of (tenant, panel) is added, relabelled, undone
    or dropped (module docstring): its A/B-labelled count and its method and agreement counters."""
    keys: list[str] = []
    for prefix in (f"{panel_prefix(panel)}method/", f"{panel_prefix(panel)}agreement/method/"):
        for key in await storage.list_accumulators(tenant, prefix):
            try:
                parse_key(key)  # the four-part keys: not the per-stratum copies
            except ValueError:
                continue
            keys.append(key)
    counters = [(key, tuple(sorted((await storage.read_accumulator(tenant, key)).items()))) for key in keys]
    return (await storage.count_labelled(tenant, panel), tuple(counters))


@dataclass(frozen=True, slots=True)
class _Read:
    version: tuple[object, ...]
    read_at: float
    scanned: int
    misses: tuple[Miss, ...]
    """Every miss of the read, most confident first (equal: newer first, then id)."""


class DisagreementCache:
    """The disagreement list per (tenant, panel), read again only when its label version moved
    or the last read is :data:`MAX_AGE_S` old (module docstring)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, max_age_s: float = MAX_AGE_S,
                 reports: Reports | None = None) -> None:
        self.clock = clock
        self.max_age_s = max_age_s
        self.reports = reports
        """The report gate a read is admitted by (None: no gate, sorted on the loop)."""
        self._reads: OrderedDict[tuple[str, str], _Read] = OrderedDict()

    async def get(
        self, storage: LabelLedger, tenant: str, panel: str, *, since: float | None, limit: int
    ) -> dict[str, Any]:
        """``{scanned, items}``: at most ``limit`` misses created at or after ``since`` (None:
        all), of the newest :data:`DISAGREEMENT_SCAN` labelled verdicts."""
        version = await label_version(storage, tenant, panel)  # before the records: a label
        # landing between the two is then in a read kept under the older version, read again next
        key = (tenant, panel)
        read = self._reads.get(key)
        now = self.clock()
        if read is None or read.version != version or now - read.read_at >= self.max_age_s:
            if self.reports is None:
                read = await self._read(storage, tenant, panel, version, now)
            else:
                async with self.reports.admit(tenant, REPORT):
                    read = await self._read(storage, tenant, panel, version, now, self.reports)
            self._reads[key] = read
        elif self.reports is not None:
            self.reports.count(tenant, REPORT, "cached")
        self._reads.move_to_end(key)
        while len(self._reads) > MAX_ENTRIES:
            self._reads.popitem(last=False)
        kept = [m for m in read.misses if since is None or m[5] >= since][:limit]
        return {
            "scanned": read.scanned,
            "items": [{"id": vid, "method": method, "choice": choice, "confidence": confidence,
                       "label": label, "created_at": created_at}
                      for vid, method, choice, confidence, label, created_at in kept],
        }  # fmt: skip

    @staticmethod
    async def _read(
        storage: LabelLedger, tenant: str, panel: str, version: tuple[object, ...], now: float,
        reports: Reports | None = None,
    ) -> _Read:
        records = await storage.iter_labelled(tenant, panel, limit=DISAGREEMENT_SCAN)
        misses = await reports.run(REPORT, _misses, records) if reports is not None else _misses(records)
        return _Read(version, now, len(records), misses)


def _misses(records: list[VerdictRecord]) -> tuple[Miss, ...]:
    """The labelled ``records`` whose fused A/B answer the label contradicts, most confident first."""
    missed = [r for r in records if r.verdict.choice in LETTERS and r.verdict.choice != r.label]
    missed.sort(key=lambda r: (-r.verdict.confidence, -r.created_at, r.id))
    return tuple((r.id, r.verdict.method, str(r.verdict.choice), r.verdict.confidence, str(r.label),
                  r.created_at) for r in missed)  # fmt: skip
