"""The operator console (docs/console.md): ``/console``, an overview per panel that refreshes
itself, ``/console/verdicts``, the verdict list with filters and keyset paging over the store,
and ``/console/verdicts/{id}``, one verdict with every judge's vote. Server-rendered (Jinja2,
autoescaped); everything shown is read from the store, so every replica shows the same page.

It shows every slice at once, through their public services: the review queue's counts, the
calibration report's population estimates, the monitor's snapshot and the ledger's traffic
counters; ``/dashboard`` (:mod:`.dashboard`) is the calibration and routing overview. It is the
one slice above the gateway (its routes take the gateway from :mod:`.deps`); the other slices'
services come from their own ``deps.py``.
"""
