"""What both clients are built from: the gateway's address, the credential, time limits."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "DEFAULT_TIMEOUT", "http_options"]

DEFAULT_TIMEOUT = httpx.Timeout(300.0, connect=10.0)
"""A judge call waits for a whole panel (seconds to minutes for local models); connecting to
the gateway should take milliseconds, so a dead address fails fast and is retried."""

DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""The largest answer body the client reads (decoded). The gateway's largest answers (a batch
of 64 verdicts, a calibration report with structure) are a few MB; a body past this is read
no further and raised as ``ResponseTooLarge``, so a runaway proxy or a hostile address costs
at most this much memory (a 200 MB answer cost 658 MB at peak before the cap)."""


def http_options(base_url: str, api_key: str | None, headers: Mapping[str, str] | None,
                 timeout: float | httpx.Timeout | None) -> dict[str, object]:
    """Keyword arguments for ``httpx.Client`` / ``httpx.AsyncClient``: the API key goes in
    ``Authorization: Bearer`` (never in a URL, so it stays out of access logs)."""
    merged = {"User-Agent": "judgefuse-client", **(headers or {})}
    if api_key is not None:
        merged["Authorization"] = f"Bearer {api_key}"
    return {
        "base_url": base_url.rstrip("/"),
        "headers": merged,
        "timeout": DEFAULT_TIMEOUT if timeout is None else timeout,
    }
