"""The serving pair (the latest threshold and the latest model of a panel) as a promotion, a
tune or a rollback reads it before deciding, and writes against it (docs/design.md, 'Learning
keeps routing').

Every path that changes what routes a verdict decides on what it read and writes later: a
refit minutes later (its worker fits while traffic flows), a tune after its CPU-bound search.
Written with plain puts, a decision made against a pair that changed meanwhile would serve a
model promoted without a threshold although a target had been tuned in between (every verdict
of it would go to review as ``method_mismatch`` until the next refit). So each of
them reads the pair here, decides, and writes with ``Storage.put_serving``, a compare-and-set
on both versions: when another writer got there first, nothing is written and the path reads
the pair again and decides again (or refuses).
"""

from __future__ import annotations

from dataclasses import dataclass

from judgefuse.service.storage import ModelRecord, ServingVersions, ThresholdRecord, VersionedRecords

__all__ = ["WRITE_ATTEMPTS", "ServingPair", "read_pair"]

WRITE_ATTEMPTS = 5
"""How often a path reads the pair again after losing a compare-and-set before it gives up
(each loss is another writer's success: five in a row is a storm, not a race)."""


@dataclass(frozen=True)
class ServingPair:
    """The latest threshold and model records of a (tenant, panel), None where none is stored."""

    threshold: ThresholdRecord | None
    model: ModelRecord | None

    @property
    def versions(self) -> ServingVersions:
        """What a compare-and-set against this pair expects (0: none stored)."""
        return ServingVersions(
            (self.threshold.version or 0) if self.threshold is not None else 0,
            (self.model.version or 0) if self.model is not None else 0,
        )


async def read_pair(storage: VersionedRecords, tenant: str, panel: str) -> ServingPair:
    """The pair in force now, read from the store (never a replica's cache: the cache may be
    ``state_ttl_s`` behind another replica's write)."""
    return ServingPair(await storage.get_threshold(tenant, panel), await storage.get_model(tenant, panel))
