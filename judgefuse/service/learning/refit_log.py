"""The refit log: every refit and cold-start fit of a panel with its outcome and why
(docs/review-loop.md, 'Learned fusion in the service').

A background refit runs with no caller to answer, so why it was or was not promoted would
otherwise be only in the server log. Each outcome
(``promoted``, ``kept``, ``skipped``, ``failed``) is appended here with when it ran, what
started it (``background``: the scheduler every ``refit_every_labels`` labels; ``api``:
``POST /v1/fusion/refit``; ``tune``: a tune that paired the serving model with a threshold;
``console``: the console's button; ``cold start``: the label-free fit) and its reason, the labels
it saw, the model version it promoted and its metrics. ``GET /v1/fusion/refits`` and the
console's learning section read it.

Storage: one compare-and-set state blob per (tenant, panel), so every replica appends to and
reads the same log on every backend; the newest :data:`KEPT` entries are kept. Writing it is
best effort: a refit's outcome never fails because its log entry could not be written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from judgefuse.service.errors import ServiceError
from judgefuse.service.kernel.shared_state import update_state
from judgefuse.service.learning.refit import RefitOutcome
from judgefuse.service.storage import Coordination, StorageError

__all__ = ["KEPT", "RefitLog"]

KEPT = 50
"""Entries kept per (tenant, panel): the newest."""

log = logging.getLogger("judgefuse.service")


def _key(panel: str) -> str:
    return f"refit-log/{panel}"


class RefitLog:
    def __init__(self, storage: Coordination, clock: Callable[[], float]) -> None:
        self.storage = storage
        self.clock = clock

    async def record(self, tenant: str, outcome: RefitOutcome, *, trigger: str, kind: str = "refit") -> None:
        """Append ``outcome`` (best effort: a failed write is logged, never raised)."""
        entry = {"at": self.clock(), "trigger": trigger[:128], "kind": kind, **outcome.as_dict()}

        def change(body: dict[str, Any]) -> tuple[dict[str, Any], None]:
            return {"refits": [*body.get("refits", []), entry][-KEPT:]}, None

        try:
            await update_state(self.storage, tenant, _key(outcome.panel), change)
        except (ServiceError, StorageError) as exc:
            log.warning("refit log of %s/%s not written: %s", tenant, outcome.panel, type(exc).__name__)

    async def recent(self, tenant: str, panel: str, limit: int = KEPT) -> list[dict[str, Any]]:
        """The newest ``limit`` entries, newest first."""
        blob = await self.storage.get_state(tenant, _key(panel))
        entries = blob.body.get("refits", []) if blob else []
        return list(reversed(entries))[:limit]
