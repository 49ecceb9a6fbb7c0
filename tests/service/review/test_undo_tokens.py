"""The annotator page's undo tokens (review/undo.py): bound to the tenant, the annotator, the
verdict and the label's time, signed with the server's key, and worthless after the minute."""

from __future__ import annotations

from judgefuse.service.review.undo import UNDO_WINDOW_S, UndoSigner


def test_undo_tokens_are_bound_to_tenant_annotator_and_the_minute() -> None:
    signer = UndoSigner(b"secret")
    token = signer.issue("t", "ann", "v:1.x", 1000.5)
    assert signer.read(token, "t", "ann", now=1001.0) is not None
    found = signer.read(token, "t", "ann", now=1000.5 + UNDO_WINDOW_S - 1)
    assert found is not None and (found.verdict_id, found.labelled_at) == ("v:1.x", 1000.5)
    assert signer.read(token, "t", "ann", now=1000.5 + UNDO_WINDOW_S + 1) is None
    assert signer.read(token, "t", "bob", now=1001.0) is None
    assert signer.read(token, "u", "ann", now=1001.0) is None
    assert signer.read(token.replace("v:1.x", "v:2"), "t", "ann", now=1001.0) is None
    assert UndoSigner(b"other").read(token, "t", "ann", now=1001.0) is None
    assert signer.read("garbage", "t", "ann") is None and signer.read(None, "t", "ann") is None
