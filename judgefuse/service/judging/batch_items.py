"""Per-item checks of a batch, made before any judge is called: a bad item is that item's error.

An item that failed the schema (:class:`~judgefuse.service.schemas.InvalidItem`), breaks a
limit (:func:`~judgefuse.service.judging.request_checks.check_request`), names an unknown panel or
method, or repeats an earlier item's id gets its own 4xx in ``results``; the other items are
judged as usual. (Before, one such item refused the whole batch, or, when it failed only at
storage time, turned the batch into a 500 after the good items had been stored.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from judgefuse.service.errors import FieldProblem, InvalidFields, ServiceError
from judgefuse.service.schemas import InvalidItem, JudgeRequest

__all__ = ["batch_item_problems"]


def batch_item_problems(
    items: Sequence[JudgeRequest | InvalidItem], check: Callable[[JudgeRequest, str], object]
) -> dict[int, ServiceError]:
    """index -> the error that item answers with (items absent from the map are judged).
    ``check(item, prefix)`` raises the :class:`ServiceError` of an item that cannot be judged."""
    problems: dict[int, ServiceError] = {}
    first_with_id: dict[str, int] = {}
    for i, item in enumerate(items):
        prefix = f"body.items[{i}]"
        if isinstance(item, InvalidItem):
            problems[i] = InvalidFields.of_pydantic(prefix, item.errors)
            continue
        try:
            check(item, prefix)
        except ServiceError as exc:
            problems[i] = exc
            continue
        if item.id is not None:
            earlier = first_with_id.setdefault(item.id, i)
            if earlier != i:
                problems[i] = FieldProblem(f"{prefix}.id", f"the same id as body.items[{earlier}]")
    return problems
