"""A seeded store for the console tests (no tests here): an external-judge panel, a tuned
threshold, verdicts of every route posted through /v1/fuse, some labelled (right, wrong, audit),
so every figure of the overview has something to show."""

from __future__ import annotations

import random
from typing import Any

from jf_test_support import panel_support as P
from judgefuse.service.storage import ThresholdRecord

H = P.H


async def seed(client: Any, storage: Any, *, n: int = 40, seed: int = 3,
               tenant: str = "tenant-a") -> list[dict[str, Any]]:
    """Post ``n`` verdicts (mixed unanimous / split votes), label a few of each route; returns
    the verdicts as /v1/fuse answered them (with the labels given, under ``"given"``)."""
    await storage.put_threshold(tenant, "ext", ThresholdRecord(
        panel="ext", threshold=0.9, created_at=1.0, method="majority", target_precision=0.9,
        delta=0.1, coverage=0.5, n_labels=100))
    rng = random.Random(seed)
    out = []
    for i in range(n):
        votes = P.UNANIMOUS if rng.random() < 0.6 else P.SPLIT
        body = {**P.PAIR, "question": f"Question {i}: which is right?", "id": f"c{i:03d}", "votes": votes}
        r = await client.post("/v1/fuse", json=body, headers=H)
        assert r.status_code == 200, r.text
        out.append(r.json())
    labelled = out[::4]
    # the gateway draws the audit stratum at random: make sure one audit label exists, so the
    # auto-accept precision has an estimate whatever the draws were
    if not any(_stratum(v) == "audit" for v in labelled):
        labelled += [v for v in out if _stratum(v) == "audit"][:1]
    for verdict in labelled:
        label = "A" if rng.random() < 0.7 else "B"
        r = await client.post("/v1/feedback", json={"verdict_id": verdict["id"], "label": label}, headers=H)
        assert r.status_code == 200, r.text
        verdict["given"] = label
    return out


def _stratum(verdict: dict[str, Any]) -> str | None:
    return (verdict.get("review") or {}).get("stratum")
