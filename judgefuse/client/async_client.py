"""``AsyncClient``: :class:`~judgefuse.client.sync_client.Client` with ``await``, on one event
loop (httpx.AsyncClient). The same requests, retry policy and ids (:mod:`judgefuse.client.calls`,
:mod:`judgefuse.client.retry`); waits are ``asyncio.sleep``, so other tasks run meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Generator, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from judgefuse.client import calls, models
from judgefuse.client import retry as attempts
from judgefuse.client.errors import BadResponse, InvalidRequest, JudgefuseError
from judgefuse.client.pairs import Pair, PairResult, PairRun, gateway_down
from judgefuse.client.retry import (
    Breaker,
    BreakerOpen,
    Call,
    CircuitBreaker,
    Outcome,
    RetryPolicy,
    Send,
    Sleep,
    Step,
    parse_answer,
    send_with_retries,
)
from judgefuse.client.settings import DEFAULT_MAX_RESPONSE_BYTES, http_options

__all__ = ["AsyncClient"]

R = TypeVar("R")
T = TypeVar("T")


class AsyncClient:
    """An asyncio client of one judgefuse gateway: every method of
    :class:`~judgefuse.client.sync_client.Client`, awaited. Use it as an async context
    manager or ``await aclose()``. The same ``retry``, ``breaker`` and ``max_response_bytes``;
    the deadline of a call is one ``asyncio.timeout`` around each attempt, body included."""

    def __init__(self, base_url: str = "http://localhost:8000", api_key: str | None = None, *,
                 timeout: float | httpx.Timeout | None = None, retry: RetryPolicy | None = None,
                 headers: Mapping[str, str] | None = None, breaker: CircuitBreaker | None = None,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
                 http_client: httpx.AsyncClient | None = None) -> None:
        self.retry = retry or RetryPolicy()
        self.breaker = breaker or CircuitBreaker()
        self.max_response_bytes = max_response_bytes
        self.last_breaker: Breaker | None = None
        """The breaker of the latest ``judge_pairs`` run (its ``attempts`` and ``failed`` sends)."""
        self.batch_limit = calls.BatchLimit()
        self._http = http_client or httpx.AsyncClient(**http_options(base_url, api_key, headers, timeout))  # type: ignore[arg-type]

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ sending
    async def _drive(self, steps: Generator[Step, Outcome | None, R], breaker: Breaker | None = None) -> R:
        outcome: Outcome | None = None
        while True:
            try:
                step = steps.send(outcome)
            except StopIteration as done:
                return done.value
            if isinstance(step, Sleep):
                await asyncio.sleep(step.seconds)  # a run whose breaker opens cancels this task
                outcome = None
                continue
            if breaker is not None:
                breaker.check()
            try:
                outcome = await self._send(step)
            except httpx.TransportError as exc:
                outcome = exc
            except httpx.HTTPError as exc:  # a body that does not decode, too many redirects
                raise BadResponse(0, f"{type(exc).__name__}: {exc}", method=step.call.method,
                                  path=step.call.path) from exc
            if breaker is not None:
                breaker.check(outcome)

    async def _send(self, step: Send) -> httpx.Response:
        """One attempt under one ``asyncio.timeout`` to the call's deadline (headers and
        body), its body read in chunks under the size cap."""
        call = step.call
        left = None if step.deadline is None else max(0.0, step.deadline - time.monotonic())
        try:
            async with asyncio.timeout(left):
                async with self._http.stream(call.method, call.path, json=call.json, params=call.params,
                                             headers=call.headers,
                                             timeout=attempts.attempt_timeout(self._http.timeout, step.deadline)) as response:
                    reader = attempts.BodyReader(call, response, step.deadline, self.max_response_bytes)
                    async for chunk in response.aiter_bytes():
                        reader.add(chunk)
                    return reader.done()
        except TimeoutError as exc:
            raise httpx.ReadTimeout("the whole answer did not arrive within the call's deadline") from exc

    async def call(self, call: Call[T]) -> T:
        """Send one :class:`~judgefuse.client.retry.Call` with retries; its parsed answer."""
        return parse_answer(call, await self._drive(send_with_retries(call, self.retry)))

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
        finishes (not in input order), resumable from ``resume`` (:mod:`judgefuse.client.pairs`);
        stops with one :class:`~judgefuse.client.errors.GatewayDown` when the breaker opens."""
        if concurrency < 1:
            raise InvalidRequest.before_sending([("concurrency", f"at least 1, not {concurrency}")])
        breaker = Breaker(self.breaker)
        self.last_breaker = breaker
        with PairRun(pairs, panel=panel, resume=resume, progress=progress, namespace=namespace) as run:
            running: dict[asyncio.Task[Any], tuple[int, dict[str, Any]]] = {}
            todo = run.todo()
            try:
                while not breaker.open:
                    for index, body in todo:
                        running[asyncio.create_task(self._outcome(body, breaker))] = (index, body)
                        if len(running) >= concurrency:
                            break
                    if not running:
                        return
                    finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                    for task in finished:
                        index, body = running.pop(task)
                        if (result := run.outcome(index, body, task.result(), breaker.open)) is not None:
                            yield result
                for task in list(running):  # the breaker opened: keep what already finished
                    if task.done() and not task.cancelled():
                        index, body = running.pop(task)
                        if (result := run.outcome(index, body, task.result(), True)) is not None:
                            yield result
                raise gateway_down(run, breaker, str(self._http.base_url))
            finally:
                for task in running:
                    task.cancel()
                if running:
                    await asyncio.gather(*running, return_exceptions=True)

    async def _outcome(self, body: dict[str, Any], breaker: Breaker) -> models.VerdictOut | JudgefuseError | BreakerOpen:
        call = calls.judged(body)
        try:
            return parse_answer(call, await self._drive(send_with_retries(call, self.retry), breaker))
        except (JudgefuseError, BreakerOpen) as exc:
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

    async def plan(self, panel: str, *, width: float | None = None, window_days: float | None = None,
                   traffic_hours: int | None = None) -> models.PlanOut:
        """:meth:`Client.plan <judgefuse.client.sync_client.Client.plan>` (``GET /v1/panels/{panel}/plan``)."""
        return await self.call(calls.plan(panel, width=width, window_days=window_days,
                                          traffic_hours=traffic_hours))

    async def thresholds(self, panel: str | None = None) -> models.ThresholdsOut:
        """The panel's routing threshold and its history (``GET /v1/thresholds``)."""
        return await self.call(calls.thresholds(panel))

    async def tune(self, *, target_precision: float, panel: str | None = None, delta: float | None = None,
             min_count: int | None = None, method: str | None = None) -> models.TuneOut:
        """Tune a threshold from the labels (``POST /v1/thresholds/tune``)."""
        return await self.call(calls.tune(target_precision=target_precision, panel=panel, delta=delta,
                                    min_count=min_count, method=method))

    # ------------------------------------------------------------------ learned fusion
    async def refit(self, panel: str | None = None, *, method: str | None = None,
                    cold_start: bool | None = None) -> models.RefitOut:
        """:meth:`Client.refit <judgefuse.client.sync_client.Client.refit>` (``POST /v1/fusion/refit``)."""
        return await self.call(calls.refit(panel, method=method, cold_start=cold_start))

    async def refits(self, panel: str | None = None, *, limit: int | None = None) -> models.RefitsOut:
        """:meth:`Client.refits <judgefuse.client.sync_client.Client.refits>`: the refit log
        (``GET /v1/fusion/refits``), newest first."""
        return await self.call(calls.refits(panel, limit))

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
