"""``AsyncClient``: :class:`~judgefuse.client.sync_client.Client` with ``await``, on one event
loop (httpx.AsyncClient). The same requests, retry policy and ids (:mod:`judgefuse.client.calls`,
:mod:`judgefuse.client.retry`); waits are ``asyncio.sleep``, so other tasks run meanwhile.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Generator, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from judgefuse.client import calls, models
from judgefuse.client.errors import JudgefuseError
from judgefuse.client.pairs import Pair, PairResult, PairRun
from judgefuse.client.retry import Call, Outcome, RetryPolicy, Sleep, Step, send_with_retries
from judgefuse.client.settings import http_options

__all__ = ["AsyncClient"]

R = TypeVar("R")
T = TypeVar("T")


class AsyncClient:
    """An asyncio client of one judgefuse gateway: every method of
    :class:`~judgefuse.client.sync_client.Client`, awaited. Use it as an async context
    manager or ``await aclose()``."""

    def __init__(self, base_url: str = "http://localhost:8000", api_key: str | None = None, *,
                 timeout: float | httpx.Timeout | None = None, retry: RetryPolicy | None = None,
                 headers: Mapping[str, str] | None = None,
                 http_client: httpx.AsyncClient | None = None) -> None:
        self.retry = retry or RetryPolicy()
        self.batch_limit = calls.BatchLimit()
        self._http = http_client or httpx.AsyncClient(**http_options(base_url, api_key, headers, timeout))  # type: ignore[arg-type]

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ sending
    async def _drive(self, steps: Generator[Step, Outcome | None, R]) -> R:
        outcome: Outcome | None = None
        while True:
            try:
                step = steps.send(outcome)
            except StopIteration as done:
                return done.value
            if isinstance(step, Sleep):
                await asyncio.sleep(step.seconds)
                outcome = None
                continue
            call = step.call
            try:
                outcome = await self._http.request(call.method, call.path, json=call.json,
                                                   params=call.params, headers=call.headers)
            except httpx.TransportError as exc:
                outcome = exc

    async def call(self, call: Call[T]) -> T:
        """Send one :class:`~judgefuse.client.retry.Call` with retries; its parsed answer."""
        return call.parse((await self._drive(send_with_retries(call, self.retry))).json())

    # ------------------------------------------------------------------ judging
    async def judge(self, *, question: str, answer_a: str, answer_b: str, panel: str | None = None,
              id: str | None = None, label: str | None = None, category: str | None = None,
              method: str | None = None, metadata: Mapping[str, Any] | None = None) -> models.VerdictOut:
        """Judge one pair (``POST /v1/judge``). Without ``id`` one is drawn, so a retry joins
        the verdict in flight instead of judging twice; the verdict's ``id`` is it."""
        return await self.call(calls.judge(question=question, answer_a=answer_a, answer_b=answer_b, panel=panel,
                                     id=id, label=label, category=category, method=method, metadata=metadata))

    async def fuse(self, *, question: str, answer_a: str, answer_b: str,
             votes: Sequence[models.FuseVote | Mapping[str, Any]], panel: str | None = None,
             id: str | None = None, label: str | None = None, category: str | None = None,
             method: str | None = None, metadata: Mapping[str, Any] | None = None) -> models.VerdictOut:
        """Fuse votes cast elsewhere (``POST /v1/fuse``): ``[{"judge", "choice", "confidence"}]``."""
        return await self.call(calls.fuse(question=question, answer_a=answer_a, answer_b=answer_b, votes=votes,
                                    panel=panel, id=id, label=label, category=category, method=method,
                                    metadata=metadata))

    async def judge_batch(self, items: Iterable[models.JudgeRequest | Mapping[str, Any]]) -> models.BatchResponse:
        """Judge many pairs through ``POST /v1/judge/batch``, in chunks of the server's
        ``max_batch_items``; one result per item, in order (see :func:`calls.run_batch`)."""
        bodies = calls.batch_bodies(items, fuse_votes=False)
        return await self._drive(calls.run_batch("/v1/judge/batch", bodies, self.retry, self.batch_limit))

    async def fuse_batch(self, items: Iterable[models.JudgeRequest | Mapping[str, Any]]) -> models.BatchResponse:
        """:meth:`judge_batch` for ``/v1/fuse`` bodies (each with its ``votes``)."""
        bodies = calls.batch_bodies(items, fuse_votes=True)
        return await self._drive(calls.run_batch("/v1/fuse/batch", bodies, self.retry, self.batch_limit))

    async def judge_pairs(self, pairs: Iterable[Pair], *, panel: str | None = None, concurrency: int = 8,
                          resume: str | os.PathLike[str] | None = None, progress: bool = True,
                          namespace: str = "") -> AsyncIterator[PairResult]:
        """Judge ``pairs`` with at most ``concurrency`` in flight, yielding each result as it
        finishes (not in input order), resumable from ``resume`` (:mod:`judgefuse.client.pairs`)."""
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        with PairRun(pairs, panel=panel, resume=resume, progress=progress, namespace=namespace) as run:
            running: dict[asyncio.Task[models.VerdictOut | JudgefuseError], tuple[int, dict[str, Any]]] = {}
            todo = run.todo()
            try:
                while True:
                    for index, body in todo:
                        running[asyncio.create_task(self._outcome(body))] = (index, body)
                        if len(running) >= concurrency:
                            break
                    if not running:
                        return
                    finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                    for task in finished:
                        index, body = running.pop(task)
                        yield run.finish(index, body, task.result())
            finally:
                for task in running:
                    task.cancel()
                if running:
                    await asyncio.gather(*running, return_exceptions=True)

    async def _outcome(self, body: dict[str, Any]) -> models.VerdictOut | JudgefuseError:
        try:
            return await self.call(calls.judged(body))
        except JudgefuseError as exc:
            return exc

    # ------------------------------------------------------------------ labels and reads
    async def feedback(self, verdict_id: str, label: str, *, annotator: str | None = None) -> models.LabelResult:
        """Label a verdict (``POST /v1/feedback``); the same label again is a no-op."""
        return await self.call(calls.feedback(verdict_id, label, annotator))

    async def verdict(self, verdict_id: str) -> models.VerdictOut:
        """A stored verdict (``GET /v1/verdicts/{id}``); :class:`NotFound` when unknown."""
        return await self.call(calls.verdict(verdict_id))

    async def calibration(self, panel: str | None = None, *, window_hours: int | None = None,
                    population: bool | None = None, structure: bool | None = None) -> models.CalibrationOut:
        """The live calibration record (``GET /v1/calibration``)."""
        return await self.call(calls.calibration(panel, window_hours=window_hours, population=population,
                                           structure=structure))

    async def thresholds(self, panel: str | None = None) -> models.ThresholdsOut:
        """The panel's routing threshold and its history (``GET /v1/thresholds``)."""
        return await self.call(calls.thresholds(panel))

    async def tune(self, *, target_precision: float, panel: str | None = None, delta: float | None = None,
             min_count: int | None = None, method: str | None = None) -> models.TuneOut:
        """Tune a threshold from the labels (``POST /v1/thresholds/tune``)."""
        return await self.call(calls.tune(target_precision=target_precision, panel=panel, delta=delta,
                                    min_count=min_count, method=method))

    # ------------------------------------------------------------------ review and monitor
    async def review_next(self, panel: str | None = None, *, n: int | None = None,
                    annotator: str | None = None) -> models.ReviewNextOut:
        """Lease up to ``n`` items of the review queue (``GET /v1/review/next``)."""
        return await self.call(calls.review_next(panel, n, annotator))

    async def review_skip(self, verdict_id: str, *, annotator: str | None = None) -> models.ReviewSkipOut:
        """Give a leased item back (``POST /v1/review/skip``)."""
        return await self.call(calls.review_skip(verdict_id, annotator))

    async def review_label(self, verdict_id: str, label: str, *, annotator: str | None = None) -> models.LabelResult:
        """Label a leased item: a label is feedback (it ends the lease, whoever holds it)."""
        return await self.call(calls.feedback(verdict_id, label, annotator))

    async def review_stats(self, panel: str | None = None) -> models.ReviewStatsOut:
        return await self.call(calls.review_stats(panel))

    async def monitor(self, panel: str | None = None) -> models.MonitorOut:
        """The precision monitor of the current threshold version (``GET /v1/monitor``)."""
        return await self.call(calls.monitor(panel))

    async def monitor_clear(self, panel: str | None = None) -> models.MonitorClearOut:
        """End an alarm (``POST /v1/monitor/clear``, an operator's call)."""
        return await self.call(calls.monitor_clear(panel))
