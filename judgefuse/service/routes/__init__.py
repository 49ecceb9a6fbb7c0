"""One router module per resource; :data:`ROUTERS` is what the app factory mounts."""

from __future__ import annotations

from judgefuse.service.routes import (
    calibration,
    dashboard,
    feedback,
    fusion,
    health,
    judge,
    metrics,
    monitor,
    review,
    review_page,
    thresholds,
    verdicts,
)

ROUTERS = [
    health.router,
    judge.router,
    verdicts.router,
    feedback.router,
    calibration.router,
    thresholds.router,
    fusion.router,
    metrics.router,
    review.router,
    monitor.router,
    review_page.router,
    dashboard.router,
]
