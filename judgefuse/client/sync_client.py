"""``Client``: the gateway's endpoints as blocking methods (httpx), with retries and ids.

The request shapes and the retry policy live in :mod:`judgefuse.client.calls` and
:mod:`judgefuse.client.retry`; this class sends them and sleeps between attempts.
:class:`~judgefuse.client.async_client.AsyncClient` mirrors every method with ``await``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

import httpx

from judgefuse.client import calls, models
from judgefuse.client import retry as attempts
from judgefuse.client.errors import BadResponse, InvalidRequest, JudgefuseError
from judgefuse.client.pairs import Pair, PairResult, PairRun, gateway_down
from judgefuse.client.retry import (
    BreakerOpen,
    Call,
    Outcome,
    RetryPolicy,
    Send,
    Sleep,
    Step,
    parse_answer,
    send_with_retries,
)
from judgefuse.client.settings import DEFAULT_MAX_RESPONSE_BYTES, http_options

__all__ = ["Client"]

R = TypeVar("R")
T = TypeVar("T")


class Client:
    """A blocking client of one judgefuse gateway. Thread-safe (one connection pool); use it
    as a context manager or call :meth:`close`.

    ``retry`` decides what is sent again (:class:`~judgefuse.client.retry.RetryPolicy`: 429
    and 503 after ``Retry-After``, no answer with backoff, within a deadline; never another
    4xx; ``deadline_s`` covers the whole answer, body included). ``breaker`` decides when a
    ``judge_pairs`` run gives up on a gateway that stopped answering
    (:class:`~judgefuse.client.retry.CircuitBreaker`: 5 connection failures in a row or 30 s
    without an answer). ``max_response_bytes`` caps the body read from any answer (64 MB).
    ``http_client`` replaces the httpx client the others build (its own base URL and headers
    then apply). Every failure is a :class:`~judgefuse.client.errors.JudgefuseError`."""

    def __init__(self, base_url: str = "http://localhost:8000", api_key: str | None = None, *,
                 timeout: float | httpx.Timeout | None = None, retry: RetryPolicy | None = None,
                 headers: Mapping[str, str] | None = None, breaker: attempts.CircuitBreaker | None = None,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
                 http_client: httpx.Client | None = None) -> None:
        self.retry = retry or RetryPolicy()
        self.breaker = breaker or attempts.CircuitBreaker()
        self.max_response_bytes = max_response_bytes
        self.last_breaker: attempts.Breaker | None = None
        """The breaker of the latest ``judge_pairs`` run (its ``attempts`` and ``failed`` sends)."""
        self.batch_limit = calls.BatchLimit()
        self._http = http_client or httpx.Client(**http_options(base_url, api_key, headers, timeout))  # type: ignore[arg-type]

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ sending
    def _drive(self, steps: Generator[Step, Outcome | None, R], breaker: attempts.Breaker | None = None) -> R:
        outcome: Outcome | None = None
        while True:
            try:
                step = steps.send(outcome)
            except StopIteration as done:
                return done.value
            if isinstance(step, Sleep):
                if breaker is None:
                    time.sleep(step.seconds)
                elif breaker.tripped.wait(step.seconds):  # woken when another call opens it
                    raise BreakerOpen
                outcome = None
                continue
            if breaker is not None:
                breaker.check()
            try:
                outcome = self._send(step)
            except httpx.TransportError as exc:
                outcome = exc
            except httpx.HTTPError as exc:  # a body that does not decode, too many redirects
                raise BadResponse(0, f"{type(exc).__name__}: {exc}", method=step.call.method,
                                  path=step.call.path) from exc
            if breaker is not None:
                breaker.check(outcome)

    def _send(self, step: Send) -> httpx.Response:
        """One attempt, its body read in chunks under the call's deadline and the size cap
        (httpx's own timeouts bound each read, not the whole answer)."""
        call = step.call
        timeout = attempts.attempt_timeout(self._http.timeout, step.deadline)
        with self._http.stream(call.method, call.path, json=call.json, params=call.params,
                               headers=call.headers, timeout=timeout) as response:
            reader = attempts.BodyReader(call, response, step.deadline, self.max_response_bytes)
            for chunk in response.iter_bytes():
                reader.add(chunk)
            return reader.done()

    def call(self, call: Call[T]) -> T:
        """Send one :class:`~judgefuse.client.retry.Call` with retries; its parsed answer."""
        return parse_answer(call, self._drive(send_with_retries(call, self.retry)))

    # ------------------------------------------------------------------ judging
    def judge(self, *, question: str, answer_a: str, answer_b: str, panel: str | None = None,
              id: str | None = None, label: str | None = None, category: str | None = None,
              method: str | None = None, metadata: Mapping[str, Any] | None = None) -> models.VerdictOut:
        """Judge one pair (``POST /v1/judge``). Without ``id`` one is drawn, so a retry joins
        the verdict in flight instead of judging twice; the verdict's ``id`` is it."""
        return self.call(calls.judge(question=question, answer_a=answer_a, answer_b=answer_b, panel=panel,
                                     id=id, label=label, category=category, method=method, metadata=metadata))

    def fuse(self, *, question: str, answer_a: str, answer_b: str,
             votes: Sequence[models.FuseVote | Mapping[str, Any]], panel: str | None = None,
             id: str | None = None, label: str | None = None, category: str | None = None,
             method: str | None = None, metadata: Mapping[str, Any] | None = None) -> models.VerdictOut:
        """Fuse votes cast elsewhere (``POST /v1/fuse``): ``[{"judge", "choice", "confidence"}]``."""
        return self.call(calls.fuse(question=question, answer_a=answer_a, answer_b=answer_b, votes=votes,
                                    panel=panel, id=id, label=label, category=category, method=method,
                                    metadata=metadata))

    def judge_batch(self, items: Iterable[models.JudgeRequest | Mapping[str, Any]]) -> models.BatchResponse:
        """Judge many pairs through ``POST /v1/judge/batch``, in chunks of the server's
        ``max_batch_items``; one result per item, in order (see :func:`calls.run_batch`)."""
        bodies = calls.batch_bodies(items, fuse_votes=False)
        return self._drive(calls.run_batch("/v1/judge/batch", bodies, self.retry, self.batch_limit))

    def fuse_batch(self, items: Iterable[models.JudgeRequest | Mapping[str, Any]]) -> models.BatchResponse:
        """:meth:`judge_batch` for ``/v1/fuse`` bodies (each with its ``votes``)."""
        bodies = calls.batch_bodies(items, fuse_votes=True)
        return self._drive(calls.run_batch("/v1/fuse/batch", bodies, self.retry, self.batch_limit))

    def judge_pairs(self, pairs: Iterable[Pair], *, panel: str | None = None, concurrency: int = 8,
                    resume: str | os.PathLike[str] | None = None, progress: bool = True,
                    namespace: str = "") -> Iterator[PairResult]:
        """Judge ``pairs`` with at most ``concurrency`` in flight, yielding each result as it
        finishes (not in input order), resumable from ``resume`` (:mod:`judgefuse.client.pairs`).

        When the gateway stops answering (the client's ``breaker``) the run stops with one
        :class:`~judgefuse.client.errors.GatewayDown` naming the pairs finished and how to
        resume; the pairs cut off are not written to ``resume``, so a rerun judges them."""
        if concurrency < 1:
            raise InvalidRequest.before_sending([("concurrency", f"at least 1, not {concurrency}")])
        breaker = attempts.Breaker(self.breaker)
        self.last_breaker = breaker
        with PairRun(pairs, panel=panel, resume=resume, progress=progress, namespace=namespace) as run, \
                ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="judgefuse") as pool:
            running: dict[Future[Any], tuple[int, dict[str, Any]]] = {}
            todo = run.todo()
            try:
                while not breaker.open:
                    for index, body in todo:
                        running[pool.submit(self._outcome, body, breaker)] = (index, body)
                        if len(running) >= concurrency:
                            break
                    if not running:
                        return
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in finished:
                        index, body = running.pop(future)
                        if (result := run.outcome(index, body, future.result(), breaker.open)) is not None:
                            yield result
                for future in running:  # the breaker opened: the calls in flight stop at once
                    future.cancel()
                for future in list(running):
                    if not future.cancelled():
                        index, body = running.pop(future)
                        if (result := run.outcome(index, body, future.result(), True)) is not None:
                            yield result
                raise gateway_down(run, breaker, str(self._http.base_url))
            finally:
                for future in running:
                    future.cancel()

    def _outcome(self, body: dict[str, Any], breaker: attempts.Breaker) -> models.VerdictOut | JudgefuseError | BreakerOpen:
        call = calls.judged(body)
        try:
            return parse_answer(call, self._drive(send_with_retries(call, self.retry), breaker))
        except (JudgefuseError, BreakerOpen) as exc:
            return exc

    # ------------------------------------------------------------------ labels and reads
    def feedback(self, verdict_id: str, label: str, *, annotator: str | None = None) -> models.LabelResult:
        """Label a verdict (``POST /v1/feedback``); the same label again is a no-op."""
        return self.call(calls.feedback(verdict_id, label, annotator))

    def verdict(self, verdict_id: str) -> models.VerdictOut:
        """A stored verdict (``GET /v1/verdicts/{id}``); :class:`NotFound` when unknown."""
        return self.call(calls.verdict(verdict_id))

    def calibration(self, panel: str | None = None, *, window_hours: int | None = None,
                    population: bool | None = None, structure: bool | None = None) -> models.CalibrationOut:
        """The live calibration record (``GET /v1/calibration``)."""
        return self.call(calls.calibration(panel, window_hours=window_hours, population=population,
                                           structure=structure))

    def plan(self, panel: str, *, width: float | None = None, window_days: float | None = None,
             traffic_hours: int | None = None) -> models.PlanOut:
        """Audit labels a day for a ``width``-wide 95% interval (default 0.05) on the auto-accept
        precision and on the accuracy over ``window_days`` (default 7), uniform and by
        confidence band, from the panel's stored traffic of the last ``traffic_hours`` (default
        168; 0: all) (``GET /v1/panels/{panel}/plan``). ``plan`` is None and
        ``not_enough_traffic`` says why when the traffic is too little to plan from."""
        return self.call(calls.plan(panel, width=width, window_days=window_days, traffic_hours=traffic_hours))

    def thresholds(self, panel: str | None = None) -> models.ThresholdsOut:
        """The panel's routing threshold and its history (``GET /v1/thresholds``)."""
        return self.call(calls.thresholds(panel))

    def tune(self, *, target_precision: float, panel: str | None = None, delta: float | None = None,
             min_count: int | None = None, method: str | None = None) -> models.TuneOut:
        """Tune a threshold from the labels (``POST /v1/thresholds/tune``)."""
        return self.call(calls.tune(target_precision=target_precision, panel=panel, delta=delta,
                                    min_count=min_count, method=method))

    # ------------------------------------------------------------------ learned fusion
    def refit(self, panel: str | None = None, *, method: str | None = None,
              cold_start: bool | None = None) -> models.RefitOut:
        """Refit learned fusion from the labels now (``POST /v1/fusion/refit``; ``cold_start``:
        fit the label-free method on the stored votes): ``status`` (``promoted``, ``kept``,
        ``skipped``, ``failed``) and ``reason``."""
        return self.call(calls.refit(panel, method=method, cold_start=cold_start))

    def refits(self, panel: str | None = None, *, limit: int | None = None) -> models.RefitsOut:
        """The refit log (``GET /v1/fusion/refits``): the panel's newest refits and cold-start
        fits, newest first (``limit``: 1 to 50, default 20), each a
        :class:`~judgefuse.service.responses.RefitLogEntry` with ``at``, ``trigger``,
        ``status``, ``reason``, ``n_labels`` and the model version promoted."""
        return self.call(calls.refits(panel, limit))

    # ------------------------------------------------------------------ review and monitor
    def review_next(self, panel: str | None = None, *, n: int | None = None,
                    annotator: str | None = None) -> models.ReviewNextOut:
        """Lease up to ``n`` items of the review queue (``GET /v1/review/next``)."""
        return self.call(calls.review_next(panel, n, annotator))

    def review_skip(self, verdict_id: str, *, annotator: str | None = None) -> models.ReviewSkipOut:
        """Give a leased item back (``POST /v1/review/skip``)."""
        return self.call(calls.review_skip(verdict_id, annotator))

    def review_label(self, verdict_id: str, label: str, *, annotator: str | None = None) -> models.LabelResult:
        """Label a leased item: a label is feedback (it ends the lease, whoever holds it)."""
        return self.call(calls.feedback(verdict_id, label, annotator))

    def review_stats(self, panel: str | None = None) -> models.ReviewStatsOut:
        return self.call(calls.review_stats(panel))

    def monitor(self, panel: str | None = None) -> models.MonitorOut:
        """The precision monitor of the current threshold version (``GET /v1/monitor``)."""
        return self.call(calls.monitor(panel))

    def monitor_clear(self, panel: str | None = None) -> models.MonitorClearOut:
        """End an alarm (``POST /v1/monitor/clear``, an operator's call)."""
        return self.call(calls.monitor_clear(panel))
