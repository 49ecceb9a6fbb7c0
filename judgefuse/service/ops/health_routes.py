"""``GET /healthz`` (the process answers) and ``GET /readyz`` (storage answers, panels started)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from judgefuse.service.responses import HealthOut, ReadyOut

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> HealthOut:
    return HealthOut(status="ok")


@router.get("/readyz", response_model=ReadyOut, responses={
    503: {"model": ReadyOut, "description": "Not ready: storage does not answer or a panel has not started"},
})
async def readyz(request: Request) -> JSONResponse:
    state = request.app.state
    gateway = getattr(state, "gateway", None)
    storage_ok = gateway is not None and await gateway.storage.ping()
    panels = getattr(state, "panels_started", {})
    ready = storage_ok and bool(panels) and all(panels.values())
    body = ReadyOut(status="ready" if ready else "not ready", storage=storage_ok, panels=panels)
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)
