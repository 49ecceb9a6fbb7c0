"""A storage URL's password, kept out of what we print: the URL with it masked, and the forms it
may take inside a driver's error message. Shared by the backends whose URLs carry a password
(Redis, PostgreSQL)."""

from __future__ import annotations

from urllib.parse import quote, unquote, urlsplit, urlunsplit

__all__ = ["redact_url", "secret_forms"]


def redact_url(url: str, kind: str) -> str:
    """The URL with its password (if any) replaced by ``***``; ``kind`` names the URL in the
    placeholder for one that cannot be parsed."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return f"<unparseable {kind} url>"
    if password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{parts.username or ''}:***@{host}"
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def secret_forms(url: str) -> list[str]:
    """The password as it may appear in a message (as given, quoted, unquoted), longest first."""
    try:
        password = urlsplit(url).password
    except ValueError:
        return []
    if not password:
        return []
    forms = {password, quote(password, safe=""), unquote(password)}
    return sorted(forms, key=len, reverse=True)
