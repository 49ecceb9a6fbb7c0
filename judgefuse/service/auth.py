"""Tenant API keys: ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``.

Settings hold SHA-256 hex digests per tenant. A presented key is hashed and compared with
**every** tenant's digest using ``hmac.compare_digest`` (no early exit, so timing tells
nothing about which tenant almost matched). Open mode (no keys configured, or
``auth_disabled``) maps every request to tenant ``default``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from judgefuse.service.errors import Unauthorized
from judgefuse.service.settings import DEFAULT_TENANT

__all__ = ["Authenticator", "hash_key"]


def hash_key(key: str) -> str:
    """The SHA-256 hex digest to put in settings for ``key``."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class Authenticator:
    def __init__(self, digests: Mapping[str, str], *, open_mode: bool) -> None:
        self._digests = [(tenant, bytes.fromhex(d)) for tenant, d in digests.items()]
        self.open_mode = open_mode

    @property
    def tenants(self) -> list[str]:
        return [DEFAULT_TENANT] if self.open_mode else [t for t, _ in self._digests]

    def tenant_for(self, authorization: str | None, x_api_key: str | None) -> str:
        """The tenant whose key was presented; raises :class:`Unauthorized` (401)."""
        if self.open_mode:
            return DEFAULT_TENANT
        key = None
        if authorization:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() != "bearer" or not value.strip():
                raise Unauthorized("the Authorization header must be 'Bearer <api key>'",
                                   fields=[("header.authorization", "not a Bearer token")])
            key = value.strip()
        elif x_api_key:
            key = x_api_key.strip()
        if not key:
            raise Unauthorized(
                "missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'",
                fields=[("header.authorization", "missing")],
            )
        presented = hashlib.sha256(key.encode("utf-8")).digest()
        found = None
        for tenant, digest in self._digests:
            if hmac.compare_digest(presented, digest) and found is None:
                found = tenant
        if found is None:
            raise Unauthorized("invalid API key", fields=[("header.authorization", "unknown key")])
        return found
