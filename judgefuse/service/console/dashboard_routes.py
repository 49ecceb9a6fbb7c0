"""``GET /dashboard``: a redirect to ``/console/calibration`` (:mod:`.calibration`), query string
kept, so bookmarks and links to ``/dashboard`` keep working."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse

router = APIRouter(tags=["console"])

MOVED_TO = "/console/calibration"


@router.get("/dashboard", include_in_schema=False)
async def dashboard(request: Request) -> RedirectResponse:
    query = request.url.query
    return RedirectResponse(MOVED_TO + (f"?{query}" if query else ""), status_code=307)
