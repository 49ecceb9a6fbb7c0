"""Tenant API keys (``Authorization: Bearer <key>`` or ``X-API-Key: <key>``) and the operator's
metrics token.

Settings hold SHA-256 hex digests per tenant, and optionally one for the metrics token. A
presented key is hashed and compared with **every** digest using ``hmac.compare_digest`` (no
early exit, so timing tells nothing about which tenant almost matched). Open mode (no keys
configured, or ``auth_disabled``) maps every request to tenant ``default``.

Who may read what (:meth:`Authenticator.caller`):

* the **metrics token** is the operator ("admin"): ``/metrics`` with every tenant's series and
  the dashboard's cross-tenant tables (judge health and cost summed over tenants);
* a **tenant key**: that tenant's data only (its ``/metrics`` series, its dashboard);
* in open mode everything is tenant ``default``, and ``/metrics`` stays open unless a metrics
  token is configured.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from judgefuse.service.errors import Unauthorized
from judgefuse.service.settings import DEFAULT_TENANT

__all__ = ["Authenticator", "Caller", "hash_key"]


def hash_key(key: str) -> str:
    """The SHA-256 hex digest to put in settings for ``key``."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Caller:
    """Who is asking: the operator (``admin``, no tenant) or one tenant."""

    tenant: str | None
    admin: bool = False


class Authenticator:
    def __init__(
        self, digests: Mapping[str, str], *, open_mode: bool, metrics_digest: str | None = None
    ) -> None:
        self._digests = [(tenant, bytes.fromhex(d)) for tenant, d in digests.items()]
        self._metrics = bytes.fromhex(metrics_digest) if metrics_digest else None
        self.open_mode = open_mode

    @property
    def tenants(self) -> list[str]:
        return [DEFAULT_TENANT] if self.open_mode else [t for t, _ in self._digests]

    @property
    def metrics_protected(self) -> bool:
        """True when ``/metrics`` needs a key (tenant keys or a metrics token configured)."""
        return not self.open_mode or self._metrics is not None

    def tenant_for(self, authorization: str | None, x_api_key: str | None) -> str:
        """The tenant whose key was presented; raises :class:`Unauthorized` (401)."""
        if self.open_mode:
            return DEFAULT_TENANT
        presented = hashlib.sha256(self._presented(authorization, x_api_key).encode("utf-8")).digest()
        found = None
        for tenant, digest in self._digests:
            if hmac.compare_digest(presented, digest) and found is None:
                found = tenant
        if found is None:
            if self._metrics is not None and hmac.compare_digest(presented, self._metrics):
                raise Unauthorized("the metrics token is not a tenant API key: it reads /metrics "
                                   "and the dashboard only",
                                   fields=[("header.authorization", "not a tenant key")])
            raise Unauthorized("invalid API key", fields=[("header.authorization", "unknown key")])
        return found

    def caller(self, authorization: str | None, x_api_key: str | None) -> Caller:
        """The operator (metrics token) or a tenant; raises :class:`Unauthorized` (401).

        In open mode with no metrics token every caller is the operator (as before keys
        existed); in open mode with a token, the token is required for admin views and anyone
        else is tenant ``default``.
        """
        if self.open_mode:
            if self._metrics is None:
                return Caller(DEFAULT_TENANT, admin=True)
            if not (authorization or x_api_key):
                return Caller(DEFAULT_TENANT)
            key = self._presented(authorization, x_api_key)
            if hmac.compare_digest(hashlib.sha256(key.encode("utf-8")).digest(), self._metrics):
                return Caller(None, admin=True)
            return Caller(DEFAULT_TENANT)
        key = self._presented(authorization, x_api_key)
        if self._metrics is not None and hmac.compare_digest(
            hashlib.sha256(key.encode("utf-8")).digest(), self._metrics
        ):
            return Caller(None, admin=True)
        return Caller(self.tenant_for(authorization, x_api_key))

    @staticmethod
    def _presented(authorization: str | None, x_api_key: str | None) -> str:
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
        return key
