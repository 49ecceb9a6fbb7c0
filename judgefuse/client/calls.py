"""Every endpoint a pipeline uses, as a :class:`~judgefuse.client.retry.Call`: the request and
the model its answer is read into. ``Client`` and ``AsyncClient`` only send them.

Requests are built with the server's own models (:mod:`judgefuse.service.schemas`: one
definition, not two), so a bad field is refused here, before a round trip, as the client's
:class:`~judgefuse.client.errors.InvalidRequest` naming the field the way the gateway would
(``body.label``; pydantic's error is the ``__cause__``), and only the fields the caller gave
are sent. Answers are read with :func:`models.typed`, so mapping blocks read as attributes. Judge and fuse requests without an
``id`` get one here (:func:`new_id`): a retry of the same request then joins the verdict in
flight on the gateway, or replays the stored one, instead of calling the judges again
(the gateway's single flight: :mod:`judgefuse.service.judging.single_flight`).
"""

from __future__ import annotations

import functools
import re
import time
import uuid
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import pydantic

from judgefuse.client import models
from judgefuse.client.errors import InvalidRequest, TooLarge
from judgefuse.client.retry import Call, Outcome, RetryPolicy, Sleep, Step, parse_answer, send_with_retries

P = ParamSpec("P")
R = TypeVar("R")


def checked(build: Callable[P, R]) -> Callable[P, R]:
    """A request builder whose refusals are the client's :class:`InvalidRequest`."""
    @functools.wraps(build)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return build(*args, **kwargs)
        except pydantic.ValidationError as exc:
            raise InvalidRequest.from_validation(exc) from exc
    return wrapper

__all__ = [
    "BatchLimit",
    "calibration",
    "feedback",
    "fuse",
    "judge",
    "judge_request",
    "monitor",
    "monitor_clear",
    "new_id",
    "plan",
    "refit",
    "refits",
    "review_next",
    "review_skip",
    "review_stats",
    "run_batch",
    "thresholds",
    "tune",
    "verdict",
]

DEFAULT_MAX_BATCH_ITEMS = 64
"""The gateway's default ``max_batch_items``; a smaller limit is learned from its 413."""


def new_id() -> str:
    """A fresh verdict id (uuid4, 32 hex digits), as the gateway would draw itself."""
    return uuid.uuid4().hex


