"""Traffic for the precision monitor's tests (tests/service/monitoring): items with a known truth,
an external-judge panel with an audit stratum, an annotator working the queue, a tune."""

from __future__ import annotations

import random
import textwrap
from pathlib import Path

from jf_test_support import app_support as S

__all__ = ["EXT", "H", "PAIR", "TARGET", "World", "external_panel", "fuse", "tune", "tuned_and_good"]

PAIR = {"question": "Which is right?", "answer_a": "this one", "answer_b": "that one"}
EXT = ("e1", "e2", "e3")
H = S.auth("tenant-a")
TARGET = 0.8


def external_panel(tmp_path: Path, *, audit_rate: float = 0.5, on_drift: str = "review_everything",
                   extra: str = "") -> Path:
    judges = "".join(f"  - {{name: {j}, external: true}}\n" for j in EXT)
    text = textwrap.dedent(f"""\
        name: ext
        fusion: majority
        quorum: 2
        audit_rate: {audit_rate}
        on_drift: {on_drift}
        """) + extra + "judges:\n" + judges
    path = tmp_path / f"panel-ext-{on_drift}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


class World:
    """Items with a known truth, judges whose votes follow it (or not), and an annotator."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.truth: dict[str, str] = {}
        self.n = 0

    def item(self, kind: str) -> dict:
        """``good``: all three judges right; ``split``: 2-1, majority right 30% of the time;
        ``drift``: unanimous, but all three wrong half the time (a correlated failure: the
        fused confidence stays 1.0, so only labels can see it)."""
        self.n += 1
        vid = f"{kind}-{self.n}"
        truth = self.rng.choice("AB")
        wrong = "B" if truth == "A" else "A"
        if kind == "good":
            choices = [truth] * 3
        elif kind == "split":
            major = truth if self.rng.random() < 0.3 else wrong
            minor = wrong if major == truth else truth
            choices = [major, major, minor]
        else:
            choices = [wrong if self.rng.random() < 0.5 else truth] * 3
        self.truth[vid] = truth
        votes = [{"judge": j, "choice": c, "confidence": 0.9} for j, c in zip(EXT, choices, strict=True)]
        return {**PAIR, "id": vid, "votes": votes}

    async def annotate(self, client, headers=H) -> int:
        """Work the queue dry: lease, label with the truth. Returns labels given."""
        given = 0
        while True:
            r = await client.get("/v1/review/next", params={"panel": "ext", "n": 100}, headers=headers)
            assert r.status_code == 200, r.text
            items = r.json()["items"]
            if not items:
                return given
            for item in items:
                vid = item["verdict_id"]
                f = await client.post("/v1/feedback", json={"verdict_id": vid, "label": self.truth[vid]},
                                      headers=headers)
                assert f.status_code == 200, f.text
                given += 1


async def fuse(client, world: World, kind: str, n: int) -> list[dict]:
    out = []
    for _ in range(n):
        r = await client.post("/v1/fuse", json=world.item(kind), headers=H)
        assert r.status_code == 200, r.text
        out.append(r.json())
    return out


async def tune(client) -> dict:
    r = await client.post("/v1/thresholds/tune", json={"panel": "ext", "target_precision": TARGET},
                          headers=H)
    assert r.status_code == 200, r.text
    return r.json()


async def tuned_and_good(client, world: World, n_good: int) -> int:
    """Cold start (everything reviewed, labelled), tune, then drift-free traffic labelled."""
    await fuse(client, world, "good", 100)
    await fuse(client, world, "split", 60)
    await world.annotate(client)
    tuned = await tune(client)
    assert tuned["stored"] and tuned["threshold"] == 1.0, tuned
    routed = await fuse(client, world, "good", n_good)
    assert all(v["route"] == "auto_accept" for v in routed)
    await world.annotate(client)
    return tuned["version"]
