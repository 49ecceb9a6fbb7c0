"""``judgefuse serve [--config FILE] [--host HOST] [--port PORT]``: run the gateway with uvicorn.

With no configuration it serves on SQLite (``./judgefuse.sqlite3``) with the packaged default
panel (a local SmolLM2 served by llama.cpp, started by the panel), open (tenant ``default``),
so ``curl -s localhost:8000/v1/judge -d '{"question": ..., "answer_a": ..., "answer_b": ...}'``
returns a verdict. The lead wires :func:`add_commands` into ``judgefuse/cli.py``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the CLI imports this module: uvicorn (the service extra) only when serving
    import uvicorn

    from judgefuse.service.settings import Settings

__all__ = ["add_commands", "run_serve", "uvicorn_config"]


def run_serve(args: argparse.Namespace) -> int:
    from judgefuse.service.app import create_app
    from judgefuse.service.settings import SettingsError, load_settings

    overrides = {}
    if args.host is not None:
        overrides["host"] = args.host
    if args.port is not None:
        overrides["port"] = args.port
    if args.storage is not None:
        overrides["storage_url"] = args.storage
    if args.panel:
        overrides["panels"] = args.panel
    try:
        settings = load_settings(args.config, **overrides)
    except SettingsError as exc:
        print(f"judgefuse serve: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.server.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    import uvicorn

    app = create_app(settings)
    uvicorn.Server(uvicorn_config(app, settings, access_log=args.access_log)).run()
    return 0


def uvicorn_config(app: Any, settings: Settings, *, access_log: bool = False,
                   **overrides: Any) -> uvicorn.Config:
    """The server configuration ``judgefuse serve`` runs with (tests start the same):

    * header and body deadlines (:func:`~judgefuse.service.web.server_timeouts.with_deadlines`) on
      uvicorn's own HTTP protocol, so slow clients cannot hold connections;
    * idle keep-alive connections closed after 5 s (uvicorn's default, stated);
    * the access log (``--access-log``) with credential query parameters masked
      (:class:`~judgefuse.service.web.query_secrets.RedactQuerySecrets`; such requests are also
      refused with 400 by the app).
    """
    import uvicorn
    from uvicorn.config import HTTP_PROTOCOLS
    from uvicorn.importer import import_from_string

    from judgefuse.service.web.query_secrets import RedactQuerySecrets
    from judgefuse.service.web.server_timeouts import with_deadlines

    base = import_from_string(HTTP_PROTOCOLS["auto"])
    values: dict[str, Any] = {
        "host": settings.server.host, "port": settings.server.port, "log_level": settings.server.log_level,
        "access_log": access_log, "proxy_headers": False, "server_header": False,
        "timeout_keep_alive": 5,
        "http": with_deadlines(base, header_timeout_s=settings.web.header_timeout_s,
                               body_timeout_s=settings.web.body_timeout_s),
    }
    values.update(overrides)
    config = uvicorn.Config(app, **values)  # configures logging: add the filter after it
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactQuerySecrets) for f in access.filters):
        access.addFilter(RedactQuerySecrets())
    return config


def add_commands(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "serve",
        help="run the HTTP gateway (FastAPI + uvicorn)",
        description=(
            "Run the judge gateway. Settings: --config YAML file, then JUDGEFUSE_* environment "
            "variables, then these flags (highest)."
        ),
    )
    parser.add_argument("--config", default=None, help="settings YAML file")
    parser.add_argument("--host", default=None, help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="port (default 8000)")
    parser.add_argument("--storage", default=None, help="storage URL (sqlite:///path or redis://...)")
    parser.add_argument("--panel", action="append", default=None, help="panel YAML (repeatable)")
    parser.add_argument("--access-log", action="store_true", help="log every request")
    parser.set_defaults(handler=run_serve)
