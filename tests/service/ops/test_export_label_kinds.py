"""An export keeps a tie or both-bad label as what it is: the item's ``label`` (a preference,
what the offline tools score) stays unset, the kind is its ``tie_label`` (counted apart offline),
and the kind and comment are in the item's metadata."""

from __future__ import annotations

from jf_test_support.storage_support import make_record

from judgefuse.judges.types import JudgedItem
from judgefuse.service.ops.export import META_KEY, judged_item_of


def test_ties_and_both_bad_export_as_kinds_not_preferences() -> None:
    for kind, item_label in (("A", "A"), ("B", "B"), ("tie", None), ("both_bad", None)):
        record = make_record("v1").model_copy(update={
            "label": kind, "labelled_at": 5.0, "label_comment": f"{kind}!"})
        item = judged_item_of(record)
        assert item is not None and item.item.label == item_label
        assert item.item.outcome == kind  # a tie or both_bad label is the item's tie_label
        assert item.item.metadata[META_KEY]["label_kind"] == kind
        assert item.item.metadata[META_KEY]["label_comment"] == f"{kind}!"
        assert JudgedItem.model_validate_json(item.model_dump_json()) == item  # reads back
