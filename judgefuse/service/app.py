"""The app factory: ``create_app(settings)`` builds a FastAPI app whose lifespan opens storage,
starts the panels and builds the gateway. Nothing is built at import time.

    uvicorn --factory judgefuse.service.app:create_app      # settings from the environment
    judgefuse serve --config judgefuse.yaml                 # the CLI

``storage`` may be injected (already open, not closed by the app), e.g. by tests.
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import jinja2
from fastapi import FastAPI

from judgefuse import __version__
from judgefuse.judges.transport.cache import RedisResponseCache, ResponseCache
from judgefuse.judges.types import LABEL_KINDS, LETTERS
from judgefuse.service.errors import install_handlers
from judgefuse.service.gateway import Gateway, PanelRuntime
from judgefuse.service.kernel.metrics import ServiceMetrics
from judgefuse.service.ops.retention_job import RetentionJob
from judgefuse.service.settings import Settings, load_settings
from judgefuse.service.storage import Storage, open_storage
from judgefuse.service.web.auth import Authenticator
from judgefuse.service.web.backpressure import BackpressureMiddleware
from judgefuse.service.web.docs import install_docs
from judgefuse.service.web.fast_judging import FastJudging
from judgefuse.service.web.middleware import (
    BodyLimitMiddleware,
    FormAsJsonMiddleware,
    QueryKeyMiddleware,
    TimingMiddleware,
)
from judgefuse.service.web.openapi import DESCRIPTION, install_openapi
from judgefuse.service.web.sessions import PageRefused, SessionSigner, SignInRequired, refused_page, signin_page

__all__ = ["create_app"]


def _install_page_handlers(app: FastAPI) -> None:
    """A page asked for by a browser without a session shows the sign-in page (401), a role
    the page is not for a page saying so (403); API clients get the JSON errors as always."""
    from fastapi import Request
    from fastapi.responses import JSONResponse, Response

    @app.exception_handler(SignInRequired)
    async def _sign_in(request: Request, exc: SignInRequired) -> Response:
        if exc.browser:
            return signin_page(request, next_url=exc.next_url, status=401)
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers())

    @app.exception_handler(PageRefused)
    async def _refused(request: Request, exc: PageRefused) -> Response:
        if exc.browser:
            return refused_page(request, exc)
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers())

log = logging.getLogger("judgefuse.service")


async def _start_panels(
    settings: Settings, environ: Mapping[str, str] | None, cache: ResponseCache | None = None
) -> dict[str, PanelRuntime]:
    from judgefuse.judges.panel import Panel, default_panel_path

    paths: list[Path] = list(settings.judging.panels) or [default_panel_path()]
    runtimes: dict[str, PanelRuntime] = {}
    try:
        for path in paths:
            panel = Panel.from_yaml(path, environ=environ, cache=cache)
            if panel.name in runtimes:
                raise ValueError(f"two panel files define panel {panel.name!r} ({path})")
            if "/" in panel.name:
                raise ValueError(f"panel name {panel.name!r} may not contain '/' ({path})")
            await panel.start()
            try:
                runtimes[panel.name] = PanelRuntime(
                    panel, fusion_method=settings.judging.fusion_method, environ=environ
                )
            except BaseException:
                await panel.aclose()
                raise
            log.info("panel %s started: %d judges, fusion %s", panel.name,
                     len(panel.judges), runtimes[panel.name].default_method)
    except BaseException:
        for runtime in runtimes.values():
            await runtime.aclose()
            await runtime.panel.aclose()
        raise
    return runtimes


def _storage_for(settings: Settings) -> Storage:
    """The configured storage, chosen by the URL's scheme (storage.registry)."""
    days = settings.storage.retention_days
    return open_storage(settings.storage.storage_url, sqlite_synchronous=settings.storage.sqlite_synchronous,
                        redis_record_ttl_s=days * 86400.0 if days else None)


