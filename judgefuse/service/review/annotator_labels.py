"""A label given through ``POST /v1/feedback`` or the review page, with the caller's role applied.

A tenant key labels any verdict of its tenant, as always. An annotator credential labels only
verdicts of its panels (403 otherwise, before anything is written) and each label it gives is
noted in its own history (``GET /v1/annotators/me``, :mod:`judgefuse.service.kernel.accounts`).
Every label also names its author in the verdict's label history (:func:`label_author`).
"""

from __future__ import annotations

from typing import Any

from judgefuse.service.kernel.accounts import AnnotatorAccounts
from judgefuse.service.kernel.stored_text import check_verdict_id
from judgefuse.service.review.labels import LabelService
from judgefuse.service.schemas import LabelResult
from judgefuse.service.web.auth import Principal

__all__ = ["label_as", "label_author"]


def label_author(principal: Principal, name: str | None = None) -> str:
    """Who gave a label, as the label history shows it: an annotator account's name and id,
    the annotator name typed on the review page with the tenant key, or ``api`` (the tenant
    key on ``POST /v1/feedback``). Never the key or credential itself."""
    account = principal.account
    if account is not None:
        return f"{account.name} ({account.role} {account.id})"[:256]
    return f"{name} (tenant key)"[:256] if name else "api"


async def label_as(
    principal: Principal, labels: LabelService, accounts: AnnotatorAccounts,
    verdict_id: str, label: Any, *extra: Any, name: str | None = None,
) -> LabelResult:
    """``labels.feedback`` for ``principal`` (``extra``: the label's further arguments;
    ``name``: the review page's annotator name, for the history)."""
    account = principal.account
    by = label_author(principal, name)
    if account is None:
        return await labels.feedback(principal.tenant, verdict_id, label, *extra, by=by)
    check_verdict_id(principal.tenant, verdict_id)
    record = await labels.storage.get_verdict(principal.tenant, verdict_id)
    if record is not None:
        principal.check_panel(record.panel, field="body.verdict_id")
    result = await labels.feedback(principal.tenant, verdict_id, label, *extra, by=by)
    await accounts.record_label(account, verdict_id, record.panel if record else "",
                                str(result.label), result.status)
    return result
