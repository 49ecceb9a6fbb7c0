"""A fusion method: the median of the valid votes' P(A); confidence is the median's distance from 1/2."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from judgefuse.fusion.registry import fusion_method
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote


@fusion_method("jfx_median_p")
class MedianP:
    name = "jfx_median_p"
    requires_fit = False

    def __call__(self, votes: Sequence[JudgeVote]) -> Verdict:
        valid = [vote for vote in votes if vote.valid and vote.p_a is not None]
        if not valid:
            return Verdict(choice=None, confidence=0.5, p_a=0.5, method=self.name, votes=list(votes),
                           n_valid=0, n_invalid=len(votes), notes=["no valid vote"])
        p_a = statistics.median(vote.p_a for vote in valid)
        return Verdict(choice="A" if p_a >= 0.5 else "B", confidence=max(p_a, 1.0 - p_a), p_a=p_a,
                       method=self.name, votes=list(votes), n_valid=len(valid),
                       n_invalid=len(votes) - len(valid))
