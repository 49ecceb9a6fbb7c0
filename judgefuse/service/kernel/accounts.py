"""Accounts (annotators, operators, viewers) and the pages' sessions (docs/review-loop.md,
'Annotator accounts'; docs/console.md, 'Accounts and roles').

An operator (a tenant API key, or the CLI on the gateway's store) creates a credential per
person, with a role:

* ``annotator`` (the default): leases, labels, skips and reads its own history, over the API or
  on ``/review``, nothing else (the routes refuse it everywhere else with 403, see
  :mod:`judgefuse.service.web.auth`);
* ``operator``: signs in to the pages (``/console``, ``/review``, ``/metrics``) and does there
  what the tenant's key may do (the API still takes the tenant key);
* ``viewer``: signs in to read the console and ``/metrics``; posts nothing.

Tenant keys stay the pipeline's and the operator's: annotators do not need them.

Storage: one compare-and-set state blob per tenant (``annotators``), so every replica on every
backend sees the same accounts and sessions, and one read answers "is this credential live and
this session not logged out" (checked on every request of the page, cheaply). The blob holds:

* ``accounts``: id -> name, panels (None: all), created_at, revoked_at, and the SHA-256 of the
  credential (the credential itself is shown once, at creation or rotation, and never stored);
* ``sessions``: session id -> (credential it was opened with, expiry). A session ends when its
  credential is revoked or rotated (the digest it was opened with is no longer the account's),
  at logout (removed here, so a copied cookie is refused too) or when it expires.

A credential reads ``jfa.<tenant>.<id>.<secret>``: the tenant and the account id say which blob
and which entry to compare against, so verifying costs one read, never a scan.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from judgefuse.service.errors import Conflict, FieldProblem, NotFound
from judgefuse.service.kernel.shared_state import update_state
from judgefuse.service.storage import Coordination
from judgefuse.service.storage.checks import check_tenant

__all__ = ["ANNOTATOR", "CREDENTIAL_PREFIX", "LABELLING_ROLES", "OPERATOR_ROLE", "ROLES", "VIEWER",
           "Annotator", "AnnotatorAccounts", "Role", "looks_like_credential"]

Role = Literal["annotator", "operator", "viewer"]
ROLES: tuple[Role, ...] = get_args(Role)
ANNOTATOR: Role = "annotator"
OPERATOR_ROLE: Role = "operator"
VIEWER: Role = "viewer"
LABELLING_ROLES = (ANNOTATOR, OPERATOR_ROLE)
"""The roles that label on ``/review`` (as themselves)."""

CREDENTIAL_PREFIX = "jfa."
STATE_KEY = "annotators"
MAX_ACCOUNTS = 1000
MAX_SESSIONS = 5000
HISTORY_KEPT = 500
_NAME_RE = re.compile(r"^[^\x00-\x1f\x7f]{1,128}$")
_ID_RE = re.compile(r"^[0-9a-f]{12}$")


def looks_like_credential(key: str | None) -> bool:
    """True when ``key`` has an annotator credential's shape (no storage read)."""
    return key is not None and key.startswith(CREDENTIAL_PREFIX)


def _digest(credential: str) -> str:
    return hashlib.sha256(credential.encode("utf-8")).hexdigest()


def _split(credential: str) -> tuple[str, str] | None:
    """(tenant, account id) of a well-formed credential, else None."""
    body = credential[len(CREDENTIAL_PREFIX):]
    parts = body.rsplit(".", 2)
    if len(parts) != 3 or not _ID_RE.match(parts[1]) or not parts[2]:
        return None
    try:
        return check_tenant(parts[0]), parts[1]
    except ValueError:
        return None


@dataclass(frozen=True)
class Annotator:
    """One annotator account (never its credential or digest)."""

    tenant: str
    id: str
    name: str
    panels: tuple[str, ...] | None
    created_at: float
    revoked_at: float | None = None
    role: Role = ANNOTATOR

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def may_use(self, panel: str) -> bool:
        return self.panels is None or panel in self.panels

    def out(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "tenant": self.tenant,
                "panels": list(self.panels) if self.panels is not None else None,
                "created_at": self.created_at, "revoked_at": self.revoked_at,
                "active": self.active, "role": self.role}


def _account(tenant: str, account_id: str, entry: dict[str, Any]) -> Annotator:
    panels = entry.get("panels")
    return Annotator(tenant, account_id, str(entry["name"]),
                     tuple(panels) if panels is not None else None,
                     float(entry["created_at"]), entry.get("revoked_at"),
                     entry.get("role", ANNOTATOR))


