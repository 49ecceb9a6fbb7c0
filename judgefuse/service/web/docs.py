"""``GET /docs`` (Swagger UI) and ``GET /redoc`` (ReDoc), served from packaged files.

FastAPI's default pages load their JavaScript and CSS from a CDN: on a machine without internet
access they stayed blank. The viewers' files come from the ``fastapi-offline`` package (PyPI, MIT;
it bundles Swagger UI 5.x and ReDoc 2.x, both of which read the OpenAPI 3.1 document FastAPI
emits; Swagger UI 4.x, as shipped by ``swagger-ui-bundle`` 1.1.0, showed "Unable to render this
definition"). Only its static folder is used (mounted at ``/docs/static``), not its ``FastAPI``
factory. It is a dependency of the ``service`` extra, like FastAPI itself, so there is no CDN
fallback: the pages never point outside this server (ReDoc without its Google Fonts link).
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["STATIC_PREFIX", "VIEWER_FILES", "install_docs", "viewer_dir"]

STATIC_PREFIX = "/docs/static"
VIEWER_FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")


def viewer_dir() -> Path:
    """The packaged folder holding :data:`VIEWER_FILES` (``fastapi_offline/static``)."""
    folder = Path(str(importlib.resources.files("fastapi_offline") / "static"))
    missing = [name for name in VIEWER_FILES if not (folder / name).is_file()]
    if missing:
        raise RuntimeError(f"fastapi-offline's static folder {folder} lacks {', '.join(missing)}: "
                           "reinstall judgefuse[service]")
    return folder


def install_docs(app: FastAPI, *, title: str) -> None:
    """Serve ``/docs`` (with its OAuth2 redirect page) and ``/redoc`` from local files. Create
    ``app`` with ``docs_url=None, redoc_url=None`` first."""
    app.mount(STATIC_PREFIX, StaticFiles(directory=viewer_dir()), name="api-docs-static")
    openapi_url = app.openapi_url or "/openapi.json"
    icon = f"{STATIC_PREFIX}/favicon.png"
    redirect = "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=openapi_url, title=f"{title} - API docs",
                                   oauth2_redirect_url=redirect,
                                   swagger_js_url=f"{STATIC_PREFIX}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{STATIC_PREFIX}/swagger-ui.css",
                                   swagger_favicon_url=icon)

    @app.get(redirect, include_in_schema=False)
    async def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url=openapi_url, title=f"{title} - API reference",
                              redoc_js_url=f"{STATIC_PREFIX}/redoc.standalone.js",
                              redoc_favicon_url=icon, with_google_fonts=False)
