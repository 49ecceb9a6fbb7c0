"""``judgefuse serve [--config FILE] [--host HOST] [--port PORT] [--workers N]``: run the gateway
with uvicorn.

With no configuration it serves on SQLite (``./judgefuse.sqlite3``) with the packaged default
panel (a local SmolLM2 served by llama.cpp, started by the panel), open (tenant ``default``),
so ``curl -s localhost:8000/v1/judge -d '{"question": ..., "answer_a": ..., "answer_b": ...}'``
returns a verdict. The lead wires :func:`add_commands` into ``judgefuse/cli.py``.

``--workers N`` (``server.workers``) runs N server processes, each listening on the same port
(``SO_REUSEPORT``: the kernel spreads new connections evenly over them): one event loop per
core for users with more cores. They share only the configured store, as replicas do
(docs/design.md, 'Scale'): SQLite in WAL mode (one writer at a time across processes, each
waiting up to its busy timeout), Redis or PostgreSQL. Per-process state (metrics counters,
the in-process response cache, admission budgets) is per worker. The parent only supervises:
SIGTERM / SIGINT stop every worker; a worker that dies stops the others and the exit status
says so.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import signal
import socket
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
    if args.workers is not None:
        overrides["server"] = {"workers": args.workers}
    try:
        settings = load_settings(args.config, **overrides)
    except SettingsError as exc:
        print(f"judgefuse serve: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.server.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if settings.server.workers > 1:
        return run_workers(settings, access_log=args.access_log)
    import uvicorn

    app = create_app(settings)
    uvicorn.Server(uvicorn_config(app, settings, access_log=args.access_log)).run()
    return 0


def run_workers(settings: Settings, *, access_log: bool = False) -> int:
    """``server.workers`` processes serving one socket (module docstring); returns the exit
    status: 0 after a requested stop, 1 when a worker died on its own."""
    reserved = _reuse_port_socket(settings.server.host, settings.server.port)  # never listens
    port = reserved.getsockname()[1]  # port 0 picks one: every worker takes the same
    context = multiprocessing.get_context("fork")  # the settings as they are, no re-reading
    workers = [context.Process(target=_serve_worker, args=(port, settings, access_log), daemon=False)
               for _ in range(settings.server.workers)]
    stopping = False

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for worker in workers:
            if worker.pid is not None and worker.exitcode is None:
                os.kill(worker.pid, signal.SIGTERM)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for worker in workers:
            worker.start()
        logging.getLogger("judgefuse.service").info(
            "serving on %s:%d with %d workers (pids %s)", settings.server.host, port,
            len(workers), ", ".join(str(w.pid) for w in workers))
        from multiprocessing.connection import wait

        while any(w.exitcode is None for w in workers):
            wait([w.sentinel for w in workers if w.exitcode is None])
            if not stopping and any(w.exitcode is not None for w in workers):
                stop(signal.SIGTERM, None)  # one died on its own: stop the rest
                crashed = True
                break
        else:
            crashed = False
        for worker in workers:
            worker.join()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        reserved.close()
    return 1 if crashed and not stopping else 0


def _reuse_port_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def _serve_worker(port: int, settings: Settings, access_log: bool) -> None:
    """One worker: its own socket on the shared port, its own app (storage, panels, loop)."""
    import uvicorn

    from judgefuse.service.app import create_app

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)  # uvicorn installs its own in run()
    sock = _reuse_port_socket(settings.server.host, port)
    sock.listen(2048)
    app = create_app(settings)
    uvicorn.Server(uvicorn_config(app, settings, access_log=access_log)).run(sockets=[sock])


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
    parser.add_argument("--workers", type=int, default=None,
                        help="server processes sharing the port and the store (default 1)")
    parser.set_defaults(handler=run_serve)