def check_account_name(name: str, field: str = "body.name") -> str:
    name = name.strip() if isinstance(name, str) else ""
    if not _NAME_RE.match(name):
        raise FieldProblem(field, "an annotator name is 1-128 printable characters")
    return name


class AnnotatorAccounts:
    """Create, list, revoke, rotate and verify annotator credentials; open, check and close
    page sessions. Stateless between calls: the store is the truth for every replica."""

    def __init__(self, storage: Coordination, clock: Callable[[], float]) -> None:
        self.storage = storage
        self.clock = clock

    async def _body(self, tenant: str) -> dict[str, Any]:
        blob = await self.storage.get_state(tenant, STATE_KEY)
        return blob.body if blob else {}

    # -- accounts ----------------------------------------------------------------------------
    async def create(
        self, tenant: str, name: str, panels: Sequence[str] | None = None, role: str = ANNOTATOR,
    ) -> tuple[Annotator, str]:
        """A new account and its credential (shown once: only its digest is stored). 409 when
        an active account of the tenant already has the name; 422 for an unknown role, or
        panels given to an operator or viewer (panels scope an annotator's queue)."""
        check_tenant(tenant)
        name = check_account_name(name)
        if role not in ROLES:
            raise FieldProblem("body.role", f"must be one of {', '.join(ROLES)}")
        if panels is not None and role != ANNOTATOR:
            raise FieldProblem("body.panels", "panels scope an annotator account only")
        account_id = secrets.token_hex(6)
        credential = f"{CREDENTIAL_PREFIX}{tenant}.{account_id}.{secrets.token_urlsafe(32)}"
        entry = {"name": name, "panels": sorted(set(panels)) if panels is not None else None,
                 "created_at": self.clock(), "revoked_at": None, "digest": _digest(credential),
                 "role": role}

        def change(body: dict[str, Any]) -> tuple[dict[str, Any], None]:
            accounts = dict(body.get("accounts", {}))
            if any(a["name"] == name and a.get("revoked_at") is None for a in accounts.values()):
                raise Conflict(f"tenant {tenant!r} already has an active annotator named {name!r}",
                               fields=[("body.name", "taken")])
            if len(accounts) >= MAX_ACCOUNTS:
                raise Conflict(f"tenant {tenant!r} has {MAX_ACCOUNTS} annotator accounts (the most)")
            accounts[account_id] = entry
            return {**body, "accounts": accounts}, None

        await update_state(self.storage, tenant, STATE_KEY, change)
        return _account(tenant, account_id, entry), credential

    async def accounts(self, tenant: str) -> list[Annotator]:
        accounts = (await self._body(tenant)).get("accounts", {})
        return sorted((_account(tenant, i, e) for i, e in accounts.items()),
                      key=lambda a: (a.created_at, a.id))

    async def any(self, tenant: str, roles: Sequence[str] = LABELLING_ROLES) -> bool:
        """True once the tenant has ever had an account of one of ``roles`` (even revoked): by
        default one that labels, after which ``/review`` refuses the tenant key (everyone
        labels as themselves)."""
        accounts = (await self._body(tenant)).get("accounts", {})
        return any(entry.get("role", ANNOTATOR) in roles for entry in accounts.values())

    def _find(self, tenant: str, accounts: dict[str, Any], ref: str) -> str:
        """The account id ``ref`` names (an id, or the name of an active account); 404 else."""
        if ref in accounts:
            return ref
        named = [i for i, a in accounts.items() if a["name"] == ref and a.get("revoked_at") is None]
        if not named:
            raise NotFound(f"tenant {tenant!r} has no annotator account {ref!r}",
                           fields=[("path.annotator", "unknown id or name")])
        return named[0]

    async def revoke(self, tenant: str, ref: str) -> Annotator:
        """Revoke at once: the credential is refused from the next request on, and the
        account's page sessions end (idempotent)."""
        check_tenant(tenant)
        now = self.clock()

        def change(body: dict[str, Any]) -> tuple[dict[str, Any], Annotator]:
            accounts = dict(body.get("accounts", {}))
            account_id = self._find(tenant, accounts, ref)
            entry = dict(accounts[account_id])
            if entry.get("revoked_at") is None:
                entry["revoked_at"] = now
            accounts[account_id] = entry
            sessions = {s: v for s, v in body.get("sessions", {}).items() if v["a"] != account_id}
            return {**body, "accounts": accounts, "sessions": sessions}, _account(tenant, account_id, entry)

        return await update_state(self.storage, tenant, STATE_KEY, change)

    async def rotate(self, tenant: str, ref: str) -> tuple[Annotator, str]:
        """A new credential for an active account; the old one and its sessions end at once."""
        check_tenant(tenant)

        def change(body: dict[str, Any]) -> tuple[dict[str, Any], tuple[Annotator, str]]:
            accounts = dict(body.get("accounts", {}))
            account_id = self._find(tenant, accounts, ref)
            entry = dict(accounts[account_id])
            if entry.get("revoked_at") is not None:
                raise Conflict(f"annotator {account_id!r} is revoked: create a new account",
                               fields=[("path.annotator", "revoked")])
            credential = f"{CREDENTIAL_PREFIX}{tenant}.{account_id}.{secrets.token_urlsafe(32)}"
            entry["digest"] = _digest(credential)
            accounts[account_id] = entry
            sessions = {s: v for s, v in body.get("sessions", {}).items() if v["a"] != account_id}
            return ({**body, "accounts": accounts, "sessions": sessions},
                    (_account(tenant, account_id, entry), credential))

        return await update_state(self.storage, tenant, STATE_KEY, change)

    async def verify(self, credential: str) -> Annotator | None:
        """The active account ``credential`` belongs to, or None (malformed, unknown, revoked
        or rotated). One state read; the digest compared in constant time."""
        where = _split(credential) if looks_like_credential(credential) else None
        if where is None:
            return None
        tenant, account_id = where
        entry = (await self._body(tenant)).get("accounts", {}).get(account_id)
        if entry is None or entry.get("revoked_at") is not None:
            return None
        if not hmac.compare_digest(_digest(credential), str(entry["digest"])):
            return None
        return _account(tenant, account_id, entry)

    # -- page sessions -----------------------------------------------------------------------
    async def open_session(self, tenant: str, bound_to: str, expires_at: float) -> str:
        """A new session id bound to ``bound_to`` (an account id, ``key:<fingerprint>`` for a
        tenant key, ``metrics:<fingerprint>`` for the metrics token), stored until
        ``expires_at`` or sign-out."""
        session_id = secrets.token_urlsafe(18)
        now = self.clock()

        def change(body: dict[str, Any]) -> tuple[dict[str, Any], None]:
            sessions = {s: v for s, v in body.get("sessions", {}).items() if v["e"] > now}
            if len(sessions) >= MAX_SESSIONS:  # the oldest give way
                for old in sorted(sessions, key=lambda s: sessions[s]["e"])[:len(sessions) - MAX_SESSIONS + 1]:
                    del sessions[old]
            sessions[session_id] = {"a": bound_to, "e": expires_at}
            return {**body, "sessions": sessions}, None

        await update_state(self.storage, tenant, STATE_KEY, change)
        return session_id

    async def session(self, tenant: str, session_id: str) -> tuple[str, Annotator | None] | None:
        """(what the live session is bound to, its account when bound to one) or None when the
        session was closed or expired, or its account revoked or rotated since."""
        body = await self._body(tenant)
        entry = body.get("sessions", {}).get(session_id)
        if entry is None or entry["e"] <= self.clock():
            return None
        bound = str(entry["a"])
        if bound.startswith(("key:", "metrics:")):
            return bound, None
        account = body.get("accounts", {}).get(bound)
        if account is None or account.get("revoked_at") is not None:
            return None
        return bound, _account(tenant, bound, account)

    async def close_session(self, tenant: str, session_id: str) -> None:
        def change(body: dict[str, Any]) -> tuple[dict[str, Any] | None, None]:
            sessions = dict(body.get("sessions", {}))
            if sessions.pop(session_id, None) is None:
                return None, None
            return {**body, "sessions": sessions}, None

        await update_state(self.storage, tenant, STATE_KEY, change)

    # -- an annotator's own history ------------------------------------------------------------
    async def record_label(
        self, account: Annotator, verdict_id: str, panel: str, label: str, status: str
    ) -> None:
        """Note a label given with ``account``'s credential (the newest ``HISTORY_KEPT``)."""
        entry = {"verdict_id": verdict_id, "panel": panel, "label": label, "status": status,
                 "at": self.clock()}

        def change(body: dict[str, Any]) -> tuple[dict[str, Any], None]:
            return {"labels": [*body.get("labels", []), entry][-HISTORY_KEPT:]}, None

        await update_state(self.storage, account.tenant, f"annotator-history/{account.id}", change)

    async def history(self, account: Annotator) -> list[dict[str, Any]]:
        """The labels given with this account, newest first."""
        blob = await self.storage.get_state(account.tenant, f"annotator-history/{account.id}")
        return list(reversed(blob.body.get("labels", []))) if blob else []
