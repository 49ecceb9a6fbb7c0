"""A storage URL's password, kept out of what we print: the URL with it masked, and the forms it
may take inside a driver's error message. Shared by the backends whose URLs carry a password
(Redis, PostgreSQL).

Drivers accept a password in two places, and both are masked:

* the user-info, ``redis://:pw@host`` or ``postgresql://user:pw@host/db``;
* the query string: libpq reads ``?password=`` (and ``sslpassword=``), redis-py reads
  ``?password=``; keys are matched case-insensitively after percent-decoding, so
  ``?pass%77ord=`` is caught too. Other secret-looking keys (``token``, ``secret``, ...) are
  masked as well: a URL printed with ``***`` where a harmless value stood costs nothing, a
  leaked secret does.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

__all__ = ["SECRET_QUERY_KEYS", "redact_url", "secret_forms"]

SECRET_QUERY_KEYS = frozenset({
    "password", "passwd", "pwd", "pass", "sslpassword", "secret", "token", "auth",
    "access_token", "api_key", "apikey",
})
"""Query keys whose values are secrets (compared lower-cased, after percent-decoding)."""

MASK = "***"


def _is_secret_key(name: str) -> bool:
    return name.strip().lower() in SECRET_QUERY_KEYS


def _query_secrets(query: str) -> list[str]:
    """The raw (still percent-encoded) values of secret keys in ``query``, and their decoded forms."""
    found: list[str] = []
    for pair in query.split("&"):
        name, sep, value = pair.partition("=")
        if sep and value and _is_secret_key(unquote(name.replace("+", " "))):
            found.append(value)
    for name, value in parse_qsl(query, keep_blank_values=True):
        if value and _is_secret_key(name):
            found.append(value)
    return found


def _masked_query(query: str) -> str:
    """``query`` with every secret value replaced by ``***``; the rest kept byte for byte."""
    kept = []
    for pair in query.split("&"):
        name, sep, value = pair.partition("=")
        if sep and value and _is_secret_key(unquote(name.replace("+", " "))):
            pair = f"{name}={MASK}"
        kept.append(pair)
    return "&".join(kept)


def redact_url(url: str, kind: str) -> str:
    """The URL with its password (user-info or query) replaced by ``***``; ``kind`` names the
    URL in the placeholder for one that cannot be parsed."""
    try:
        parts = urlsplit(url)
        password = parts.password
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return f"<unparseable {kind} url>"
    netloc = parts.netloc
    if password is not None:
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{parts.username or ''}:{MASK}@{host}"
        if port is not None:
            netloc += f":{port}"
    query = _masked_query(parts.query) if parts.query else parts.query
    if netloc == parts.netloc and query == parts.query:
        return url  # nothing to mask: as given (urlunsplit would drop sqlite:///'s empty host)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def secret_forms(url: str) -> list[str]:
    """Every secret of the URL as it may appear in a message (as given, quoted, unquoted),
    longest first, so a longer form is scrubbed before a shorter one inside it."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return []
    raw = [password] if password else []
    raw += _query_secrets(parts.query)
    forms: set[str] = set()
    for secret in raw:
        forms.update({secret, quote(secret, safe=""), unquote(secret)})
    forms.discard("")
    return sorted(forms, key=len, reverse=True)
