"""The review slice's FastAPI dependencies: labels, verdict reads and the review queue.

(:func:`judgefuse.service.web.deps.gateway_part`: read from the composition root by name.)
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from judgefuse.service.review.labels import LabelService
from judgefuse.service.review.queue import ReviewQueue
from judgefuse.service.review.verdicts import VerdictReads
from judgefuse.service.web.deps import gateway_part

__all__ = ["LabelsDep", "ReviewQueueDep", "VerdictsDep", "get_labels", "get_review_queue", "get_verdicts"]

get_labels = gateway_part("labels")
get_verdicts = gateway_part("verdicts")
get_review_queue = gateway_part("review_queue")
LabelsDep = Annotated[LabelService, Depends(get_labels)]
VerdictsDep = Annotated[VerdictReads, Depends(get_verdicts)]
ReviewQueueDep = Annotated[ReviewQueue, Depends(get_review_queue)]
