"""``GET /v1/calibration?panel=&window_hours=&population=&structure=``: every metric per key,
all time and the window, the population estimates (:mod:`judgefuse.service.estimates.population`), and
the panel structure (:mod:`judgefuse.service.estimates.panel_estimates`); ``GET
/v1/panels/{panel}/winrate``: a win rate corrected by the labels (:mod:`.win_rates`); ``GET
/v1/panels/{panel}/plan``: audit labels a day for a target interval width (:mod:`.plan`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response

from judgefuse.calibration import DEFAULT_TH_EPS
from judgefuse.service.estimates.deps import CalibrationDep
from judgefuse.service.estimates.win_rates import WinRateOut
from judgefuse.service.responses import CalibrationOut, PlanOut
from judgefuse.service.web.deps import PanelsDep, SettingsDep, TenantDep

router = APIRouter(prefix="/v1", tags=["calibration"])


@router.get("/calibration")
async def calibration(
    tenant: TenantDep,
    served: PanelsDep,
    service: CalibrationDep,
    settings: SettingsDep,
    panel: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
    window_hours: Annotated[int, Query(ge=0, le=24 * 366)] = 24,
    eps: Annotated[float | None, Query()] = None,
    n_bins: Annotated[int | None, Query(ge=1, le=1000)] = None,
    population: Annotated[bool, Query()] = True,
    structure: Annotated[bool, Query()] = True,
    disagreements: Annotated[int, Query(ge=0, le=100)] = 10,
) -> CalibrationOut:
    """Keys: ``method:<name>:fused``, ``judge:<name>:<mode>``, ``mode:all:<mode>``.

    ``window_hours`` 0 skips the window. Metrics are those of ``metrics_from_fields`` (n,
    accuracy, ece, adaptive_ce, mce, brier, nll, ice, th_score, macroce, auroc, aurc) plus the
    reliability bins; invalid votes and undecided verdicts are counted in ``abstained``, tie
    votes (fused ties, for a method) in ``ties``: a tie is a judgment, in no metric. Each
    method and judge key's ``agreement``: Cohen's kappa of its A/B answers against the A/B
    labels, the 2x2 confusion matrix, ties and missing answers per label, over labelled
    verdicts (review and audit labels, not the population).
    Every key counts A/B labels only: ``label_kinds`` gives the ``tie`` and ``both_bad``
    labels (all time and over the window), which no accuracy or calibration figure includes.
    Those are the labelled sample's (``"sample": "labelled"``); each method and judge key also
    carries ``population``: the same metrics for all traffic of the window (all time when
    ``window_hours`` is 0), estimated per review stratum with 95% intervals, and the
    auto-accept precision (``population=false`` skips them: a few ms per key).

    ``panel_structure``: each judge's accuracy estimated by Dawid-Skene from the unlabelled
    votes next to its labelled accuracy, and the panel's effective number of independent
    judges, k / (1 + (k - 1) * rho) with rho the mean pairwise correlation of the judges'
    errors (against the labels; and, label-free, against the Dawid-Skene consensus), over the
    newest ``panel_structure_window`` verdicts, at most ``panel_structure_ttl_s`` old
    (``structure=false`` skips it).

    ``disagreements``: the labelled verdicts of the window whose fused A/B answer the label
    contradicts, most confident first, at most ``disagreements`` of them (0 skips the list)
    from the newest 500 labelled verdicts (read again only after a label changed).
    """
    from judgefuse.service.errors import FieldProblem

    runtime = served.runtime(panel, field="query.panel")
    eps = settings.estimates.th_eps if eps is None else eps
    if eps not in DEFAULT_TH_EPS:
        raise FieldProblem(
            "query.eps",
            f"must be one of the tracked values {', '.join(f'{e:g}' for e in DEFAULT_TH_EPS)}",
        )
    n_bins = settings.estimates.calibration_bins if n_bins is None else n_bins
    if 1000 % n_bins:
        raise FieldProblem("query.n_bins", "must divide 1000")
    keys = await service.report(
        tenant, runtime.name, window_hours=window_hours or None, n_bins=n_bins, eps=eps,
        population=population,
    )
    estimates = await service.structure(tenant, runtime) if structure else None
    label_kinds = await service.label_kinds(tenant, runtime.name, window_hours=window_hours or None)
    missed = (await service.disagreements(tenant, runtime.name, window_hours=window_hours or None,
                                          limit=disagreements) if disagreements else None)
    return CalibrationOut.model_validate({
        "panel": runtime.name, "window_hours": window_hours or None, "eps": eps,
        "n_bins": n_bins, "keys": keys, "panel_structure": estimates, "label_kinds": label_kinds,
        "disagreements": missed,
    })


@router.get("/panels/{panel}/winrate", response_model=WinRateOut)
async def win_rate(
    panel: str,
    tenant: TenantDep,
    served: PanelsDep,
    service: CalibrationDep,
    x: Annotated[str, Query(min_length=1, max_length=256)],
    y: Annotated[str, Query(min_length=1, max_length=256)],
    field: Annotated[str, Query(min_length=1, max_length=128)] = "system",
    window_hours: Annotated[int, Query(ge=0, le=24 * 366)] = 0,
    level: Annotated[float, Query(gt=0.5, lt=1.0)] = 0.95,
) -> Response:
    """Win rate of system X over system Y (ties count half) among the panel's stored verdicts
    whose items name the systems in metadata ``{field}_a`` (answer A's) and ``{field}_b``
    (answer B's), in either order, over the last ``window_hours`` (0: all time).

    Three estimates side by side, each with its ``level`` interval: ``corrected`` (every
    verdict's judge outcome corrected by the labels, per review stratum: valid whatever the
    judges' bias, because the labels of each stratum are a random sample of it),
    ``labels_only`` (the stratified mean of the labels) and ``judge_only`` (the judges alone:
    it inherits their bias). Unsolicited labels count in neither. Reads every stored verdict of
    the panel in the window: a report, not a dashboard poll.
    """
    from judgefuse.service.errors import FieldProblem

    runtime = served.runtime(panel, field="path.panel")
    if x == y:
        raise FieldProblem("query.y", "must name another system than x")
    body = await service.win_rate_json(tenant, runtime.name, field=field, x=x, y=y,
                                       window_hours=window_hours or None, level=level)
    return Response(body, media_type="application/json")


@router.get("/panels/{panel}/plan")
async def audit_plan(
    panel: str,
    tenant: TenantDep,
    served: PanelsDep,
    service: CalibrationDep,
    width: Annotated[float, Query(gt=0.0, le=1.0, allow_inf_nan=False)] = 0.05,
    window_days: Annotated[float, Query(gt=0.0, le=3650.0, allow_inf_nan=False)] = 7.0,
    traffic_hours: Annotated[int, Query(ge=0, le=24 * 366)] = 24 * 7,
) -> PlanOut:
    """Audit labels a day that give a ``width``-wide 95% interval (the full width, not the
    half) on the auto-accept precision and on the accuracy of all traffic over ``window_days``,
    with uniform audits and with audits by confidence band (Neyman rates: active), planned from
    the panel's stored verdicts of the last ``traffic_hours`` (0: all): their volumes a day,
    the auto-accepted verdicts' confidences, and their audit labels (unsolicited labels left
    out). The same computation as ``judgefuse plan`` on an export. A normal-approximation plan,
    not a bound. With fewer than 30 auto-accepted verdicts, or traffic spanning under an hour,
    ``plan`` is null and ``not_enough_traffic`` says what is missing. Reads every stored verdict
    of the panel in the traffic window: a report, through the report gate.
    """
    runtime = served.runtime(panel, field="path.panel")
    return await service.plan(tenant, runtime.name, width=width, window_days=window_days,
                              traffic_hours=traffic_hours or None)
