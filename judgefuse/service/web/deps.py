"""Dependencies as ``Annotated`` aliases (full-stack-fastapi-template's ``api/deps.py`` style).

Everything comes from ``request.app.state``, filled by the app factory's lifespan: nothing is
built at import time. A route takes its own slice's service (``JudgingDep``, ``LabelsDep``,
``ReviewQueueDep``, ``LearningDep``, ``CalibrationDep``, ``MonitoringDep``, ``VerdictsDep``), built by the gateway
(the composition root), rather than the gateway's storage: what a slice reads and writes stays
in that slice. The functions are ``async def`` on purpose: FastAPI runs a plain ``def``
dependency in a worker thread, which costs more than the dependency itself.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel

from judgefuse.service.estimates.service import CalibrationService
from judgefuse.service.gateway import Gateway
from judgefuse.service.judging.pipeline import JudgePipeline
from judgefuse.service.learning.service import LearningService
from judgefuse.service.monitoring.metrics import ServiceMetrics
from judgefuse.service.monitoring.service import MonitorService
from judgefuse.service.review.accounts import CREDENTIAL_PREFIX, AnnotatorAccounts
from judgefuse.service.review.labels import LabelService
from judgefuse.service.review.queue import ReviewQueue
from judgefuse.service.review.verdicts import VerdictReads
from judgefuse.service.settings import Settings
from judgefuse.service.web.auth import Authenticator, Caller, Principal, principal_for, refuse_annotator

__all__ = [
    "AccountsDep", "CalibrationDep", "CallerDep", "GatewayDep", "JudgingDep", "LabelsDep", "LearningDep", "MetricsDep",
    "MonitoringDep", "ReviewQueueDep", "ReviewerDep", "SettingsDep", "TenantDep", "VerdictsDep", "json_response",
]


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_gateway(request: Request) -> Gateway:
    return request.app.state.gateway


async def get_judging(request: Request) -> JudgePipeline:
    return request.app.state.gateway.judging


async def get_labels(request: Request) -> LabelService:
    return request.app.state.gateway.labels


async def get_verdicts(request: Request) -> VerdictReads:
    return request.app.state.gateway.verdicts


async def get_review_queue(request: Request) -> ReviewQueue:
    return request.app.state.gateway.review_queue


async def get_learning(request: Request) -> LearningService:
    return request.app.state.gateway.learning


async def get_calibration(request: Request) -> CalibrationService:
    return request.app.state.gateway.calibration


async def get_monitoring(request: Request) -> MonitorService:
    return request.app.state.gateway.monitoring


async def get_metrics(request: Request) -> ServiceMetrics:
    return request.app.state.metrics


async def get_accounts(request: Request) -> AnnotatorAccounts:
    return request.app.state.gateway.annotators


async def get_tenant(request: Request) -> str:
    """The caller's tenant from ``Authorization: Bearer <key>`` or ``X-API-Key`` (else 401);
    a live annotator credential is refused here with 403 (its routes take ``ReviewerDep``).

    Headers are read directly (not as ``Header`` parameters) to keep per-request cost low.
    """
    authenticator: Authenticator = request.app.state.authenticator
    headers = request.headers
    authorization, x_api_key = headers.get("authorization"), headers.get("x-api-key")
    if CREDENTIAL_PREFIX in (authorization or x_api_key or ""):
        await refuse_annotator(authenticator, request.app.state.gateway.annotators,
                               authorization, x_api_key)
    return authenticator.tenant_for(authorization, x_api_key)


async def get_reviewer(request: Request) -> Principal:
    """A tenant key or an annotator credential (lease, label, skip, own history); else 401."""
    headers = request.headers
    return await principal_for(request.app.state.authenticator, request.app.state.gateway.annotators,
                               headers.get("authorization"), headers.get("x-api-key"))


async def get_caller(request: Request) -> Caller:
    """The operator (metrics token) or a tenant (its API key); else 401. For the views that
    differ between the two (``/metrics``, the dashboard)."""
    authenticator: Authenticator = request.app.state.authenticator
    headers = request.headers
    authorization, x_api_key = headers.get("authorization"), headers.get("x-api-key")
    if CREDENTIAL_PREFIX in (authorization or x_api_key or ""):  # an annotator: 403, not 401
        await refuse_annotator(authenticator, request.app.state.gateway.annotators,
                               authorization, x_api_key)
    return authenticator.caller(authorization, x_api_key)


def json_response(model: BaseModel, status_code: int = 200) -> Response:
    """Serialise a response model once (the route keeps ``response_model`` for the docs;
    returning a Response skips FastAPI's re-validation of the returned object)."""
    return Response(model.model_dump_json(), status_code=status_code, media_type="application/json")


SettingsDep = Annotated[Settings, Depends(get_settings)]
GatewayDep = Annotated[Gateway, Depends(get_gateway)]
JudgingDep = Annotated[JudgePipeline, Depends(get_judging)]
LabelsDep = Annotated[LabelService, Depends(get_labels)]
VerdictsDep = Annotated[VerdictReads, Depends(get_verdicts)]
ReviewQueueDep = Annotated[ReviewQueue, Depends(get_review_queue)]
LearningDep = Annotated[LearningService, Depends(get_learning)]
CalibrationDep = Annotated[CalibrationService, Depends(get_calibration)]
MonitoringDep = Annotated[MonitorService, Depends(get_monitoring)]
MetricsDep = Annotated[ServiceMetrics, Depends(get_metrics)]
TenantDep = Annotated[str, Depends(get_tenant)]
ReviewerDep = Annotated[Principal, Depends(get_reviewer)]
AccountsDep = Annotated[AnnotatorAccounts, Depends(get_accounts)]
CallerDep = Annotated[Caller, Depends(get_caller)]
