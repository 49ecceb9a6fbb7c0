"""Every slice's router, in the order the app factory mounts them (the order of /openapi.json).

Every slice's route modules are named ``<what>_routes.py``, the console's included."""

from __future__ import annotations

from judgefuse.service.console import action_routes as actions
from judgefuse.service.console import calibration_routes as calibration_page
from judgefuse.service.console import dashboard_routes as dashboard
from judgefuse.service.console import page_routes as console
from judgefuse.service.console import signin_routes as signin
from judgefuse.service.estimates import estimate_routes as calibration
from judgefuse.service.judging import judge_routes as judge
from judgefuse.service.judging import verdict_routes as verdicts
from judgefuse.service.learning import refit_routes as fusion
from judgefuse.service.learning import threshold_routes as thresholds
from judgefuse.service.monitoring import metrics_routes as metrics
from judgefuse.service.monitoring import monitor_routes as monitor
from judgefuse.service.ops import health_routes as health
from judgefuse.service.review import annotator_routes as annotators
from judgefuse.service.review import feedback_routes as feedback
from judgefuse.service.review import page_routes as review_page
from judgefuse.service.review import review_routes as review

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
    annotators.router,
    monitor.router,
    review_page.router,
    dashboard.router,
    calibration_page.router,
    console.router,
    signin.router,
    actions.router,
]
