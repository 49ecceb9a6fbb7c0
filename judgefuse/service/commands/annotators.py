"""``judgefuse annotators create|list|revoke|rotate``: annotator credentials on the gateway's store.

Reads the settings ``judgefuse serve`` reads (``--config`` YAML, then ``JUDGEFUSE_*``
environment variables, then ``--storage``) and writes to the same store, so every replica sees
the change at its next request. Settings that name tenant keys are checked against ``--tenant``;
settings without any (the gateway's keys may live in its own environment only) take the tenant
as given, with a note on stderr (:mod:`judgefuse.service.kernel.accounts`; docs/review-loop.md,
'Annotator accounts'). A new or rotated credential is printed once, on stdout; nothing else
ever shows it again.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import sys
import time
from typing import Any

__all__ = ["add_commands", "run_annotators"]

KEYS_VARIABLE = "JUDGEFUSE_WEB__API_KEYS"
"""Where a gateway started from its environment finds its tenants' key digests."""


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def _run(args: argparse.Namespace, settings: Any) -> list[str]:
    from judgefuse.service.kernel.accounts import AnnotatorAccounts
    from judgefuse.service.storage import open_storage

    store = open_storage(settings.storage.storage_url,
                         sqlite_synchronous=settings.storage.sqlite_synchronous)
    async with store as storage:
        accounts = AnnotatorAccounts(storage, clock=time.time)
        if args.action == "create":
            account, credential = await accounts.create(args.tenant, args.name, args.panel, role=args.role)
            return [f"created {account.role} {account.name!r} (id {account.id}) of tenant {account.tenant!r}"
                    f"{'' if account.panels is None else ', panels ' + ', '.join(account.panels)}",
                    f"credential (shown once, give it to the {account.role}; it signs in at /signin):",
                    credential]
        if args.action == "rotate":
            account, credential = await accounts.rotate(args.tenant, args.annotator)
            return [f"rotated annotator {account.name!r} (id {account.id}): the old credential and "
                    "its sessions have ended", "new credential (shown once):", credential]
        if args.action == "revoke":
            account = await accounts.revoke(args.tenant, args.annotator)
            return [f"revoked annotator {account.name!r} (id {account.id}) of tenant "
                    f"{account.tenant!r}: its credential and sessions have ended"]
        rows = ["id\tname\trole\tstate\tpanels\tcreated\trevoked"]
        for a in await accounts.accounts(args.tenant):
            rows.append("\t".join([a.id, a.name, a.role, "active" if a.active else "revoked",
                                   ",".join(a.panels) if a.panels is not None else "*",
                                   _when(a.created_at), _when(a.revoked_at)]))
        return rows


def run_annotators(args: argparse.Namespace) -> int:
    from judgefuse.errors import InputError
    from judgefuse.service.errors import ServiceError
    from judgefuse.service.settings import DEFAULT_TENANT, load_settings
    from judgefuse.service.storage import StorageError

    overrides = {"storage_url": args.storage} if args.storage else {}
    settings = load_settings(args.config, **overrides)  # a SettingsError is an InputError
    tenants = [DEFAULT_TENANT] if settings.open_mode else sorted(settings.web.api_keys)
    if args.tenant not in tenants:
        if settings.web.api_keys:  # these settings name the tenants: another name is a slip
            raise InputError(f"--tenant: {args.tenant!r} is not a configured tenant ({', '.join(tenants)})")
        # No tenant keys here: the gateway's may be in its own environment only
        # (JUDGEFUSE_WEB__API_KEYS), not in the admin's shell, so the name is taken as given.
        print(f"note: these settings name no tenant keys (--config, {KEYS_VARIABLE}), so --tenant "
              f"{args.tenant!r} is not checked; a gateway without keys serves only {DEFAULT_TENANT!r}",
              file=sys.stderr)
    try:
        lines = asyncio.run(_run(args, settings))
    except ServiceError as exc:  # unknown account, name taken, bad name: the user's to fix
        raise InputError(exc.message) from None
    except ValueError as exc:  # the store's argument checks (a tenant name it refuses)
        raise InputError(str(exc)) from None
    except StorageError as exc:
        raise OSError(f"storage: {type(exc).__name__}: {exc}") from None
    print("\n".join(lines))
    return 0


def add_commands(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "annotators",
        help="create, list, revoke or rotate account credentials (the pages' sign-in)",
        description="Account credentials of one tenant, in the store `judgefuse serve` uses, each "
                    "with a role: an annotator credential can lease, label, skip and read its own "
                    "history, nothing else; an operator signs in to the console, /review and "
                    "/metrics; a viewer reads the console and /metrics.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=None, help="settings YAML file (as for serve)")
    common.add_argument("--storage", default=None, help="storage URL (overrides the settings)")
    common.add_argument("--tenant", default="default", help="the tenant (default: default)")
    create = actions.add_parser("create", parents=[common], help="a new credential (printed once)",
                                description="Create an annotator account and print its credential "
                                            "once (only its SHA-256 is stored).")
    create.add_argument("--name", required=True, help="the annotator's name (unique among active ones)")
    create.add_argument("--panel", action="append", default=None,
                        help="a panel it may use (repeatable; default: every panel; annotators only)")
    create.add_argument("--role", choices=("annotator", "operator", "viewer"), default="annotator",
                        help="annotator (default: /review only), operator (the console, /review and "
                             "/metrics, acting as the tenant's key) or viewer (the console and "
                             "/metrics, read-only)")
    actions.add_parser("list", parents=[common], help="the tenant's accounts (never a credential)",
                       description="List the tenant's annotator accounts: name, panels, state and "
                                   "dates (never a credential).")
    for action, text in (("revoke", "end a credential and its sessions at once"),
                         ("rotate", "a new credential for the account (the old one ends)")):
        sub = actions.add_parser(action, parents=[common], help=text,
                                 description=f"{text[0].upper()}{text[1:]}.")
        sub.add_argument("annotator", help="account id or name")
    parser.set_defaults(handler=run_annotators)
