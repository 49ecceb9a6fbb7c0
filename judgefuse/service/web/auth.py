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
  token is configured;
* an **annotator credential** (``jfa.<tenant>.<id>.<secret>``, made by an operator, see
  :mod:`judgefuse.service.kernel.accounts`): leases, labels, skips and reads its own history
  (:func:`principal_for`, the routes that take ``ReviewerDep``); every route that takes the
  tenant (``TenantDep``) refuses it with 403, so a new route is closed to annotators unless it
  opts in.

* an **operator or viewer account credential** (the same shape, another role) signs in to the
  pages only (:mod:`judgefuse.service.web.sessions`); the API refuses it with 403 naming
  ``/signin``.

Roles (docs/review-loop.md, 'Roles'; docs/console.md, 'Accounts and roles'): a tenant key is the
pipeline's and the operator's key (judge, fuse, tune, refit, clear alarms, manage accounts);
annotators never need it, and the ``/review`` page refuses it once the tenant has annotator or
operator accounts. A signed-in page session is a :class:`Caller` too, with its ``role``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from judgefuse.service.errors import Forbidden, Unauthorized
from judgefuse.service.kernel.accounts import Annotator, AnnotatorAccounts, looks_like_credential
from judgefuse.service.settings import DEFAULT_TENANT

__all__ = ["Authenticator", "Caller", "Principal", "hash_key", "principal_for", "refuse_annotator"]


def hash_key(key: str) -> str:
    """The SHA-256 hex digest to put in settings for ``key``."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Caller:
    """Who is asking: the operator (``admin``, no tenant) or one tenant, as its ``operator``
    (a key, an operator account) or a ``viewer`` (reads the pages, posts nothing)."""

    tenant: str | None
    admin: bool = False
    role: str = "operator"
    name: str | None = None
    """Who signed in (a page session), for the page's header; None for an API key."""

    @property
    def may_post(self) -> bool:
        return self.role == "operator"


@dataclass(frozen=True)
class Principal:
    """Who calls a review route: a tenant key (``account`` None: any annotator name) or one
    annotator account (leases and labels as itself, within its panels)."""

    tenant: str
    account: Annotator | None = None

    def check_panel(self, panel: str, field: str = "query.panel") -> None:
        """403 when an annotator credential scoped to panels asks for another panel."""
        if self.account is not None and not self.account.may_use(panel):
            raise Forbidden(f"annotator {self.account.name!r} may not use panel {panel!r}",
                            fields=[(field, "not one of this annotator's panels")])


ANNOTATOR_ONLY = ("an annotator credential may only lease, label, skip and read its own history "
                  "(GET /v1/review/next, POST /v1/review/skip, POST /v1/feedback, "
                  "GET /v1/annotators/me); this needs the tenant's API key")
PAGES_ONLY = ("an {role} account signs in to the pages (/signin: the console, /review, /metrics); "
              "the API takes the tenant's API key")


def _refusal(account: Annotator) -> Forbidden:
    if account.role == "annotator":
        return Forbidden(ANNOTATOR_ONLY, fields=[("header.authorization", "annotator credential")])
    return Forbidden(PAGES_ONLY.format(role=account.role),
                     fields=[("header.authorization", f"{account.role} account credential")])


async def principal_for(
    authenticator: Authenticator, accounts: AnnotatorAccounts,
    authorization: str | None, x_api_key: str | None,
) -> Principal:
    """A tenant key's tenant or a live annotator account (401 for anything else). Only a key
    with a credential's shape costs a store read; tenant keys are checked as always."""
    presented = _maybe_presented(authorization, x_api_key)
    if looks_like_credential(presented):
        account = await accounts.verify(presented or "")
        if account is not None:
            if account.role != "annotator":
                raise _refusal(account)
            return Principal(account.tenant, account)
        if not authenticator.open_mode:
            raise Unauthorized("invalid or revoked annotator credential",
                               fields=[("header.authorization", "unknown, revoked or rotated")])
    return Principal(authenticator.tenant_for(authorization, x_api_key))


async def refuse_annotator(
    authenticator: Authenticator, accounts: AnnotatorAccounts,
    authorization: str | None, x_api_key: str | None,
) -> None:
    """403 when a live account credential (any role) calls a route that needs a tenant key."""
    presented = _maybe_presented(authorization, x_api_key)
    account = await accounts.verify(presented or "") if looks_like_credential(presented) else None
    if account is not None:
        raise _refusal(account)


def _maybe_presented(authorization: str | None, x_api_key: str | None) -> str | None:
    if authorization:
        scheme, _, value = authorization.partition(" ")
        return value.strip() if scheme.lower() == "bearer" else None
    return x_api_key.strip() if x_api_key else None


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

    def fingerprint(self, tenant: str) -> str | None:
        """A short fingerprint of the tenant's current key digest (None: no such tenant, or
        open mode): a review session opened with the key is bound to it, so it ends when the
        key is rotated or the tenant removed."""
        if self.open_mode:
            return None
        for name, digest in self._digests:
            if name == tenant:
                return hashlib.sha256(b"review-session:" + digest).hexdigest()[:24]
        return None

    def metrics_fingerprint(self) -> str | None:
        """A short fingerprint of the metrics token's digest (None: no token): a page session
        opened with the token is bound to it."""
        if self._metrics is None:
            return None
        return hashlib.sha256(b"page-session:" + self._metrics).hexdigest()[:24]

    def is_metrics_token(self, key: str) -> bool:
        return self._metrics is not None and hmac.compare_digest(
            hashlib.sha256(key.encode("utf-8")).digest(), self._metrics)

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
