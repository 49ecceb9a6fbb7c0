"""Traffic for the learning-loop tests (tests/service/learning): items whose question carries
their index and truth, so a scripted stub judge (``script.by_question``) can answer each one
with a chosen skill, and a sender that posts them in batches the way a pipeline would."""

from __future__ import annotations

import asyncio
import re

from jf_test_support import app_support as S

__all__ = ["HEADERS", "ITEM_RE", "informative", "item", "judge_range", "truth_of"]

ITEM_RE = re.compile(r"\[item (\d+) truth ([AB])\]")
HEADERS = S.auth("tenant-a")
BATCH = 32


def informative(model: str, text: str) -> tuple[str, int] | None:
    """j1 is always right (0.85); j2 and j3 are confidently wrong together on 40% of items, so
    a learned model that trusts j1 beats the majority by far more than its noise."""
    match = ITEM_RE.search(text)
    if match is None:
        return None
    i, truth = int(match.group(1)), match.group(2)
    wrong = "B" if truth == "A" else "A"
    if model == "j1":
        return (truth, 85)
    if i % 5 in (0, 1):
        return (wrong, 90)
    return (truth, 70)


def truth_of(i: int, *, only_a: bool = False) -> str:
    """Two A's in three (or all A's: a label set that cannot be cross-fitted, no B to fold)."""
    return "A" if only_a or (i * 7) % 3 else "B"


def item(i: int, *, label: bool = True, only_a: bool = False) -> dict:
    truth = truth_of(i, only_a=only_a)
    body = {"question": f"Which is better? [item {i} truth {truth}]", "answer_a": "one",
            "answer_b": "two", "id": f"it-{i}"}
    if label:
        body["label"] = truth
    return body


async def judge_range(client, start: int, stop: int, *, label: bool = True,
                      only_a: bool = False) -> list[dict]:
    """Items ``start..stop-1`` through ``/v1/judge/batch``; the verdicts in order. A 429 from
    admission (a loaded loop sheds) is retried after its ``Retry-After``."""
    out: list[dict] = []
    for first in range(start, stop, BATCH):
        batch = {"items": [item(i, label=label, only_a=only_a) for i in range(first, min(first + BATCH, stop))]}
        for _attempt in range(20):
            r = await client.post("/v1/judge/batch", json=batch, headers=HEADERS)
            if r.status_code != 429:
                break
            await asyncio.sleep(float(r.headers.get("retry-after", 1)))
        assert r.status_code == 200 and r.json()["n_failed"] == 0, r.text
        out += [res["verdict"] for res in r.json()["results"]]
    return out
