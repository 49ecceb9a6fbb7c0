"""The detectors' reports of a monitor snapshot, computed in a worker thread (docs/design.md,
'Scale').

**Why.** A detector's report is numpy over every restart window of its stream: ~90 ms for one
judge's vote drift at 10,000 votes and ~200 ms at 200,000; 5-7 ms for a precision monitor and
up to ~20 ms per judge's Brier drift at 2,000 audit labels. ``/metrics`` asked for them for every
tenant and panel on the event loop, so a scrape of a busy gateway stalled every request for
about a second (69% of py-spy's samples during a scrape).

**What runs where.**

* On the loop, only copies: the stored blob is read into a
  :class:`~judgefuse.service.monitoring.monitor_state.MonitorState` (a fresh parse, which
  nothing else holds) and each judge's vote-drift state is copied (``VoteDrift.to_state``, ~30 us a judge).
* In a worker thread, the reports: :func:`compute_reports` rebuilds each detector from its copy
  and reports it. The copy is what the detector held when the snapshot was asked for, so the
  numbers are the ones the loop would have printed at that moment.
* One computation at a time per gateway (a lock, one worker thread): scrapes that pile up behind
  a slow one wait for it and then read what it computed, instead of starting their own.
* The worker thread runs on every CPU except those the serving process is pinned to (Linux
  sets a thread's affinity on its own), like the refit worker, so a gateway pinned to one core
  keeps that core for requests. Unlike the refit worker it keeps its priority: it holds the GIL
  between numpy calls, and a thread at ``nice`` 10 that the kernel preempts on a busy machine
  would hold the loop with it.

**What is reused.** A blob's reports are kept per (tenant, panel) under the blob's stored
version: a label that changes the blob changes the version, so a reused report is exact. A
judge's vote report is reused while the judge has had no new vote (exact too); a caller may
also accept one up to ``max_age_s`` old (``/metrics``: ``monitoring.metrics_max_age_s``, so a
scrape every second computes the vote reports of a busy gateway once per that many seconds).
``GET /v1/monitor``, the dashboard and the console always get reports of every vote so far.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from judgefuse.calibration.drift import BrierDrift, VoteDrift
from judgefuse.service.monitoring.monitor_state import MonitorState

__all__ = ["BlobReports", "DetectorReports", "VoteCopy", "compute_reports"]


@dataclass(frozen=True)
class VoteCopy:
    """One judge's vote drift as the loop copied it: the detector's state, how many votes it
    had seen (valid and invalid: the reuse key) and the counts its report adds."""

    state: dict[str, Any]
    seen: int
    counts: dict[str, int]


@dataclass(frozen=True)
class BlobReports:
    """The reports of a stored monitor blob: the precision monitor's and each judge's Brier
    drift's."""

    precision: dict[str, Any]
    brier: dict[str, dict[str, Any]]


def compute_reports(
    stored: MonitorState | None, votes: Mapping[str, VoteCopy]
) -> tuple[BlobReports | None, dict[str, dict[str, Any]]]:
    """The reports of the ``stored`` monitor state (None: not asked) and of every copied vote
    drift; the CPU-heavy part of a snapshot, run in a worker thread by :class:`DetectorReports`."""
    blob = None
    if stored is not None:
        blob = BlobReports(
            precision=stored.report(),
            brier={name: BrierDrift.from_state(state).report() for name, state in stored.judges.items()},
        )
    return blob, {judge: {**VoteDrift.from_state(copy.state).report(), **copy.counts}
                  for judge, copy in votes.items()}


def _step_aside(serving_pid: int) -> None:
    """The worker thread's initializer: off the CPUs the serving process is pinned to (per
    thread on Linux; elsewhere, or when not allowed, nothing changes)."""
    try:
        serving = os.sched_getaffinity(serving_pid)
        others = set(range(os.cpu_count() or 1)) - serving
        if others:
            os.sched_setaffinity(0, others)  # 0: this thread only
    except (AttributeError, OSError):
        pass


class DetectorReports:
    """The reports a snapshot shows, computed off the loop and reused as the module docstring
    says."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = asyncio.Lock()
        self._blobs: dict[tuple[str, str], tuple[tuple[str, int], BlobReports]] = {}
        self._votes: dict[tuple[str, str, str], tuple[int, float, dict[str, Any]]] = {}
        """(tenant, panel, judge) -> (votes seen, when computed, report)."""
        self._worker: ThreadPoolExecutor | None = None

    def close(self) -> None:
        """Let the worker thread go (a computation in flight finishes on its own)."""
        if self._worker is not None:
            self._worker.shutdown(wait=False)
            self._worker = None

    async def reports(
        self, tenant: str, panel: str, blob: tuple[str, int, MonitorState] | None,
        votes: Mapping[str, Callable[[], VoteCopy]], *, max_age_s: float = 0.0,
    ) -> tuple[BlobReports | None, dict[str, dict[str, Any]]]:
        """The reports of ``blob`` ((key, stored version, state): the threshold version's monitor,
        None when it has none) and of each judge's vote drift (``votes``: judge -> a copy of its
        detector, taken on the loop only when its report must be recomputed)."""
        async with self._lock:
            blob_key = None if blob is None else (blob[0], blob[1])
            kept_blob = self._blobs.get((tenant, panel))
            blob_hit = blob is None or (kept_blob is not None and kept_blob[0] == blob_key)
            now = self.clock()
            out_votes: dict[str, dict[str, Any]] = {}
            copies: dict[str, VoteCopy] = {}
            for judge, copy_of in votes.items():
                copy = copy_of()
                kept = self._votes.get((tenant, panel, judge))
                if kept is not None and (kept[0] == copy.seen or now - kept[1] <= max_age_s):
                    out_votes[judge] = kept[2]
                else:
                    copies[judge] = copy
            computed_blob: BlobReports | None = None
            if copies or not blob_hit:
                stored = None if blob_hit or blob is None else blob[2]
                if self._worker is None:
                    self._worker = ThreadPoolExecutor(1, "judgefuse-reports", _step_aside, (os.getpid(),))
                computed_blob, computed = await asyncio.get_running_loop().run_in_executor(
                    self._worker, compute_reports, stored, copies)
                done = self.clock()
                for judge, report in computed.items():
                    self._votes[(tenant, panel, judge)] = (copies[judge].seen, done, report)
                out_votes.update(computed)
            if blob is None:
                return None, out_votes
            if computed_blob is not None:
                assert blob_key is not None
                self._blobs[(tenant, panel)] = (blob_key, computed_blob)
                return computed_blob, out_votes
            assert kept_blob is not None
            return kept_blob[1], out_votes
