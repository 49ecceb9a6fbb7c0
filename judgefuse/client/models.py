"""The request and answer models the client speaks: the gateway's own (one definition, in
:mod:`judgefuse.service.schemas` and :mod:`judgefuse.service.responses`), named here once so
``from judgefuse.client.models import VerdictOut`` works and no client module repeats the list.
Importing them needs pydantic and judgefuse's core, not the gateway's FastAPI or Redis."""

from judgefuse.service.responses import (
    CalibrationOut,
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
    ReviewSkipRequest,
    TuneRequest,
    VerdictOut,
    VoteOut,
)

__all__ = [
    "BatchResponse", "BatchResult", "CalibrationOut", "CostOut", "ErrorBody", "ErrorField",
    "FeedbackRequest", "FuseRequest", "FuseVote", "JudgeRequest", "LabelResult", "MonitorClearOut",
    "MonitorClearRequest", "MonitorOut", "ReviewNextOut", "ReviewSkipOut", "ReviewSkipRequest",
    "ReviewStatsOut", "ThresholdsOut", "TuneOut", "TuneRequest", "VerdictOut", "VoteOut",
]
