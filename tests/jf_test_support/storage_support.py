"""Records and labels the storage tests build, shared by the storage, export and console tests
(``jf_test_support``, on pytest's pythonpath): a verdict record on a fixed clock, a
stand-in calibration accumulator, a record carrying a review stamp."""

from __future__ import annotations

from collections.abc import Mapping

from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote, Letter, PairwiseItem
from judgefuse.service.storage import (
    LabelOutcome,
    ReviewStamp,
    Storage,
    Stratum,
    StratumCounts,
    VerdictRecord,
)

H0 = 490_000  # an hour index (2025-11)
T0 = H0 * 3600.0


def make_record(
    vid: str,
    *,
    tenant: str = "acme",
    panel: str = "p1",
    created_at: float = T0 + 10.0,
    choice: Letter = "A",
    confidence: float = 0.75,
    with_item: bool = True,
) -> VerdictRecord:
    votes = [
        JudgeVote(judge="j1", mode="sc", choice=choice, confidence=confidence),
        JudgeVote.invalid("j2", "sc", "timeout"),
    ]
    p_a = confidence if choice == "A" else 1.0 - confidence
    verdict = Verdict(
        choice=choice, confidence=confidence, p_a=p_a, method="majority", votes=votes,
        n_valid=1, n_invalid=1, id=vid, route="human_review", threshold=0.9, degraded=True,
    )
    item = PairwiseItem(id=vid, question="2+2?", answer_a="4", answer_b="5") if with_item else None
    return VerdictRecord(
        id=vid, tenant=tenant, panel=panel, created_at=created_at, verdict=verdict, item=item
    )


def incr(record: VerdictRecord, label: Letter) -> Mapping[str, Mapping[str, float]]:
    """A stand-in calibration accumulator: counts, correct count, confidence sums."""
    c = record.verdict.confidence
    z = 1.0 if record.verdict.choice == label else 0.0
    out = {
        f"{record.panel}:method:majority": {"n": 1.0, "correct": z, "sum_c": c, "sum_cz": c * z},
    }
    for vote in record.verdict.votes:
        if vote.valid:
            zj = 1.0 if vote.choice == label else 0.0
            out[f"{record.panel}:judge:{vote.judge}"] = {"n": 1.0, "correct": zj}
    return out


METHOD = "p1:method:majority"


async def label(storage: Storage, vid: str, letter: Letter, tenant: str = "acme") -> LabelOutcome:
    return await storage.set_label(tenant, vid, letter, incr, labelled_at=T0 + 100.0)


NOW = T0 + 1000.0


def stamped(
    vid: str,
    stratum: Stratum = "review",
    rank: float = 0.5,
    *,
    panel: str = "p1",
    created_at: float = T0 + 10.0,
) -> VerdictRecord:
    """A verdict record carrying a review stamp."""
    stamp = ReviewStamp(
        stratum=stratum,
        inclusion_probability={"review": 1.0, "audit": 0.1, "none": 0.0, "inline": 1.0}[stratum],
        reason={"review": "below_threshold", "audit": "audit", "none": "auto_accept",
                "inline": "inline_label"}[stratum],
        audit_rate=0.1,
        draw=None if stratum in ("review", "inline") else 0.05 if stratum == "audit" else 0.7,
        rank=rank,
    )
    record = make_record(vid, panel=panel, created_at=created_at)
    return record.model_copy(update={"review": stamp, "threshold_version": 3})


def counts(routed: int = 0, queued: int = 0, leased: int = 0, labelled: int = 0) -> StratumCounts:
    return StratumCounts(routed=routed, queued=queued, leased=leased, labelled=labelled)
