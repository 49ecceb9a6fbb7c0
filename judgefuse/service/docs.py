"""``GET /docs``: Swagger UI served from packaged files, so it renders without internet.

FastAPI's default ``/docs`` page loads Swagger UI's JavaScript and CSS from a CDN: on a machine
without internet access the page stayed blank. The ``swagger-ui-bundle`` package (PyPI, Apache-2.0)
ships those files; they are mounted at ``/docs/static`` and the page points there. ReDoc (also
CDN-only) is not served. Without the package installed, ``/docs`` falls back to the CDN page
(a warning is logged at start).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["STATIC_PREFIX", "install_docs", "swagger_ui_dir"]

log = logging.getLogger("judgefuse.service")
STATIC_PREFIX = "/docs/static"


def swagger_ui_dir() -> Path | None:
    """The packaged Swagger UI folder, or None when ``swagger-ui-bundle`` is not installed."""
    try:
        from swagger_ui_bundle import swagger_ui_path
    except ImportError:
        return None
    path = Path(str(swagger_ui_path))
    return path if (path / "swagger-ui-bundle.js").is_file() else None


def install_docs(app: FastAPI, *, title: str) -> None:
    """Serve ``/docs`` (and its OAuth2 redirect page) from local files. Create ``app`` with
    ``docs_url=None, redoc_url=None`` first."""
    local = swagger_ui_dir()
    if local is None:
        log.warning("swagger-ui-bundle is not installed: /docs loads Swagger UI from a CDN")
        js, css, icon = (None, None, None)
    else:
        app.mount(STATIC_PREFIX, StaticFiles(directory=local), name="swagger-ui")
        js = f"{STATIC_PREFIX}/swagger-ui-bundle.js"
        css = f"{STATIC_PREFIX}/swagger-ui.css"
        icon = f"{STATIC_PREFIX}/favicon-32x32.png"
    redirect = "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        extra: dict[str, Any] = {k: v for k, v in {"swagger_js_url": js, "swagger_css_url": css,
                                                    "swagger_favicon_url": icon}.items() if v is not None}
        return get_swagger_ui_html(openapi_url=app.openapi_url or "/openapi.json",
                                   title=f"{title} - API docs", oauth2_redirect_url=redirect,
                                   **extra)

    @app.get(redirect, include_in_schema=False)
    async def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
