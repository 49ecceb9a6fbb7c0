"""What a refit's worker process is given and says back (docs/design.md, 'Bounded learning').

The worker **reads the labelled records itself**: it gets a :class:`RefitJob` (the store's URL,
the tenant, the panel and what to fit, never the records), reads the labels, tells the gateway
their :class:`LabelSet` (size and digest), and fits only when the gateway answers that this
label set is to be fitted here (:class:`~judgefuse.service.learning.refit_once.LabelSetOnce`).
It sends back the fitted model's parameters and the metrics, not the model: the gateway parses,
pickles and unpickles no records (2,000 records of 13 judges cost ~1 s of the gateway's CPU per
refit, next to its event loop). A store that cannot be reopened by URL in another process
(``reopen_url()`` is None) is read by the gateway, and :meth:`RefitJob.inputs` turns its records
into the same arguments.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from judgefuse.service.learning.paired_threshold import Population
from judgefuse.service.learning.promotion import PromoteOn, PromotionTarget
from judgefuse.service.learning.refit_evaluation import Evaluation, evaluate_bounded
from judgefuse.service.learning.refit_once import label_set_digest
from judgefuse.service.learning.refit_worker import WorkerJob
from judgefuse.service.learning.signal_caps import SignalCaps
from judgefuse.service.ledger import label_stratum_key
from judgefuse.service.storage import VerdictRecord, open_storage

__all__ = ["LabelSet", "RefitJob", "answered", "refit_in_worker"]


@dataclass(frozen=True)
class LabelSet:
    """What the worker tells the gateway about the labels it read: how many, and their digest
    (:func:`~judgefuse.service.learning.refit_once.label_set_digest`)."""

    n_labels: int
    digest: str


@dataclass(frozen=True)
class RefitJob:
    """A refit's input, small whatever the number of labels: where the labels are and what to
    fit on them (:func:`~judgefuse.service.learning.refit.refit`'s arguments). ``storage_url``:
    the store the worker opens (None: the records are read by the caller and passed as
    :meth:`inputs`)."""

    storage_url: str | None
    tenant: str
    panel: str
    max_labels: int
    voting: str
    n_folds: int
    target: PromotionTarget | None
    promote_on: PromoteOn
    traffic: dict[str, int] | None
    learned: str
    caps: SignalCaps | None

    def digest(self, records: Sequence[VerdictRecord]) -> str:
        """The label set's name: the (verdict, label) pairs and everything asked of them."""
        return label_set_digest(
            records,
            voting=self.voting,
            n_folds=self.n_folds,
            target=self.target,
            promote_on=self.promote_on,
            learned=self.learned,
            caps=self.caps,
        )

    def inputs(self, records: list[VerdictRecord]) -> tuple[Any, ...]:
        """:func:`evaluate_bounded`'s arguments for these records (newest first, as read)."""
        ordered = records[::-1]  # oldest first: deterministic folds for the same data
        population = None
        if self.traffic is not None:
            population = Population([label_stratum_key(r) for r in ordered], self.traffic)
        return (
            [list(r.verdict.votes) for r in ordered],
            [str(r.label) for r in ordered],
            self.voting,
            self.n_folds,
            self.target,
            self.promote_on,
            population,
            self.learned,
            self.caps,
        )


def refit_in_worker(job: RefitJob) -> Generator[LabelSet, bool, tuple[Evaluation, str | None] | None]:
    """The refit worker's job: read the labelled records from the store, yield their
    :class:`LabelSet`, and, when the gateway answers True, evaluate them (:func:`evaluate_bounded`)."""
    assert job.storage_url is not None
    records = asyncio.run(_read_labelled(job.storage_url, job.tenant, job.panel, job.max_labels))
    go = yield LabelSet(len(records), job.digest(records))
    if not go:
        return None
    evaluation, capped = evaluate_bounded(*job.inputs(records))
    return dataclasses.replace(evaluation, fitted=None), capped  # the parameters travel, not the model


async def _read_labelled(url: str, tenant: str, panel: str, limit: int) -> list[VerdictRecord]:
    async with open_storage(url) as storage:
        return await storage.iter_labelled(tenant, panel, limit=limit)


async def answered(worker: WorkerJob) -> tuple[Evaluation, str | None]:
    """Tell the worker to fit its label set; its evaluation."""
    evaluation: tuple[Evaluation, str | None] = await worker.result(True)
    return evaluation