def _body(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", exclude_unset=True)


def _params(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _annotator(annotator: str | None) -> dict[str, str] | None:
    return None if annotator is None else {"X-Annotator": annotator}


@checked
def judge_request(item: models.JudgeRequest | Mapping[str, Any], *, fuse_votes: bool = False) -> dict[str, Any]:
    """One ``/v1/judge`` (or, ``fuse_votes``, ``/v1/fuse``) item as sent: checked against the
    server's model, with an id drawn when it has none."""
    model = models.FuseRequest if fuse_votes else models.JudgeRequest
    valid = item if isinstance(item, model) else model.model_validate(
        item.model_dump(exclude_unset=True) if isinstance(item, models.JudgeRequest) else dict(item))
    body = _body(valid)
    body.setdefault("id", new_id())
    return body


@checked
def judge(**fields: Any) -> Call[models.VerdictOut]:
    return Call("POST", "/v1/judge", models.typed(models.VerdictOut),
                json=judge_request(_present(fields)))


@checked
def fuse(**fields: Any) -> Call[models.VerdictOut]:
    return Call("POST", "/v1/fuse", models.typed(models.VerdictOut),
                json=judge_request(_present(fields), fuse_votes=True))


def _present(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


@checked
def feedback(verdict_id: str, label: str, annotator: str | None = None) -> Call[models.LabelResult]:
    body = _body(models.FeedbackRequest.model_validate({"verdict_id": verdict_id, "label": label}))
    return Call("POST", "/v1/feedback", models.typed(models.LabelResult), json=body,
                headers=_annotator(annotator))


@checked
def verdict(verdict_id: str) -> Call[models.VerdictOut]:
    if not verdict_id or "/" in verdict_id:
        raise InvalidRequest.before_sending([("verdict_id", f"not a verdict id: {verdict_id!r}")])
    return Call("GET", f"/v1/verdicts/{verdict_id}", models.typed(models.VerdictOut))


@checked
def calibration(panel: str | None = None, *, window_hours: int | None = None,
                population: bool | None = None, structure: bool | None = None) -> Call[models.CalibrationOut]:
    params = _params(panel=panel, window_hours=window_hours,
                     population=None if population is None else str(population).lower(),
                     structure=None if structure is None else str(structure).lower())
    return Call("GET", "/v1/calibration", models.typed(models.CalibrationOut), params=params)


@checked
def plan(panel: str, *, width: float | None = None, window_days: float | None = None,
         traffic_hours: int | None = None) -> Call[models.PlanOut]:
    if not panel or "/" in panel:
        raise InvalidRequest.before_sending([("path.panel", f"not a panel name: {panel!r}")])
    return Call("GET", f"/v1/panels/{panel}/plan", models.typed(models.PlanOut),
                params=_params(width=width, window_days=window_days, traffic_hours=traffic_hours))


@checked
def thresholds(panel: str | None = None) -> Call[models.ThresholdsOut]:
    return Call("GET", "/v1/thresholds", models.typed(models.ThresholdsOut), params=_params(panel=panel))


@checked
def tune(**fields: Any) -> Call[models.TuneOut]:
    body = _body(models.TuneRequest.model_validate(_present(fields)))
    return Call("POST", "/v1/thresholds/tune", models.typed(models.TuneOut), json=body)


@checked
def review_next(panel: str | None = None, n: int | None = None,
                annotator: str | None = None) -> Call[models.ReviewNextOut]:
    return Call("GET", "/v1/review/next", models.typed(models.ReviewNextOut),
                params=_params(panel=panel, n=n), headers=_annotator(annotator))


@checked
def review_skip(verdict_id: str, annotator: str | None = None) -> Call[models.ReviewSkipOut]:
    body = _body(models.ReviewSkipRequest.model_validate({"verdict_id": verdict_id}))
    return Call("POST", "/v1/review/skip", models.typed(models.ReviewSkipOut), json=body,
                headers=_annotator(annotator))


@checked
def review_stats(panel: str | None = None) -> Call[models.ReviewStatsOut]:
    return Call("GET", "/v1/review/stats", models.typed(models.ReviewStatsOut), params=_params(panel=panel))


@checked
def monitor(panel: str | None = None) -> Call[models.MonitorOut]:
    return Call("GET", "/v1/monitor", models.typed(models.MonitorOut), params=_params(panel=panel))


@checked
def monitor_clear(panel: str | None = None) -> Call[models.MonitorClearOut]:
    body = _body(models.MonitorClearRequest.model_validate(_present({"panel": panel})))
    return Call("POST", "/v1/monitor/clear", models.typed(models.MonitorClearOut), json=body)


@checked
def refit(panel: str | None = None, *, method: str | None = None,
          cold_start: bool | None = None) -> Call[models.RefitOut]:
    body = _body(models.RefitRequest.model_validate(_present({"panel": panel, "method": method,
                                                              "cold_start": cold_start})))
    return Call("POST", "/v1/fusion/refit", models.typed(models.RefitOut), json=body)


REFITS_KEPT = 50
"""The most entries ``GET /v1/fusion/refits`` answers (``limit``, 1 to 50; the log keeps 50)."""


@checked
def refits(panel: str | None = None, limit: int | None = None) -> Call[models.RefitsOut]:
    if limit is not None and not (isinstance(limit, int) and 1 <= limit <= REFITS_KEPT):
        raise InvalidRequest.before_sending([("query.limit", f"from 1 to {REFITS_KEPT}, not {limit!r}")],
                                            method="GET", path="/v1/fusion/refits")
    return Call("GET", "/v1/fusion/refits", models.typed(models.RefitsOut),
                params=_params(panel=panel, limit=limit))


# ------------------------------------------------------------------------------ batches
@dataclass
class BatchLimit:
    """Items per batch request: the gateway's ``max_batch_items``, learned from its 413
    (``body.items: at most N items``) and kept for the client's later batches."""

    items: int = DEFAULT_MAX_BATCH_ITEMS


_AT_MOST = re.compile(r"at most (\d+)")


def _items_limit(exc: TooLarge) -> int | None:
    for field in exc.fields:
        match = _AT_MOST.search(field.problem)
        if field.field == "body.items" and match:
            return int(match.group(1))
    return None


def batch_bodies(items: Iterable[models.JudgeRequest | Mapping[str, Any]], *, fuse_votes: bool) -> list[dict[str, Any]]:
    return [judge_request(item, fuse_votes=fuse_votes) for item in items]


def run_batch(
    path: str, bodies: list[dict[str, Any]], policy: RetryPolicy, limit: BatchLimit,
    clock: Callable[[], float] = time.monotonic,
) -> Generator[Step, Outcome | None, models.BatchResponse]:
    """Steps to judge ``bodies`` through a batch endpoint, in chunks of ``limit.items``,
    one :class:`models.BatchResponse` for all of them in their order (``index`` is the position in
    ``bodies``). Items the gateway answers 429 or 503 (admission, quorum) are sent again, in
    one batch after the longest of their ``retry_after_s``, within the policy's deadline;
    every item carries its id, so an item judged meanwhile is replayed, not judged again."""
    deadline = float("inf") if policy.deadline_s is None else clock() + policy.deadline_s
    results: dict[int, models.BatchResult] = {}
    pending = list(range(len(bodies)))
    rounds = 0
    while pending:
        rounds += 1
        again: list[int] = []
        waits: list[float] = []
        start = 0
        while start < len(pending):
            chunk = pending[start:start + limit.items]
            call = Call("POST", path, models.typed(models.BatchResponse),
                        json={"items": [bodies[i] for i in chunk]})
            try:
                response = yield from send_with_retries(call, policy, clock)
            except TooLarge as exc:
                smaller = _items_limit(exc)
                if smaller is None or smaller >= len(chunk):
                    raise
                limit.items = smaller
                continue
            for result in parse_answer(call, response).results:
                index = chunk[result.index]
                results[index] = result.model_copy(update={"index": index})
                if result.status in policy.statuses:
                    again.append(index)
                    waits.append(float((result.error or {}).get("retry_after_s") or 0))
            start += len(chunk)
        pending = again
        if pending:
            wait = max(waits) or policy.backoff(rounds)
            if rounds >= policy.max_attempts or clock() + wait > deadline:
                break
            yield Sleep(wait)
    ordered = [results[i] for i in range(len(bodies))]
    n_ok = sum(1 for r in ordered if r.verdict is not None)
    return models.BatchResponse(
        results=ordered, n_ok=n_ok, n_failed=len(ordered) - n_ok,
        cost=models.CostOut.total(r.verdict.cost for r in ordered if r.verdict is not None),
    )


def judged(body: dict[str, Any]) -> Call[models.VerdictOut]:
    """``/v1/judge`` for a body :func:`judge_request` built already (the pair helpers)."""
    return Call("POST", "/v1/judge", models.typed(models.VerdictOut), json=body)