def create_app(
    settings: Settings | None = None,
    *,
    storage: Storage | None = None,
    environ: Mapping[str, str] | None = None,
) -> FastAPI:
    """The gateway app. ``environ`` is where panel API keys are read (default ``os.environ``)."""
    settings = settings or load_settings()
    metrics = ServiceMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.open_mode:
            log.warning(
                "AUTHENTICATION IS OFF: %s; every request is tenant 'default'. Configure "
                "JUDGEFUSE_WEB__API_KEYS (tenant -> sha256 of the key) before exposing this service.",
                "auth_disabled is set" if settings.web.auth_disabled else "no API keys are configured",
            )
        owned = storage is None
        store = storage if storage is not None else _storage_for(settings)
        if owned:
            await store.open()
        runtimes: dict[str, PanelRuntime] = {}
        gateway: Gateway | None = None
        retention: RetentionJob | None = None
        cache_client = None
        try:
            cache = None
            if settings.judging.response_cache_url:
                import redis.asyncio as aioredis

                cache_client = aioredis.Redis.from_url(settings.judging.response_cache_url)
                cache = RedisResponseCache(cache_client, ttl_s=settings.judging.response_cache_ttl_s, fail_open=True)
            runtimes = await _start_panels(settings, os.environ if environ is None else environ, cache)
            gateway = Gateway(settings, store, runtimes, metrics)
            app.state.gateway = gateway
            retention = RetentionJob.from_settings(settings, store, store, owner=gateway.replica_id)
            app.state.retention = retention
            retention.start()
            gateway.monitoring.start(app.state.authenticator.tenants, runtimes)
            app.state.panels_started = {name: True for name in runtimes}
            # startup allocated ~1e6 long-lived objects (sklearn/scipy/pydantic schemas):
            # move them out of the collector's sight so full collections stay short
            gc.collect()
            gc.freeze()
            metrics.loop_lag.start()  # the loop's lag, for /metrics and backpressure
            yield
        finally:
            metrics.loop_lag.stop()
            app.state.panels_started = {}
            if retention is not None:
                await retention.aclose()
            if gateway is not None:
                await gateway.aclose()
            for runtime in runtimes.values():
                await runtime.aclose()
                await runtime.panel.aclose()
            if cache_client is not None:
                await cache_client.aclose()
            if owned:
                await store.close()

    app = FastAPI(
        title="judgefuse",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served from packaged files by install_docs (no CDN)
        redoc_url=None,
    )
    install_docs(app, title="judgefuse")
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.authenticator = Authenticator(settings.web.api_keys, open_mode=settings.open_mode,
                                            metrics_digest=settings.web.metrics_token)
    app.state.templates = jinja2.Environment(
        loader=jinja2.PackageLoader("judgefuse.service", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    app.state.templates.globals.update(LETTERS=LETTERS, LABEL_KINDS=LABEL_KINDS)  # one spelling, templates too
    secret = settings.review.review_session_secret
    app.state.review_sessions = SessionSigner(
        secret.get_secret_value().encode() if secret is not None else None,
        lifetime_s=settings.review.review_session_s,
    )
    app.state.panels_started = {}
    install_handlers(app)
    _install_page_handlers(app)
    from judgefuse.service.routers import ROUTERS

    for router in ROUTERS:
        router.strict_content_type = False  # a body without content-type is read as JSON
        app.include_router(router)
    install_openapi(app)  # error bodies, statuses and security schemes in /openapi.json
    if settings.web.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware, allow_origins=settings.web.cors_origins, allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "X-API-Key", "Content-Type"],
        )
    app.add_middleware(FormAsJsonMiddleware)
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=settings.web.max_body_bytes,
                       body_timeout_s=settings.web.body_timeout_s)
    app.add_middleware(QueryKeyMiddleware)
    app.add_middleware(FastJudging, max_body_bytes=settings.web.max_body_bytes,  # below FastAPI
                       body_timeout_s=settings.web.body_timeout_s)
    app.add_middleware(BackpressureMiddleware, settings=settings, metrics=metrics)
    app.add_middleware(TimingMiddleware, metrics=metrics)
    return app
