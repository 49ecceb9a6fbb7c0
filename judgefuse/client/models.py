"""The request and answer models the client speaks: the gateway's own (one definition, in
:mod:`judgefuse.service.schemas` and :mod:`judgefuse.service.responses`), named here once so
``from judgefuse.client.models import VerdictOut`` works and no client module repeats the list.
Importing them needs pydantic and judgefuse's core, not the gateway's FastAPI or Redis.

Blocks the server keeps as mappings (a key's ``all_time`` metrics, a tuning ``report``, a
verdict's ``metadata``) come back as :class:`Record`: a ``dict`` that also answers attributes
(``key.all_time.accuracy`` and ``key.all_time["accuracy"]`` both work), so the docs' attribute
style holds everywhere and code that indexes, compares or dumps the dict keeps working."""

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from judgefuse.service.responses import (
    CalibrationOut,
    PlanOut,
    RefitLogEntry,
    RefitOut,
    RefitsOut,
    ReviewNextOut,
    ReviewSkipOut,
    ReviewStatsOut,
    ThresholdsOut,
    TuneOut,
)
from judgefuse.service.schemas import (
    BatchResponse,
    BatchResult,
    CostOut,
    ErrorBody,
    ErrorField,
    FeedbackRequest,
    FuseRequest,
    FuseVote,
    JudgeRequest,
    LabelResult,
    MonitorClearOut,
    MonitorClearRequest,
    MonitorOut,
    RefitRequest,
    ReviewSkipRequest,
    TuneRequest,
    VerdictOut,
    VoteOut,
)

__all__ = [
    "BatchResponse", "Record", "typed", "BatchResult", "CalibrationOut", "CostOut", "ErrorBody", "ErrorField",
    "FeedbackRequest", "FuseRequest", "FuseVote", "JudgeRequest", "LabelResult", "MonitorClearOut",
    "MonitorClearRequest", "MonitorOut", "PlanOut", "RefitLogEntry", "RefitOut", "RefitRequest", "RefitsOut",
    "ReviewNextOut", "ReviewSkipOut", "ReviewSkipRequest",
    "ReviewStatsOut", "ThresholdsOut", "TuneOut", "TuneRequest", "VerdictOut", "VoteOut",
]


M = TypeVar("M", bound=BaseModel)


class Record(dict[str, Any]):
    """A mapping of an answer that also reads as attributes; a missing key is an
    ``AttributeError`` naming the keys there are."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no {name!r} in this record (keys: {', '.join(map(str, self)) or 'none'})") from None


def _records(value: Any) -> Any:
    if isinstance(value, dict):
        return Record({k: _records(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_records(v) for v in value]
    if isinstance(value, BaseModel):
        for name, item in list(value.__dict__.items()):
            value.__dict__[name] = _records(item)
        for name, item in list((value.__pydantic_extra__ or {}).items()):
            value.__pydantic_extra__[name] = _records(item)  # type: ignore[index]
    return value


def typed(model: type[M]) -> Callable[[Any], M]:
    """``model.model_validate`` whose mapping fields, at any depth, become :class:`Record`."""
    def parse(payload: Any) -> M:
        result: M = _records(model.model_validate(payload))
        return result
    parse.__name__ = f"typed_{model.__name__}"
    return parse
