"""Judging at batch-API prices (``judgefuse judge --batch``; docs/offline-evaluation.md).

:class:`~judgefuse.judges.batch.runner.BatchRun` judges items in rounds through the provider's
batch API (:mod:`.api`), serving the judges' calls from downloaded answers (:mod:`.answers`)
and keeping its batches beside the output (:mod:`.state`) so an interrupted run resumes them.
"""

from judgefuse.judges.batch.answers import BATCH_PRICE_FACTOR
from judgefuse.judges.batch.api import BatchAPIError
from judgefuse.judges.batch.runner import BatchRun, BatchRunReport, BatchUnsupported, answers_path, state_path

__all__ = [
    "BATCH_PRICE_FACTOR",
    "BatchAPIError",
    "BatchRun",
    "BatchRunReport",
    "BatchUnsupported",
    "answers_path",
    "state_path",
]
