"""Credentials in the query string: refused, and never written to the access log.

A key in a URL ends up in access logs, proxy logs and browser history. The gateway reads keys
only from headers, so a request carrying one in the query string (``?api_key=...``,
``?token=...``, ...) is refused with 400 naming the parameter (:class:`~judgefuse.service.
middleware.QueryKeyMiddleware`), and :class:`RedactQuerySecrets`, installed on uvicorn's access
logger by ``judgefuse serve``, replaces such values with ``***`` in every access-log line
(uvicorn logs the request line, query string included, whatever the response).
"""

from __future__ import annotations

import logging
import re
from urllib.parse import parse_qsl

__all__ = ["SECRET_PARAMS", "RedactQuerySecrets", "redact_query", "secret_params_in"]

SECRET_PARAMS = frozenset({
    "api_key", "apikey", "api-key", "key", "x-api-key", "x_api_key", "token", "access_token",
    "auth", "authorization", "bearer", "secret", "password", "metrics_token",
})
"""Query parameter names (case-insensitive) that carry credentials."""

_PAIR = re.compile(r"(?P<sep>[?&;])(?P<name>[^=&;#\s]+)=(?P<value>[^&;#\s\"]*)")


def _is_secret(name: str) -> bool:
    return name.strip().lower() in SECRET_PARAMS


def secret_params_in(query_string: bytes) -> list[str]:
    """Names of credential parameters in a raw query string, in order (each once)."""
    if not query_string:
        return []
    text = query_string.decode("latin-1")
    found: list[str] = []
    for name, _value in parse_qsl(text, keep_blank_values=True):
        if _is_secret(name) and name not in found:
            found.append(name)
    return found


def redact_query(target: str) -> str:
    """``target`` (a path with its query string) with every credential parameter's value
    replaced by ``***``; anything else is left as it is."""
    if "?" not in target:
        return target
    path, _, query = target.partition("?")

    def hide(match: re.Match[str]) -> str:
        from urllib.parse import unquote

        if _is_secret(unquote(match["name"])):
            return f"{match['sep']}{match['name']}=***"
        return match.group(0)

    return path + _PAIR.sub(hide, "?" + query)


class RedactQuerySecrets(logging.Filter):
    """For uvicorn's access logger: its record's args are ``(client, method, target,
    http_version, status)``; the target's credential values are masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], redact_query(args[2]), *args[3:])
        elif isinstance(record.msg, str) and "?" in record.msg:
            record.msg = redact_query(record.msg)
        return True
